"""experiments/boxplots_004.py: the box statistics against hand-computed and NumPy values, the
reading of the per-trial records, and the files a run writes."""
import csv
import importlib.util
import os
import random
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "boxplots_004", os.path.join(HERE, "..", "boxplots_004.py"))
boxplots = importlib.util.module_from_spec(spec)
spec.loader.exec_module(boxplots)


def write_records(path, cells, extra_metric=True):
    """cells: {method: [roc_auc per trial]}; trials written in reverse order."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["trial", "condition", "method", "model", "metric", "value", "seconds"])
        for method, values in cells.items():
            for t in reversed(range(len(values))):
                w.writerow([t, "-", method, "logreg", "roc_auc", values[t], 0.1])
                if extra_metric:
                    w.writerow([t, "-", method, "logreg", "align_seconds", 99.0, 0.1])


class BoxStats(unittest.TestCase):
    def test_hand_computed(self):
        # 1..9 and 100: positions 2.25, 4.5, 6.75 of the sorted values; IQR 4.5, so 100 lies
        # beyond q3 + 1.5 IQR = 14.5 and the upper whisker ends at 9.
        b = boxplots.box_stats([100, 9, 8, 7, 6, 5, 4, 3, 2, 1])
        self.assertEqual(b["n"], 10)
        self.assertAlmostEqual(b["q1"], 3.25)
        self.assertAlmostEqual(b["median"], 5.5)
        self.assertAlmostEqual(b["q3"], 7.75)
        self.assertEqual((b["whisker_lo"], b["whisker_hi"], b["outliers"]), (1, 9, 1))
        one = boxplots.box_stats([0.7])
        self.assertEqual((one["q1"], one["median"], one["q3"], one["outliers"]), (0.7, 0.7, 0.7, 0))

    def test_quartiles_match_numpy(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("NumPy not installed")
        rng = random.Random(4)
        for n in (2, 5, 40, 100):
            values = [rng.random() for _ in range(n)]
            b = boxplots.box_stats(values)
            q1, med, q3 = np.percentile(values, [25, 50, 75])
            self.assertAlmostEqual(b["q1"], q1, places=12)
            self.assertAlmostEqual(b["median"], med, places=12)
            self.assertAlmostEqual(b["q3"], q3, places=12)


class Run(unittest.TestCase):
    def test_reads_one_metric_in_trial_order(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.csv")
            write_records(path, {"opp": [0.8, 0.9, 0.7], "local": [0.6, 0.5, 0.4]})
            v = boxplots.read_values(path)
            self.assertEqual(v, {"opp": [0.8, 0.9, 0.7], "local": [0.6, 0.5, 0.4]})

    def test_writes_figures_and_numbers(self):
        name = boxplots.FIGURES[0][1]
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")
            write_records(os.path.join(d, name + ".csv"),
                          {"gopp": [0.82, 0.84, 0.86, 0.88], "central": [0.9, 0.91, 0.92, 0.93]})
            self.assertEqual(boxplots.main(["--results", d, "--out", out]), 0)
            self.assertTrue(os.path.getsize(os.path.join(out, f"fig04_{name}.png")) > 1000)
            with open(os.path.join(out, "README.md")) as f:
                text = f.read()
            # The paper's order (Central before GOPP) and the quartiles of the values above.
            self.assertLess(text.index("| Central |"), text.index("| GOPP |"))
            self.assertIn("| GOPP | 4 | 0.835 | 0.850 | 0.865 | 0.820-0.880 | 0 |", text)
            # The other eight figures' records are absent here: skipped, not invented.
            self.assertNotIn("Fig. 5", text)


if __name__ == "__main__":
    unittest.main()
