#!/usr/bin/env python3
"""Data Collaboration end to end in Python (examples/README.md).

Several simulated users hold private samples of one 3-class problem, each draws a secret basis
F_i (its own top-l principal subspace, Haar-mixed) and releases X~_i = X_i F_i and A_i = A F_i
for a shared anchor A. The analyst aligns the A_i with the `dcalign` command line
(`dcalign align --anchors A.npy --out G.npy`), maps every X~_i by its G_i, trains a small
PyTorch MLP on the stacked aligned data and evaluates it on held-out samples that each user maps
by F_i G_i. Prints the accuracy and exits 1 when it is below --min-accuracy.

The CLI is $DCALIGN_CLI, else `dcalign` on PATH, else build*/src/cli/dcalign beside this
checkout. Without NumPy, PyTorch or the CLI it prints why and exits 0 ("skipped").
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING, NoReturn, Optional

if TYPE_CHECKING:  # annotations only: NumPy itself is imported in main(), which skips without it
    import numpy.typing as npt


def skip(why: str) -> NoReturn:
    print(f"train_aligned.py: skipped: {why}")
    sys.exit(0)


def find_cli() -> Optional[str]:
    if os.environ.get("DCALIGN_CLI"):
        return os.environ["DCALIGN_CLI"]
    on_path = shutil.which("dcalign")
    if on_path:
        return on_path
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for cand in sorted(glob.glob(os.path.join(root, "build*", "src", "cli", "dcalign"))):
        if os.access(cand, os.X_OK):
            return cand
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--samples", type=int, default=150, help="training samples per user")
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--min-accuracy", type=float, default=0.8, help="chance is 1/3")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", help="where A.npy and G.npy go (default: a temporary folder)")
    args = ap.parse_args()

    try:
        import numpy as np
    except ImportError:
        skip("NumPy is not installed")
    try:
        import torch
    except ImportError:
        skip("PyTorch is not installed (pip install torch)")
    cli = find_cli()
    if not cli or not os.access(cli, os.X_OK):
        skip("the dcalign CLI was not found (set DCALIGN_CLI or build dcalign)")

    features, latent, classes, dim, anchor_rows = 20, 4, 3, 4, 200
    rng = np.random.default_rng(args.seed)
    means = 3.0 * rng.standard_normal((classes, latent))
    B = rng.standard_normal((features, latent))

    def draw(n: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        y = rng.integers(0, classes, n)
        z = means[y] + rng.standard_normal((n, latent))
        return z @ B.T + 0.1 * rng.standard_normal((n, features)), y

    # 1. Users: private data, secret bases F_i = V_i E_i, released representations.
    anchor = rng.uniform(size=(anchor_rows, features))  # shared, from a common seed
    bases: list[npt.NDArray[np.float64]] = []
    released: list[npt.NDArray[np.float64]] = []
    released_anchors: list[npt.NDArray[np.float64]] = []
    labels: list[npt.NDArray[np.int64]] = []
    tests: list[tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]] = []
    for _ in range(args.users):
        X, y = draw(args.samples)
        tests.append(draw(args.samples // 2))
        _, _, vt = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)
        q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
        F = vt[:dim].T @ (q * np.sign(np.diag(r)))  # Haar-mixed top-l subspace
        bases.append(F)
        released.append(X @ F)
        released_anchors.append(anchor @ F)
        labels.append(y)

    # 2. Analyst: align with the dcalign CLI (G[i] such that A[i] @ G[i] are aligned).
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or tmp
        os.makedirs(work, exist_ok=True)
        a_file, g_file = os.path.join(work, "A.npy"), os.path.join(work, "G.npy")
        np.save(a_file, np.stack(released_anchors))
        subprocess.run([cli, "align", "--method", "odc", "--anchors", a_file, "--out", g_file],
                       check=True)
        G = np.load(g_file)
    print(f"aligned {args.users} users with {cli}: G has shape {G.shape}")

    X = torch.tensor(np.concatenate([x @ g for x, g in zip(released, G)]), dtype=torch.float32)
    y = torch.tensor(np.concatenate(labels), dtype=torch.int64)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(dim, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, classes))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(args.epochs):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(X), y)
        torch.autograd.backward(loss)  # loss.backward(): untyped in PyTorch 1.13
        opt.step()
    print(f"trained {args.epochs} epochs, loss {loss.item():.4f}")

    # 3. Each user maps its held-out samples by F_i G_i.
    correct = total = 0
    with torch.no_grad():
        for i, ((Xt, yt), F, g) in enumerate(zip(tests, bases, G)):
            pred = model(torch.tensor(Xt @ F @ g, dtype=torch.float32)).argmax(1).numpy()
            print(f"  user {i + 1}: test accuracy {np.mean(pred == yt):.3f}")
            correct += int(np.sum(pred == yt))
            total += len(yt)
    acc = correct / total
    print(f"test accuracy {acc:.3f} over {total} samples (threshold {args.min_accuracy:.2f}, "
          f"chance {1 / classes:.2f})")
    if acc < args.min_accuracy:
        print("FAILED: accuracy below the threshold")
        return 1
    print("train_aligned.py: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
