#!/usr/bin/env python3
"""Writes the configs of paper 002's two experiment types as experiments/fedavg_002/*.toml.

The runner reads one point per file, so each point of a sweep is its own config:
  Type 1 (002 section 3.3): 100 samples per user, 1 to 10 users;
  Type 2 (002 section 3.4): 5 users, 100 to 1000 samples per user (steps of 100).
Every point, on MNIST and Fashion-MNIST: the test set is 1000 samples held by user 1
(test_holder = "first"; Local is 002's Individual baseline, user 1 alone); DC as in 002,
Imakura-DC on per-user SVD bases (DiffSpan-Orth; the Haar rotation does not change Imakura-DC's
result) with a Unif[0, 1) anchor of 500 rows and l = 50, and also ODC; the 2-layer 512-128 ReLU
network trained for 24 epochs with batch 32 (no early stopping, no L2 penalty, Adam at 1e-3, as
Keras would by default), kNN with k = 5 and an RBF SVM with C = 10 and gamma = 0.01; FedAvg
1E32B and 3E32B with R = 24 rounds and full participation on the same network; 10 runs. All
points of one dataset and type share the seed (common random numbers).

Usage: experiments/fedavg_002/configs.py [--out DIR] [--trials N]
"""
import argparse
import os

DATASETS = {"mnist": "MNIST", "fashion-mnist": "Fashion-MNIST"}
TYPES = {
    "type1": ("users", list(range(1, 11)), {"samples_per_user": 100}),
    "type2": ("samples_per_user", list(range(100, 1001, 100)), {"users": 5}),
}

TEMPLATE = """\
# Paper 002 {kind} on {title}: {users} user(s) of {samples} samples.
# Written by experiments/fedavg_002/configs.py (see its docstring for the protocol).
name = "{name}"
dataset = "{dataset}"
partition = "iid"
users = {users}
samples_per_user = {samples}
test_samples = 1000
test_holder = "first"
anchor_rows = 500
anchor = "uniform"
dim = 50
conditions = ["DiffSpan-Orth"]
methods = ["central", "local", "imakura", "odc", "fedavg"]
models = ["mlp", "knn", "svm"]
mlp_hidden_layers = [512, 128]
mlp_max_epochs = 24
mlp_batch_size = 32
mlp_early_stopping = false
mlp_n_iter_no_change = 24
mlp_alpha = 0
mlp_learning_rate = 0.001
knn_k = 5
svm_C = 10
svm_gamma = 0.01
metrics = ["accuracy"]
trials = {trials}
seed = {seed}

[fedavg]
configurations = ["1E32B", "3E32B"]
rounds = 24
participation = 1.0
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--trials", type=int, default=10)
    a = p.parse_args()
    count = 0
    for d_index, (dataset, title) in enumerate(DATASETS.items()):
        for t_index, (kind, (key, values, fixed)) in enumerate(TYPES.items()):
            for v in values:
                point = dict(fixed, **{key: v})
                name = "fedavg_002_%s_%s_%s%d" % (dataset.replace("-", "_"), kind,
                                                  "c" if key == "users" else "n", v)
                text = TEMPLATE.format(kind="Type " + kind[-1], title=title, name=name,
                                       dataset=dataset, users=point["users"],
                                       samples=point["samples_per_user"], trials=a.trials,
                                       seed=3000 + 10 * d_index + t_index)
                with open(os.path.join(a.out, name + ".toml"), "w") as f:
                    f.write(text)
                count += 1
    print("wrote %d configs to %s" % (count, a.out))


if __name__ == "__main__":
    main()
