"""The figure and ordering scripts of the sweep families (experiments/dp_000/plot.py and
experiments/fedavg_002/plot.py) on small result files written here: the points they read, the
orderings they mark as holding or not, and the files they write."""
import importlib.util
import json
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def load_module(family):
    spec = importlib.util.spec_from_file_location(
        family + "_plot", os.path.join(HERE, "..", family, "plot.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_result(directory, name, config, cells, rounds=None):
    """cells: {(method, model): [accuracy per trial]}."""
    records = []
    for (method, model), values in cells.items():
        for t, v in enumerate(values):
            records.append({"trial": t, "condition": "-", "method": method, "model": model,
                            "metric": "accuracy", "value": v, "seconds": 0})
    j = {"name": name, "config": config, "wall_seconds": 1.0, "records": records}
    if rounds is not None:
        j["rounds"] = rounds
    with open(os.path.join(directory, name + ".json"), "w") as f:
        json.dump(j, f)


class DpPlot(unittest.TestCase):
    def test_sweeps_and_orderings(self):
        dp = load_module("dp_000")
        with tempfile.TemporaryDirectory() as d:
            def point(name, eps, dim, users, odc, imakura, kawakami, local=0.5):
                write_result(d, name, {"dataset": "mnist", "dp_epsilon": eps, "dim": dim,
                                       "users": users},
                             {("odc", "mlp"): [odc, odc + 0.01], ("imakura", "mlp"): [imakura] * 2,
                              ("kawakami", "mlp"): [kawakami] * 2, ("central", "mlp"): [0.95] * 2,
                              ("local", "mlp"): [local] * 2})
            point("dp_000_mnist_default", 8, 100, 50, 0.90, 0.85, 0.80)
            point("dp_000_mnist_eps2", 2, 100, 50, 0.70, 0.75, 0.60)  # ODC below Imakura here
            point("dp_000_mnist_eps64", 64, 100, 50, 0.93, 0.88, 0.82)
            point("dp_000_mnist_l20", 8, 20, 50, 0.91, 0.80, 0.70)  # ODC falls as l grows
            point("dp_000_mnist_c10", 8, 100, 10, 0.85, 0.80, 0.75)
            write_result(d, "dp_000_mnist_raw_default", {"dataset": "mnist", "dp_epsilon": 8,
                                                         "dim": 100, "users": 50},
                         {("central", "mlp"): [0.6, 0.62]})
            sweeps, raw = dp.load(d)
            points = sweeps["mnist"]
            # The default point lies on all three axes.
            self.assertEqual(sorted(points), [("c", 10), ("c", 50), ("eps", 2), ("eps", 8),
                                              ("eps", 64), ("l", 20), ("l", 100)])
            self.assertAlmostEqual(raw["mnist"]["central"][1], 0.62)
            checks = dict(dp.check_orderings(points))
            order = dict(checks["ODC above Imakura-DC above Kawakami-DC"])
            self.assertFalse(order[("eps", 2)])
            self.assertTrue(order[("eps", 64)])
            self.assertEqual(dict(checks["odc rising with l"]), {("l", 100): False})
            self.assertEqual(dict(checks["imakura rising with eps"]),
                             {("eps", 8): True, ("eps", 64): True})
            dp.sys.argv = ["plot.py", d]
            dp.main()
            self.assertTrue(os.path.getsize(os.path.join(d, "dp_000_mnist.png")) > 1000)
            with open(os.path.join(d, "dp_000_summary.md")) as f:
                text = f.read()
            self.assertIn("ODC above Imakura-DC above Kawakami-DC: not at eps=2.", text)
            self.assertIn("baseline): 61.0.", text)


class FedAvgPlot(unittest.TestCase):
    def test_points_orderings_and_round_curves(self):
        fp = load_module("fedavg_002")
        with tempfile.TemporaryDirectory() as d:
            for users, dc, fed1 in ((1, 0.70, 0.60), (2, 0.80, 0.75), (8, 0.90, 0.92)):
                rounds = [{"trial": 0, "method": "fedavg-1E32B", "round": r, "train_accuracy": 0.5,
                           "test_accuracy": 0.4 + 0.1 * r} for r in (1, 2)]
                cells = {("imakura", m): [dc] for m in ("mlp", "knn", "svm")}
                cells.update({("fedavg-1E32B", "mlp"): [fed1], ("fedavg-3E32B", "mlp"): [dc + 0.05],
                              ("odc", "mlp"): [dc], ("central", "mlp"): [0.95],
                              ("local", "mlp"): [0.5], ("local", "knn"): [0.4],
                              ("local", "svm"): [0.4]})
                write_result(d, "fedavg_002_mnist_type1_c%d" % users,
                             {"dataset": "mnist", "users": users, "samples_per_user": 100}, cells,
                             rounds)
            points, rounds = fp.load(d)
            series = points[("mnist", "type1")]
            self.assertEqual(sorted(series), [1, 2, 8])
            checks = dict(fp.orderings("mnist", "type1", [1, 2, 8], series))
            self.assertEqual(checks["DC above FedAvg 1E32B with few users (c <= 3)"],
                             [(1, True), (2, True)])
            self.assertEqual(checks["FedAvg 1E32B slightly above DC beyond seven users"],
                             [(8, True)])
            self.assertEqual(checks["FedAvg 3E32B within 2 points of DC"],
                             [(1, False), (2, False), (8, False)])
            # DC kNN equals DC NN in these numbers: "below DC-NN" does not hold.
            self.assertEqual(checks["DC-knn below DC-NN and above Individual-knn"],
                             [(2, False), (8, False)])
            fp.sys.argv = ["plot.py", d]
            fp.main()
            for png in ("fedavg_002_mnist_type1.png", "fedavg_002_rounds.png"):
                self.assertTrue(os.path.getsize(os.path.join(d, png)) > 1000)
            with open(os.path.join(d, "fedavg_002_summary.md")) as f:
                text = f.read()
            self.assertIn("| 8 | 90.0 | 90.0 | 92.0 | 95.0 | 95.0 | 50.0 |", text)


if __name__ == "__main__":
    unittest.main()
