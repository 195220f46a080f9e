#!/usr/bin/env python3
"""Writes the configs of paper 000's DP sweeps (section 4, Fig. 2) as experiments/dp_000/dp_000_*.toml.

The runner reads one point per file (no key sweeps within a config), so each point of the grid
is its own config. 000's grid is one-at-a-time around the default (epsilon, l, c) = (8, 100, 50):
epsilon in {2, 4, 8, 16, 32, 64}, l in {20, 40, 60, 80, 100}, c in {10, 20, ..., 100}. The
default point is written once (dp_000_<dataset>_default.toml) and left out of the three sweeps.
Every point: 100 samples per user, a test set of 1000 samples, anchor Unif[0, 1) with a = 3000,
SameSpan-Orth bases (000 Algorithm 1), OP = ODC with target A_1 (odc_rotation = "identity"),
FT = Imakura-DC, GE = Kawakami-DC, Central and Individual (Local); an MLP with one hidden layer
of 256 ReLU units and Adam at learning rate 0.002; delta = 1e-3; 10 runs; all points of one
dataset share the seed, so the sweeps use common random numbers. Also one config per dataset at
the default point with the noise on the raw rows instead (paper 001's DP baseline).

Usage: experiments/dp_000/configs.py [--out DIR]   (default: the folder of this script)
"""
import argparse
import os

DATASETS = {"mnist": "MNIST", "fashion-mnist": "Fashion-MNIST"}
DEFAULT = {"epsilon": 8, "dim": 100, "users": 50}
SWEEPS = {
    "eps": ("epsilon", [2, 4, 8, 16, 32, 64]),
    "l": ("dim", [20, 40, 60, 80, 100]),
    "c": ("users", list(range(10, 101, 10))),
}

TEMPLATE = """\
# Paper 000 section 4 (Fig. 2), {title}:
# {what}.
# {noise}:
# AGM with delta = 1e-3 and row range r = 1 (see
# include/dcalign/experiment.hpp); anchor Unif[0, 1) with a = 3000, 100 samples per user,
# 1000 test samples, SameSpan-Orth, MLP 256 with Adam lr 0.002, 10 runs.
# Written by experiments/dp_000/configs.py.
name = "{name}"
dataset = "{dataset}"
partition = "iid"
users = {users}
samples_per_user = 100
test_samples = 1000
anchor_rows = 3000
anchor = "uniform"
dim = {dim}
conditions = ["SameSpan-Orth"]
methods = ["central", "local", "imakura", "kawakami", "odc"]
odc_rotation = "identity"
models = ["mlp"]
mlp_hidden = 256
mlp_learning_rate = 0.002
metrics = ["accuracy"]
trials = 10
seed = 2000
dp_target = "{target}"
dp_epsilon = {epsilon}
dp_delta = 1e-3
dp_row_range = 1
"""


def write(out, name, text):
    with open(os.path.join(out, name + ".toml"), "w") as f:
        f.write(text)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    out = p.parse_args().out
    count = 0
    for dataset, title in DATASETS.items():
        stem = "dp_000_" + dataset.replace("-", "_")
        points = [(stem + "_default", dict(DEFAULT), "the default point (8, 100, 50)", "released"),
                  (stem + "_raw_default", dict(DEFAULT),
                   "the default point, noise on the raw rows (001's DP baseline: Central)", "raw")]
        for tag, (key, values) in SWEEPS.items():
            for v in values:
                if v == DEFAULT[key]:
                    continue  # the default point has its own file
                point = dict(DEFAULT, **{key: v})
                points.append((f"{stem}_{tag}{v}", point,
                               f"{key} = {v}, the others at the default (8, 100, 50)", "released"))
        for name, point, what, target in points:
            noise = ("DP on the released representations (000 eq. 3)" if target == "released"
                     else "DP noise on the raw training rows (001 section 7.1)")
            write(out, name, TEMPLATE.format(title=title, what=what, name=name, dataset=dataset,
                                             target=target, noise=noise, **point))
            count += 1
    print(f"wrote {count} configs to {out}")


if __name__ == "__main__":
    main()
