#!/usr/bin/env python3
"""Writes the configs of paper 002's Fig. 2 (section 3.2) as experiments/params_002/*.toml.

002 explores two DC parameters on MNIST in its Type 1 setting (users of 100 samples each, the
number of users growing; a 1000-sample holdout held by user 1) and three classifiers on the DC
representation. The text gives the fixed values (500 anchors while the IR dimension varies, IR
dimension 50 while the anchor count varies; kNN with k = 5, an RBF SVM with C = 10 and
gamma = 0.01) but not the values swept, which appear only on the figure's axes. Ours are chosen:
  params_002_dim_d<l>: one config per IR dimension l in {10, 20, 30, 50, 100} at 500 anchors,
                      models NN, kNN and SVM (panel (c) is params_002_dim_d50); one config per
                      value rather than a [sweep] over dim so that each finishes on its own;
  params_002_anchors: anchor_rows in {100, 250, 500, 1000, 2000} at dim 50, NN only;
  params_002_svm_standardized: the dim = 50, 500-anchor point again for kNN and SVM with
                      standardize_aligned = true (not in 002; the remedy for the near-flat RBF
                      kernel on Imakura-DC's small-scale aligned features);
  params_002_anchors_standardized: DC-NN with standardize_aligned = true at 100, 500 and 2000
                      anchors and 2, 5 and 10 users (not in 002; a check of whether the drop
                      beyond 500 anchors comes from the aligned features' scale, which for
                      Imakura-DC shrinks as the anchor grows).
Each sweeps users over 1 to 10 (dim 100 is the largest a 100-sample user's SVD allows). The rest
is experiments/fedavg_002's Type 1 protocol without FedAvg and ODC: Imakura-DC on per-user SVD
bases (DiffSpan-Orth) with a Unif[0, 1) anchor, the 512-128 ReLU network for 24 epochs of
batch 32 (Adam at 1e-3, no L2, no early stopping), Central and Local (002's Individual, user 1
alone) as baselines. All share seed 3000, the seed of fedavg_002's MNIST Type 1 configs, so the
dim = 50, 500-anchor points draw the same data, anchors and models as those runs.

Usage: experiments/params_002/configs.py [--out DIR] [--trials N]
"""
import argparse
import os

USERS = list(range(1, 11))
FAMILIES = {
    **{"dim_d%d" % l: dict(what="IR dimension %d at 500 anchors" % l, anchor_rows=500, dim=l,
                           models=["mlp", "knn", "svm"], sweep=None, extra="")
       for l in (10, 20, 30, 50, 100)},
    "anchors": dict(what="anchor count at IR dimension 50", anchor_rows=500, dim=50,
                    models=["mlp"], sweep=("anchor_rows", [100, 250, 500, 1000, 2000]),
                    extra=""),
    "svm_standardized": dict(what="kNN and SVM on standardized aligned features (not in 002)",
                             anchor_rows=500, dim=50, models=["knn", "svm"], sweep=None,
                             extra="standardize_aligned = true\n"),
    "anchors_standardized": dict(what="NN on standardized aligned features (not in 002)",
                                 anchor_rows=500, dim=50, models=["mlp"],
                                 sweep=("anchor_rows", [100, 500, 2000]), users=[2, 5, 10],
                                 methods=["imakura"], extra="standardize_aligned = true\n"),
}

TEMPLATE = """\
# Paper 002 Fig. 2 on MNIST, Type 1 (100 samples per user): {what}.
# Written by experiments/params_002/configs.py (see its docstring for the protocol).
name = "{name}"
dataset = "mnist"
partition = "iid"
users = 1
samples_per_user = 100
test_samples = 1000
test_holder = "first"
anchor_rows = {anchor_rows}
anchor = "uniform"
dim = {dim}
conditions = ["DiffSpan-Orth"]
methods = [{methods}]
models = [{models}]
{extra}{mlp}{knn}{svm}metrics = ["accuracy"]
trials = {trials}
seed = 3000

[sweep]
{sweep}"""

MLP = """\
mlp_hidden_layers = [512, 128]
mlp_max_epochs = 24
mlp_batch_size = 32
mlp_early_stopping = false
mlp_n_iter_no_change = 24
mlp_alpha = 0
mlp_learning_rate = 0.001
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--trials", type=int, default=10)
    a = p.parse_args()
    for family, f in FAMILIES.items():
        name = "params_002_" + family
        sweep = "users = %s\n" % f.get("users", USERS)
        if f["sweep"]:
            key, values = f["sweep"]
            sweep = "%s = %s\n%s" % (key, values, sweep)
        text = TEMPLATE.format(
            what=f["what"], name=name, anchor_rows=f["anchor_rows"], dim=f["dim"],
            models=", ".join('"%s"' % m for m in f["models"]), extra=f["extra"],
            methods=", ".join('"%s"' % m for m in f.get("methods", ["central", "local", "imakura"])),
            mlp=MLP if "mlp" in f["models"] else "",
            knn="knn_k = 5\n" if "knn" in f["models"] else "",
            svm="svm_C = 10\nsvm_gamma = 0.01\n" if "svm" in f["models"] else "",
            trials=a.trials, sweep=sweep)
        with open(os.path.join(a.out, name + ".toml"), "w") as out:
            out.write(text)
    print("wrote %d configs to %s" % (len(FAMILIES), a.out))


if __name__ == "__main__":
    main()
