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

    def test_nri_cells_orderings_and_times(self):
        r = result("pima-diabetes", [
            rec("logreg", "-", "opp", 0.83, "roc_auc"), rec("logreg", "-", "opp", 0.84, "roc_auc"),
            rec("logreg", "-", "gopp", 0.80, "roc_auc"),
            rec("logreg", "-", "kawakami", 0.5, "roc_auc"),
            rec("logreg", "-", "opp", 0.001, "align_seconds"),
            rec("logreg", "-", "opp", 0.003, "align_seconds"),
            rec("logreg", "-", "opp", 4.0, "constant_workers")])
        r["config"]["protocol"] = "nri-dc"
        rows = {(m, meth): row for (_, m, meth, *row) in compare_paper.compare_nri(r)}
        self.assertEqual(set(rows), {("logreg", "opp"), ("logreg", "gopp"),
                                     ("logreg", "kawakami")})
        mean, _, paper, delta, flagged = rows[("logreg", "opp")]
        self.assertAlmostEqual(mean, 0.835)
        self.assertEqual(paper, 0.820)  # 004 Table 1
        self.assertAlmostEqual(delta, 0.015)
        self.assertFalse(flagged)
        self.assertTrue(rows[("logreg", "gopp")][4])  # 0.80 vs 0.821
        claims = dict(compare_paper.orderings(compare_paper.compare_nri(r)))
        self.assertFalse(claims["logreg: OPP and GOPP within 0.005 (0.835, 0.800)"])
        self.assertTrue(claims["logreg: GEP lowest (0.500)"])
        (table, method, ours, paper_s, ratio), = compare_paper.compare_times(r)
        self.assertEqual((table, method), (4, "opp"))
        self.assertAlmostEqual(ours, 0.002)
        self.assertAlmostEqual(ratio, 0.025 / 0.002)
        text = compare_paper.markdown_nri(r, compare_paper.compare_nri(r), 0.02)
        self.assertIn("2 of 3 cells within 0.02", text)
        self.assertIn("12.5x", text)

    def test_nri_stand_in_is_labelled_and_never_flagged(self):
        r = result("german-credit", [rec("mlp", "-", "opp", 0.6, "roc_auc")])
        r["config"]["protocol"] = "nri-dc"
        (row,) = compare_paper.compare_nri(r)
        self.assertEqual(row[0], 10)
        self.assertFalse(row[7])
        text = compare_paper.markdown_nri(r, [row], 0.02)
        self.assertIn("STAND-IN", text)
        self.assertIn("CreditRating_Historical", text)

    def test_other_dataset_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.json")
            with open(path, "w") as f:
                json.dump(result("pima-diabetes", [rec("mlp", "-", "central", 0.8)]), f)
            with self.assertRaises(SystemExit) as e:
                with redirect_stdout(io.StringIO()):
                    compare_paper.main([path])
            self.assertIn("pima-diabetes", str(e.exception.code))

    def test_adult_is_compared_with_table_8(self):
        r = result("adult", [rec("mlp", "DiffSpan", "odc", 0.80), rec("mlp", "-", "local", 0.742)])
        r["config"]["partition"] = "vertical-joined"
        rows = compare_paper.compare(r)
        self.assertEqual([(x[1], x[2], x[5]) for x in rows],
                         [("-", "local", 74.2), ("DiffSpan", "odc", 82.4)])
        self.assertTrue(rows[1][7])  # 80.0 against 82.4: more than 2 points
        text = compare_paper.markdown(r, rows, 2.0)
        self.assertIn("paper 001 Table 8 (adult, partition vertical-joined", text)


if __name__ == "__main__":
    unittest.main()
