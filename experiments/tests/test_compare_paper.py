import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import compare_paper  # noqa: E402


def result(dataset, records, trials=2):
    return {"config": {"dataset": dataset, "trials": trials}, "records": records}


def rec(model, cond, method, value, metric="accuracy"):
    return {"model": model, "condition": cond, "method": method, "metric": metric, "value": value}


class ComparePaper(unittest.TestCase):
    def test_mean_ci_matches_hand_computation(self):
        # 10 values 0..9: mean 4.5, sample sd sqrt(110/12) = 3.0277; t(0.975, 9) = 2.2621571628
        # (scipy.stats.t.ppf).
        mean, ci = compare_paper.mean_ci(list(range(10)))
        self.assertAlmostEqual(mean, 4.5)
        self.assertAlmostEqual(ci, 2.2621571628 * 3.0276503540974917 / 10 ** 0.5, places=9)
        self.assertEqual(compare_paper.mean_ci([3.0]), (3.0, 0.0))

    def test_cells_are_matched_and_flagged(self):
        r = result("mnist", [rec("svm", "SameSpan", "odc", 0.80), rec("svm", "SameSpan", "odc", 0.82),
                             rec("svm", "-", "central", 0.96), rec("svm", "-", "central", 0.962),
                             rec("svm", "-", "gopp", 0.9), rec("svm", "-", "central", 0.5, "roc_auc")])
        rows = {(m, c, meth): row for (m, c, meth, *row) in compare_paper.compare(r)}
        self.assertEqual(set(rows), {("svm", "SameSpan", "odc"), ("svm", "-", "central")})
        mean, _, paper, delta, flagged = rows[("svm", "SameSpan", "odc")]
        self.assertAlmostEqual(mean, 81.0)
        self.assertEqual(paper, 88.8)
        self.assertAlmostEqual(delta, -7.8)
        self.assertTrue(flagged)
        self.assertFalse(rows[("svm", "-", "central")][4])
        text = compare_paper.markdown(r, compare_paper.compare(r), 2.0)
        self.assertIn("1 of 2 cells within 2.0 pp", text)

    def test_fashion_mnist_mlp_values(self):
        cells = compare_paper.paper_cells("fashion-mnist", "mlp")
        self.assertEqual(cells[("DiffSpan-Orth", "odc")], 84.3)
        self.assertEqual(cells[("-", "local")], 61.1)
        self.assertEqual(len(cells), 14)

    def test_other_dataset_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.json")
            with open(path, "w") as f:
                json.dump(result("adult", [rec("mlp", "-", "central", 0.8)]), f)
            with self.assertRaises(SystemExit) as e:
                with redirect_stdout(io.StringIO()):
                    compare_paper.main([path])
            self.assertIn("adult", str(e.exception.code))


if __name__ == "__main__":
    unittest.main()
