#!/usr/bin/env python3
"""HOOK: the PyTorch peer on the GPU (issue 5). Not implemented yet.

The driver runs `torch_peer.py` exactly like numpy_peer.py (same arguments, same JSON answer on
stdout; see that file's docstring) when given `--peers torch`, and records its series with
backend "cuda". To implement it, time the straightforward PyTorch version on the GPU: anchors
as one tensor (c, a, l) on the device, ODC as M = A^T (A_1 O) batched (torch.matmul), then
torch.linalg.svd on the batched products and G = U V^T; synchronise (torch.cuda.synchronize())
before reading the clock. Until then every series is reported as "not_implemented", so a sweep
with --peers numpy,torch still runs and says why the GPU peer is missing.
"""

import argparse
import json
import sys


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--describe", action="store_true")
    ap.add_argument("--series", default="odc:float64")
    args, _ = ap.parse_known_args(argv)
    if args.describe:
        print(json.dumps({"peer": "torch", "implemented": False}))
        return 0
    results = []
    for item in args.series.split(","):
        method, _, precision = item.partition(":")
        results.append({"method": method, "precision": precision or "float64",
                        "status": "not_implemented",
                        "reason": "bench/torch_peer.py is a hook; the PyTorch peer is not "
                                  "implemented yet"})
    print(json.dumps({"results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
