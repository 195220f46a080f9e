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


def trec(model, cond, method, value, trial, metric="accuracy", point=""):
    """A record with its trial (paired tests) and sweep point."""
    return {"trial": trial, "condition": cond, "method": method, "model": model, "metric": metric,
            "value": value, "seconds": 0.0, "point": point}


def stat(test, what, cond, method, model, metric, statistic, p, effect, point="", term="",
         df1=1.0, df2=0.0, n=2, mean_a=None, mean_b=None):
    """A statistics entry as dcalign experiment writes it (None for an infinite statistic)."""
    return {"test": test, "what": what, "term": term, "point": point, "condition": cond,
            "method": method, "model": model, "metric": metric, "n": n, "statistic": statistic,
            "df1": df1, "df2": df2, "p": p, "effect": effect, "mean_a": mean_a, "mean_b": mean_b}


def run_main(r, *args):
    """compare_paper.main on r written to a temporary file; returns its stdout."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "r.json")
        with open(path, "w") as f:
            json.dump(r, f)
        buf = io.StringIO()
        with redirect_stdout(buf):
            compare_paper.main([path, *args])
        return buf.getvalue()


def tables13_14_result():
    """mnist SVM, SameSpan-Orth (Table 13) and SameSpan (Table 14), two trials.
    Imakura SameSpan-Orth: identity 96.2, random 92.5 (paper 96.20 / 92.79): within 2 pp, delta
    -3.7 and significant like the paper's -3.42*. ODC SameSpan-Orth: random 93.0 against the
    paper's 96.00 (flagged), delta -3.0 against +0.00 (sign differs) and every difference -3.0,
    so t = d = -inf and p = 0 (significant where the paper's is not). ODC SameSpan: all
    differences zero, the 0/0 case (t = d = 0, p = 1), as in the paper."""
    recs = [trec("svm", "SameSpan-Orth", "imakura:identity", 0.962, t) for t in (0, 1)]
    recs += [trec("svm", "SameSpan-Orth", "imakura:uniform", v, t) for t, v in ((0, 0.93),
                                                                                 (1, 0.92))]
    recs += [trec("svm", "SameSpan-Orth", "odc:identity", 0.96, t) for t in (0, 1)]
    recs += [trec("svm", "SameSpan-Orth", "odc:haar", 0.93, t) for t in (0, 1)]
    recs += [trec("svm", "SameSpan", m, 0.87, t) for m in ("odc:identity", "odc:haar")
             for t in (0, 1)]
    stats = [stat("paired-t", "imakura:uniform - imakura:identity (less)", "SameSpan-Orth", "*",
                  "svm", "accuracy", -7.4, 0.043, -5.23, mean_a=0.925, mean_b=0.962),
             stat("paired-t", "odc:haar - odc:identity (less)", "SameSpan-Orth", "*", "svm",
                  "accuracy", None, 0.0, None, mean_a=0.93, mean_b=0.96),
             stat("paired-t", "odc:haar - odc:identity (less)", "SameSpan", "*", "svm",
                  "accuracy", 0.0, 1.0, 0.0, mean_a=0.87, mean_b=0.87)]
    r = result("mnist", recs)
    r["config"]["methods"] = ["imakura:identity", "imakura:uniform", "odc:identity", "odc:haar"]
    r["statistics"] = stats
    return r


def tables15_17_result():
    """mnist MLP, Kawakami SameSpan-Orth at a = 196 (95.0 against 94.78: within 2 pp) and 1568
    (90.0 against 93.41: flagged), with a = 300 (not in Table 15) and an SVM record to ignore;
    ANOVAs: Kawakami p = 0.2 (the paper's 6.79e-19 is significant), ODC p = 0.5 (the paper's
    0.371 is not)."""
    recs = [trec("mlp", "SameSpan-Orth", "kawakami", v, t, point=f"anchor_rows={a}")
            for a, v in ((196, 0.95), (1568, 0.90), (300, 0.5)) for t in (0, 1)]
    recs.append(trec("svm", "SameSpan-Orth", "kawakami", 0.5, 0, point="anchor_rows=196"))
    r = result("mnist", recs)
    r["config"]["sweep"] = {"anchor_rows": ["196", "1568", "300"]}
    r["statistics"] = [
        stat("anova1", "anchor_rows", "SameSpan-Orth", "kawakami", "mlp", "accuracy", 2.0, 0.2,
             0.3, point="*", df1=3.0, df2=4.0, n=8),
        stat("anova1", "anchor_rows", "SameSpan-Orth", "odc", "mlp", "accuracy", 0.9, 0.5, 0.1,
             point="*", df1=3.0, df2=4.0, n=8)]
    return r


def table2_result(times=True):
    """hiv: Central 0.79 (paper 0.788), Imakura 0.70 and 0.74 (mean 0.72, std 0.0283; paper
    0.724: within 0.02), ODC 0.65 and 0.67 (0.66 against 0.705: flagged); a SameSpan-Orth cell
    and PR-AUC to ignore; ODC's alignment 1 and 3 ms (paper 26 ms: 13x)."""
    recs = [trec("mlp", "-", "central", 0.79, t, "roc_auc") for t in (0, 1)]
    recs += [trec("mlp", "DiffSpan-Orth", "imakura", v, t, "roc_auc") for t, v in ((0, 0.70),
                                                                                    (1, 0.74))]
    recs += [trec("mlp", "DiffSpan-Orth", "odc", v, t, "roc_auc") for t, v in ((0, 0.65),
                                                                                (1, 0.67))]
    recs += [trec("mlp", "SameSpan-Orth", "odc", 0.1, 0, "roc_auc"),
             trec("mlp", "DiffSpan-Orth", "odc", 0.3, 0, "pr_auc")]
    if times:
        recs += [trec("mlp", "-", "odc", v, t, "align_seconds") for t, v in ((0, 0.001),
                                                                              (1, 0.003))]
    r = result("hiv", recs)
    r["config"].update(anchor="uniform", anchor_rows=3000)
    return r


def anchor_study_result():
    """hiv, anchor x anchor_rows, MLP.
    ROC-AUC SameSpan-Orth public:bbbp Kawakami: 80, 78, 76 at a = 250, 500, 1000 (slope -2 per
    doubling), ANOVA p = 0.001: falling, like the paper's PubChem row (falling, p = 2.73e-39).
    ROC-AUC SameSpan-Orth uniform ODC: 80, 81 at a = 250, 500, p = 0.01: rising, where the paper's
    (slope +0.03, p = 0.404) is flat: same direction, other trend.
    PR-AUC DiffSpan-Orth uniform Imakura: 70, 69, no ANOVA: falling?, the paper's rises.
    A "normal" anchor has no counterpart. Table 19: source effect ODC SameSpan-Orth ROC-AUC
    p = 0.3 (the paper's 0.868: both not significant); Imakura DiffSpan-Orth ROC-AUC p = 0.2
    (the paper's < 1e-300)."""
    pt = "anchor={},anchor_rows={}".format
    recs = [trec("mlp", "SameSpan-Orth", "kawakami", v, t, "roc_auc", pt("public:bbbp", a))
            for a, v in ((250, 0.80), (500, 0.78), (1000, 0.76)) for t in (0, 1)]
    recs += [trec("mlp", "SameSpan-Orth", "odc", v, t, "roc_auc", pt("uniform", a))
             for a, v in ((250, 0.80), (500, 0.81)) for t in (0, 1)]
    recs += [trec("mlp", "DiffSpan-Orth", "imakura", v, t, "pr_auc", pt("uniform", a))
             for a, v in ((250, 0.70), (500, 0.69)) for t in (0, 1)]
    recs += [trec("mlp", "SameSpan-Orth", "odc", 0.5, 0, "roc_auc", pt("normal", 250))]
    r = result("hiv", recs)
    r["config"]["sweep"] = {"anchor": ["uniform", "public:bbbp"],
                            "anchor_rows": ["250", "500", "1000"]}
    r["statistics"] = [
        stat("anova1", "anchor_rows", "SameSpan-Orth", "kawakami", "mlp", "roc_auc", 40.0, 0.001,
             2.0, point="anchor=public:bbbp", df1=2.0, df2=3.0, n=6),
        stat("anova1", "anchor_rows", "SameSpan-Orth", "odc", "mlp", "roc_auc", None, 0.01,
             None, point="anchor=uniform", df1=1.0, df2=2.0, n=4),
        stat("anova2", "anchor x anchor_rows", "SameSpan-Orth", "odc", "mlp", "roc_auc", 1.2, 0.3,
             0.4, point="*", term="anchor", df1=1.0, df2=12.0, n=16),
        stat("anova2", "anchor x anchor_rows", "SameSpan-Orth", "odc", "mlp", "roc_auc", 9.0,
             0.001, 0.9, point="*", term="anchor_rows", df1=3.0, df2=12.0, n=16),
        stat("anova2", "anchor x anchor_rows", "DiffSpan-Orth", "imakura", "mlp", "roc_auc", 1.9,
             0.2, 0.4, point="*", term="anchor", df1=1.0, df2=12.0, n=16)]
    return r


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


    def test_tables13_14_means_signs_significance_and_zero_case(self):
        r = tables13_14_result()
        rows = {(x.condition, x.method): x for x in compare_paper.compare_tables13_14(r)}
        self.assertEqual(set(rows), {("SameSpan-Orth", "imakura"), ("SameSpan-Orth", "odc"),
                                     ("SameSpan", "odc")})
        im = rows[("SameSpan-Orth", "imakura")]
        self.assertEqual(im.table, 13)
        self.assertAlmostEqual(im.identity, 96.2)
        self.assertAlmostEqual(im.random, 92.5)
        self.assertAlmostEqual(im.delta, -3.7)
        self.assertEqual((im.d, im.p, im.paper), (-5.23, 0.043, (96.20, 92.79, -3.42, -5.81, True)))
        self.assertEqual(im.flags, (False, False))
        self.assertTrue(im.sign_agrees)
        self.assertTrue(im.sig_agrees)
        odc = rows[("SameSpan-Orth", "odc")]
        self.assertAlmostEqual(odc.random, 93.0)
        self.assertEqual(odc.flags, (False, True))  # 96.0 vs 96.00; 93.0 vs 96.00
        self.assertAlmostEqual(odc.delta, -3.0)
        self.assertEqual(odc.d, float("-inf"))  # null in the JSON, every difference -3.0
        self.assertFalse(odc.sign_agrees)  # -3.00 against +0.00
        self.assertFalse(odc.sig_agrees)  # p = 0 against "-"
        zero = rows[("SameSpan", "odc")]
        self.assertEqual(zero.table, 14)
        self.assertEqual((zero.delta, zero.d, zero.p), (0.0, 0.0, 1.0))
        self.assertEqual(zero.paper, (87.00, 87.00, 0.00, 0.00, False))
        self.assertTrue(zero.sign_agrees)
        self.assertTrue(zero.sig_agrees)
        text = compare_paper.markdown_tables13_14(r, compare_paper.compare_tables13_14(r), 2.0)
        self.assertIn("| 13 | SameSpan-Orth | svm | odc | 96.00 / 96.00 | 93.00 / 96.00 **>2** | "
                      "-3.00 / +0.00 | -inf / +0.00 | * / - | <1e-300 | **NO** | **NO** |", text)
        self.assertIn("| +0.00 / +0.00 | +0.00 / +0.00 | - / - | 1 | yes | yes |", text)
        self.assertIn("5 of 6 means within 2 pp.", text)
        self.assertIn("Sign of delta agrees in 2 of 3 comparisons; significance in 2 of 3 tests; "
                      "both in 2 of 3.", text)
        self.assertIn("0/0 convention", text)

    def test_sign_is_taken_at_the_papers_two_decimals(self):
        # The paper prints delta to 2 decimals: +0.004 pp is "+0.00" (no sign), -0.006 is "-0.01".
        self.assertEqual([compare_paper.sign(x) for x in (0.004, -0.004, -0.006, 0.41, 0.0)],
                         [0, 0, -1, 1, 0])
        r = tables13_14_result()
        for x in r["records"]:
            if x["condition"] == "SameSpan" and x["method"] == "odc:haar" and x["trial"] == 0:
                x["value"] = 0.87 + 8e-5  # delta = +0.004 pp: still the paper's +0.00
        (zero,) = [x for x in compare_paper.compare_tables13_14(r) if x.condition == "SameSpan"]
        self.assertAlmostEqual(zero.delta, 0.004)
        self.assertTrue(zero.sign_agrees)

    def test_tables13_14_test_written_the_other_way_round(self):
        r = tables13_14_result()
        s = r["statistics"][0]
        s.update(what="imakura:identity - imakura:uniform (greater)", effect=5.23)
        (im,) = [x for x in compare_paper.compare_tables13_14(r) if x.method == "imakura"]
        self.assertEqual(im.d, -5.23)

    def test_tables15_17_cells_and_anova(self):
        r = tables15_17_result()
        rows = compare_paper.compare_table15(r)
        self.assertEqual([(c, m, a) for c, m, a, *_ in rows],
                         [("SameSpan-Orth", "kawakami", 196), ("SameSpan-Orth", "kawakami", 1568)])
        _, _, _, mean, ci, pm, pci, delta, flagged = rows[0]
        self.assertAlmostEqual(mean, 95.0)
        self.assertEqual((ci, pm, pci), (0.0, 94.78, 0.15))
        self.assertAlmostEqual(delta, 0.22)
        self.assertFalse(flagged)
        self.assertAlmostEqual(rows[1][7], -3.41)
        self.assertTrue(rows[1][8])
        r17 = compare_paper.compare_table17(r)
        self.assertEqual([x[:2] for x in r17], [("SameSpan-Orth", "kawakami"),
                                                ("SameSpan-Orth", "odc")])
        self.assertEqual(r17[0][7:], (32.37, 6.79e-19, 0.47, False))
        self.assertEqual(r17[1][7:], (1.05, 0.371, 0.09, True))
        text = compare_paper.markdown_tables15_17(r, rows, r17, 2.0)
        self.assertIn("| SameSpan-Orth | kawakami | 1568 | 90.00 ± 0.00 | 93.41 ± 0.25 | -3.41 | "
                      "**>2** |", text)
        self.assertIn("1 of 2 cells within 2 pp.", text)
        self.assertIn("| SameSpan-Orth | kawakami | 2.00 (3, 4) | 0.2 | 0.30 | 32.37 | 6.79e-19 | "
                      "0.47 | **NO** |", text)
        self.assertIn("Significance at 0.05 agrees in 1 of 2 tests.", text)
        self.assertIn("420-434", text)

    def test_table2_hiv_cells_and_times(self):
        r = table2_result()
        rows = compare_paper.compare_table2(r)
        self.assertEqual([x[1] for x in rows], ["central", "imakura", "odc"])
        _, _, mean, sd, pm, psd, delta, flagged = rows[1]
        self.assertAlmostEqual(mean, 0.72)
        self.assertAlmostEqual(sd, 0.02 * 2 ** 0.5)
        self.assertEqual((pm, psd), (0.724, 0.012))
        self.assertFalse(flagged)
        self.assertAlmostEqual(rows[2][6], -0.045)
        self.assertTrue(rows[2][7])
        self.assertFalse(rows[0][7])
        (method, ours, _, paper_s, _, ratio), = compare_paper.compare_table2_times(r)
        self.assertEqual((method, paper_s), ("odc", 0.026))
        self.assertAlmostEqual(ours, 0.002)
        self.assertAlmostEqual(ratio, 13.0)
        text = compare_paper.markdown_table2(r, rows, 0.02)
        self.assertIn("| mlp | odc | 0.660 ± 0.014 | 0.705 ± 0.011 | -0.045 | **>0.02** |", text)
        self.assertIn("2 of 3 cells within 0.02.", text)
        self.assertIn("DIFFERENT MACHINES", text)
        self.assertIn("13.0x", text)
        r = table2_result(times=False)
        text = compare_paper.markdown_table2(r, compare_paper.compare_table2(r), 0.02)
        self.assertIn("TIME row is not compared", text)

    def test_anchor_study_trends_and_source_effect(self):
        r = anchor_study_result()
        rows = {(x.metric, x.condition, x.source, x.method): x
                for x in compare_paper.compare_anchor_study(r)}
        self.assertEqual(set(rows), {("roc_auc", "SameSpan-Orth", "public:bbbp", "kawakami"),
                                     ("roc_auc", "SameSpan-Orth", "uniform", "odc"),
                                     ("pr_auc", "DiffSpan-Orth", "uniform", "imakura")})
        kaw = rows[("roc_auc", "SameSpan-Orth", "public:bbbp", "kawakami")]
        self.assertEqual(kaw.sizes, [250, 500, 1000])
        self.assertAlmostEqual(kaw.slope, -2.0)
        self.assertEqual(kaw.paper[0], (86.91, 0.19))  # PubChem is public:bbbp's counterpart
        self.assertEqual((kaw.trend, kaw.paper_trend), ("falling", "falling"))
        self.assertTrue(kaw.direction_agrees)
        self.assertTrue(kaw.trend_agrees)
        odc = rows[("roc_auc", "SameSpan-Orth", "uniform", "odc")]
        self.assertAlmostEqual(odc.slope, 1.0)
        self.assertEqual(odc.F, float("inf"))
        self.assertAlmostEqual(odc.paper_slope, 0.03)  # 88.64, 88.59, 88.68, 88.71
        self.assertEqual((odc.trend, odc.paper_trend), ("rising", "flat"))  # paper p = 0.404
        self.assertTrue(odc.direction_agrees)
        self.assertFalse(odc.trend_agrees)
        im = rows[("pr_auc", "DiffSpan-Orth", "uniform", "imakura")]
        self.assertEqual((im.trend, im.paper_trend), ("falling?", "rising"))
        self.assertFalse(im.direction_agrees)
        self.assertIsNone(im.trend_agrees)
        r19 = compare_paper.compare_table19(r)
        self.assertEqual([x[:3] for x in r19], [("SameSpan-Orth", "roc_auc", "odc"),
                                                ("DiffSpan-Orth", "roc_auc", "imakura")])
        self.assertEqual(r19[0][8:], (0.03, 0.868, 0.01, True))
        self.assertEqual(r19[1][8:], (42639.30, 0.0, 7.34, False))
        text = compare_paper.markdown_anchor_study(r, compare_paper.compare_anchor_study(r), r19)
        self.assertIn("ORIENTATION ONLY", text)
        self.assertNotIn("**>", text)
        self.assertIn("| roc_auc | SameSpan-Orth | public:bbbp | kawakami | 80.00 ± 0.00 | "
                      "78.00 ± 0.00 | 76.00 ± 0.00 | 86.91 / 86.87 / 85.88 / 84.06 |", text)
        self.assertIn("Direction agrees in 2 of 3 rows; trend (direction and significance) in 1 "
                      "of 2 tested rows.", text)
        self.assertIn("| 42,639.30 | <1e-300 | 7.34 | - / * | **NO** |", text)
        self.assertIn("agrees in 1 of 2 tests.", text)

    def test_dispatch(self):
        nri = result("pima-diabetes", [rec("logreg", "-", "opp", 0.8, "roc_auc")])
        nri["config"]["protocol"] = "nri-dc"
        plain = result("mnist", [rec("svm", "SameSpan", "odc", 0.8)])
        hiv_dim = result("hiv", [trec("mlp", "-", "central", 0.8, 0, "roc_auc", "dim=10")])
        self.assertEqual(
            [compare_paper.comparison(x) for x in (nri, plain, tables13_14_result(),
                                                   tables15_17_result(), table2_result(),
                                                   anchor_study_result(), hiv_dim)],
            ["nri", "table7", "tables13-14", "tables15-17", "table2", "anchor-study", None])
        out = run_main(tables13_14_result())
        self.assertTrue(out.startswith("Comparison with paper 001 Tables 13-14 (mnist"))
        text = run_main(table2_result(), "--tolerance", "0.05")
        self.assertIn("paper 003 Table II, HIV row", text)
        self.assertIn("3 of 3 cells within 0.05.", text)
        with tempfile.TemporaryDirectory() as d:
            md = os.path.join(d, "r.md")
            out = run_main(anchor_study_result(), "--out", md)
            with open(md) as f:
                self.assertEqual(f.read(), out)
        self.assertIn("Anchor size x source on hiv", out)

    def test_nothing_comparable_exits(self):
        cases = []
        r = tables13_14_result()
        r["config"]["dataset"] = "adult"
        cases.append((r, "Tables 13-14"))
        r = table2_result()
        r["records"] = [x for x in r["records"] if x["metric"] != "roc_auc"]
        cases.append((r, "Table II"))
        r = tables15_17_result()
        r["config"]["dataset"] = "fashion-mnist"  # Table 15 has no fashion-mnist kawakami at 300
        r["records"] = [x for x in r["records"] if x["point"] == "anchor_rows=300"]
        cases.append((r, "Table 15"))
        cases.append((result("hiv", [trec("mlp", "-", "central", 0.8, 0, "roc_auc", "dim=10")]),
                      "['dim']"))
        r = anchor_study_result()
        for x in r["records"]:
            x["method"] = "gopp"
        cases.append((r, "anchor study"))
        for r, words in cases:
            with self.subTest(words=words):
                with self.assertRaises(SystemExit) as e:
                    run_main(r)
                self.assertIn(words, str(e.exception.code))


if __name__ == "__main__":
    unittest.main()
