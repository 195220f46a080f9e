#!/usr/bin/env python3
"""Data Collaboration with PyTorch tensors and the dcalign module (examples/README.md).

Two or three users hold private samples of one 3-class problem as torch tensors on --device.
Each draws a secret basis F_i (dcalign.secret_basis: its own top-l principal subspace,
Haar-mixed) and releases X~_i = X_i F_i and A_i = A F_i (dcalign.release) for the shared anchor
A (dcalign.make_anchor, from a common seed). The analyst stacks the A_i in dcalign's layout,
aligns them (dcalign.align, ODC), maps every X~_i by its G_i (dcalign.transform) and trains a
small PyTorch MLP on the stacked aligned data with mini-batches drawn on the device. Each user
maps its held-out samples by F_i G_i; the test accuracy is printed, and the exit status is 1
when it is below --min-accuracy (chance is 1/3).

Every dcalign call takes the tensors through DLPack and returns tensors on their device: on
the CPU without a copy. With --device cuda and a module with the CUDA backend
(dcalign.cuda_available()) the alignment runs on the GPU without leaving it, and the user-side
calls copy their inputs to the host once and their results back once; with a module without it
the script moves the tensors itself and says so. The model trains on the device.

C++ twin: examples/cpp/train_aligned.cpp. Needs the dcalign module (pip install .) and PyTorch;
without either it prints why and exits 0 ("skipped").
"""
from __future__ import annotations

import argparse
import sys
from typing import NoReturn


def skip(why: str) -> NoReturn:
    print(f"torch_training.py: skipped: {why}")
    sys.exit(0)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--users", type=int, default=3)
    ap.add_argument("--samples", type=int, default=200, help="training samples per user")
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--device", default="auto", help="auto (cuda if available) | cpu | cuda")
    ap.add_argument("--min-accuracy", type=float, default=0.8, help="chance is 1/3")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.users < 1 or args.samples < 8 or args.epochs < 1 or args.batch < 1:
        ap.error("--users >= 1, --samples >= 8, --epochs >= 1 and --batch >= 1 are required")

    try:
        import torch
    except ImportError:
        skip("PyTorch is not installed (Debian: apt-get install python3-torch)")
    try:
        import dcalign
    except ImportError:
        skip("the dcalign module is not installed (pip install . in the checkout)")

    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elif args.device in ("cpu", "cuda"):
        device = torch.device(args.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            print("torch_training.py: --device cuda: PyTorch sees no CUDA GPU (a CPU-only build, "
                  "or no GPU visible); use --device cpu", file=sys.stderr)
            return 1
    else:
        ap.error(f"--device {args.device}: expected auto, cpu or cuda")
    takes_device = device.type == "cpu" or dcalign.cuda_available()
    if device.type == "cuda":
        print("note: " + ("the alignment runs on the GPU; the user-side dcalign calls copy "
                          "their inputs to the host once and their results back"
                          if takes_device else "this dcalign module has no usable CUDA "
                          "backend: the tensors go to the host for every dcalign call"))

    # What a dcalign call is given: the tensor itself where the module takes it.
    def host(t: torch.Tensor) -> torch.Tensor:
        return t if takes_device else t.cpu()

    def back(t: torch.Tensor) -> torch.Tensor:
        moved: torch.Tensor = t.to(device)  # Tensor.to is typed Any in PyTorch 1.13
        return moved

    features, latent, classes, dim, anchor_rows = 20, 4, 3, 4, 200
    gen = torch.Generator().manual_seed(args.seed)
    # torch.mul(t, 3.0) computes 3.0 * t, which PyTorch 1.13's stubs type as a float.
    means = torch.mul(torch.randn(classes, latent, generator=gen, dtype=torch.float64), 3.0)
    embed = torch.randn(features, latent, generator=gen, dtype=torch.float64)

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, classes, (n,), generator=gen)
        z = means[y] + torch.randn(n, latent, generator=gen, dtype=torch.float64)
        x = z @ embed.T + 0.1 * torch.randn(n, features, generator=gen, dtype=torch.float64)
        return x.to(device), y.to(device)

    # 1. Users: private data on the device, secret bases, released representations.
    anchor = back(torch.from_numpy(dcalign.make_anchor(anchor_rows, features, seed=args.seed + 7)))
    bases: list[torch.Tensor] = []
    released: list[torch.Tensor] = []
    anchors_released: list[torch.Tensor] = []
    labels: list[torch.Tensor] = []
    tests: list[tuple[torch.Tensor, torch.Tensor]] = []
    for i in range(args.users):
        X, y = draw(args.samples)
        tests.append(draw(args.samples // 2))
        F = back(dcalign.secret_basis(host(X), dim, mixing="haar", seed=1000 * args.seed + i,
                                      center=True))
        bases.append(F)
        released.append(back(dcalign.release(host(X), host(F))))
        anchors_released.append(back(dcalign.release(host(anchor), host(F))))
        labels.append(y)

    # 2. Analyst: the anchor stack (c, a, l) with every A_i column-major (dcalign's layout, read
    #    in place), ODC, and the aligned training data.
    stack = torch.stack([a.T.contiguous() for a in anchors_released]).transpose(1, 2)
    G, report = dcalign.align(host(stack), method="odc")
    G = back(G)
    print(f"aligned {args.users} users on {device}: objective {report['objective']:.3e}, "
          f"orthogonality error {report['orthogonality_error']:.1e}, "
          f"anchors {'copied' if report['input_copied'] else 'read in place'}")
    X = torch.cat([back(dcalign.transform(host(x), host(g))) for x, g in zip(released, G)])
    X, y = X.float(), torch.cat(labels)

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(dim, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, classes)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    batch_gen = torch.Generator(device=device).manual_seed(args.seed)
    for _ in range(args.epochs):
        order = torch.randperm(X.shape[0], generator=batch_gen, device=device)
        for start in range(0, X.shape[0], args.batch):
            idx = order[start:start + args.batch]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(X[idx]), y[idx])
            torch.autograd.backward(loss)  # loss.backward(): untyped in PyTorch 1.13
            opt.step()
    print(f"trained {args.epochs} epochs on {device}, last batch loss {loss.item():.4f}")

    # 3. Each user maps its held-out samples by F_i G_i.
    correct = total = 0
    with torch.no_grad():
        for i, ((Xt, yt), F, g) in enumerate(zip(tests, bases, G)):
            pred = model((Xt @ F @ g).float()).argmax(1)
            hits = int((pred == yt).sum())
            print(f"  user {i + 1}: test accuracy {hits / len(yt):.3f}")
            correct += hits
            total += len(yt)
    acc = correct / total
    print(f"test accuracy {acc:.3f} over {total} samples (threshold {args.min_accuracy:.2f}, "
          f"chance {1 / classes:.2f})")
    if acc < args.min_accuracy:
        print("FAILED: accuracy below the threshold")
        return 1
    print("torch_training.py: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
