"""Fits, the t quantile, speed-up tables and the JSON schema of bench/analyze.py."""

import copy
import json
import math
import os
import random
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import analyze  # noqa: E402

SAMPLE = os.path.join(HERE, "data", "sample_sweep_c.json")


def synthetic_doc(sweep, xs, times):
    """A minimal dcalign-sweep/1 document; times maps (impl, method) -> function of x."""
    fixed = {k: v for k, v in {"a": 1000, "l": 50, "c": 50}.items() if k != sweep}
    points = []
    for x in xs:
        shape = dict({"a": 1000, "l": 50, "c": 50}, **{sweep: x})
        results = []
        for (impl, method), f in times.items():
            t = f(x)
            results.append({"impl": impl, "method": method, "backend": "cpu",
                            "precision": "float64", "status": "ok", "median": t, "min": t,
                            "max": t, "seconds": [t], "warmup_seconds": [t]})
        points.append(dict(shape, x=x, results=results, load_average_start=[0.1, 0.1, 0.1]))
    return {
        "schema": "dcalign-sweep/1",
        "parameters": {"sweep": sweep, "values": list(xs), "fixed": fixed,
                       "methods": ["odc"], "precisions": ["float64"], "backends": ["cpu"],
                       "peers": ["numpy"], "warmup": 1, "repetitions": 1, "seed": 1,
                       "threads": 2, "max_seconds": 60,
                       "svd": {"algorithm": "randomized", "oversampling": 10,
                               "power_iterations": 2}},
        "machine": {"cpu": {"model": "test"}, "threads": 2, "openblas_config": "OpenBLAS x",
                    "compiler": "gcc", "dcalign_version": "0", "backends": {}, "gpu": None,
                    "peers": {}},
        "sessions": [{"started": "now", "command": "test"}],
        "complete": True,
        "points": points,
    }


class TQuantile(unittest.TestCase):
    def test_table_values(self):
        # Two-sided 95% critical values from printed t tables.
        for df, t in [(1, 12.7062047), (2, 4.3026527), (3, 3.1824463), (10, 2.2281389),
                      (18, 2.1009220), (30, 2.0422725), (120, 1.9799304)]:
            self.assertAlmostEqual(analyze.t_quantile(0.975, df), t, places=6)

    def test_symmetry_and_median(self):
        self.assertAlmostEqual(analyze.t_quantile(0.025, 7), -analyze.t_quantile(0.975, 7))
        self.assertAlmostEqual(analyze.t_quantile(0.5, 7), 0.0, places=10)
        self.assertAlmostEqual(analyze.t_cdf(analyze.t_quantile(0.9, 4), 4), 0.9, places=10)

    def test_large_df_tends_to_normal(self):
        self.assertAlmostEqual(analyze.t_quantile(0.975, 10**7), 1.959964, places=5)

    def test_against_scipy_when_installed(self):
        try:
            from scipy import stats
        except ImportError:
            self.skipTest("SciPy not installed")
        for df in (1, 2, 5, 17, 48, 200):
            for p in (0.6, 0.9, 0.975, 0.995):
                self.assertAlmostEqual(analyze.t_quantile(p, df), stats.t.ppf(p, df), places=7)


class LogLogFit(unittest.TestCase):
    def test_exact_power_law(self):
        xs = list(range(50, 1001, 50))
        for alpha in (0.56, 1.0, 2.05):
            fit = analyze.loglog_fit(xs, [3e-4 * x ** alpha for x in xs])
            self.assertAlmostEqual(fit["alpha"], alpha, delta=1e-10)
            self.assertAlmostEqual(fit["kappa"], math.log10(3e-4), delta=1e-10)
            self.assertAlmostEqual(fit["r2"], 1.0, delta=1e-12)
            self.assertEqual(fit["n"], 20)

    def test_noisy_power_law(self):
        rng = random.Random(5)
        xs = list(range(1000, 20001, 1000))
        ts = [2e-5 * x ** 0.8 * math.exp(rng.gauss(0, 0.05)) for x in xs]
        fit = analyze.loglog_fit(xs, ts)
        self.assertAlmostEqual(fit["alpha"], 0.8, delta=0.05)
        self.assertGreater(fit["r2"], 0.97)
        self.assertLess(fit["r2"], 1.0)

    def test_rejects_nonpositive(self):
        with self.assertRaises(ValueError):
            analyze.loglog_fit([1, 2, 3], [1, 0, 2])


class LinearFit(unittest.TestCase):
    def test_hand_computation(self):
        # x = 1..5, y below. By hand: mean x = 3, Sxx = 10, mean y = 6.02, Sxy = 19.9, so
        # beta1 = 1.99 and beta0 = 0.05; residuals 0.06, -0.13, 0.18, -0.21, 0.10 give
        # SSE = 0.107, s^2 = SSE / 3, se(beta1) = sqrt(s^2 / 10) = 0.0597216; with
        # t(0.975, 3) = 3.1824463 the CI is 1.99 -/+ 0.1900611. SST = 39.708, R^2 = 0.9973053.
        fit = analyze.linear_fit([1, 2, 3, 4, 5], [2.1, 3.9, 6.2, 7.8, 10.1])
        self.assertAlmostEqual(fit["beta1"], 1.99, places=12)
        self.assertAlmostEqual(fit["beta0"], 0.05, places=12)
        self.assertAlmostEqual(fit["se_beta1"], math.sqrt(0.107 / 3 / 10), places=12)
        self.assertAlmostEqual(fit["ci"][0], 1.99 - 0.1900611, places=6)
        self.assertAlmostEqual(fit["ci"][1], 1.99 + 0.1900611, places=6)
        self.assertAlmostEqual(fit["r2"], 1 - 0.107 / 39.708, places=12)

    def test_exact_line_has_zero_width_interval(self):
        xs = list(range(50, 1001, 50))
        fit = analyze.linear_fit(xs, [0.2 + 8.67e-4 * x for x in xs])
        self.assertAlmostEqual(fit["beta1"], 8.67e-4, delta=1e-15)
        self.assertAlmostEqual(fit["ci"][1] - fit["ci"][0], 0.0, delta=1e-12)

    def test_two_points_have_no_interval(self):
        fit = analyze.linear_fit([1, 2], [1, 3])
        self.assertNotIn("ci", fit)
        with self.assertRaises(ValueError):
            analyze.linear_fit([1, 1, 1], [1, 2, 3])


class SweepTables(unittest.TestCase):
    def test_fits_and_speedups_of_a_document(self):
        xs = list(range(50, 1001, 50))
        doc = synthetic_doc("c", xs, {("dcalign", "odc"): lambda x: 1e-4 * x,
                                      ("numpy", "odc"): lambda x: 3e-4 * x,
                                      ("dcalign", "imakura"): lambda x: 1e-2 * x ** 0.95})
        f = analyze.fits(doc)
        self.assertAlmostEqual(f[("dcalign", "odc", "cpu", "float64")]["loglog"]["alpha"], 1.0,
                               delta=1e-10)
        self.assertAlmostEqual(f[("dcalign", "imakura", "cpu", "float64")]["loglog"]["alpha"],
                               0.95, delta=1e-10)
        self.assertAlmostEqual(f[("dcalign", "odc", "cpu", "float64")]["linear"]["beta1"], 1e-4,
                               delta=1e-15)
        sp = analyze.speedups(doc)
        self.assertEqual(len(sp), 1)  # numpy has ODC only
        for _, ratio in sp[0][2]:
            self.assertAlmostEqual(ratio, 3.0, places=12)
        md = analyze.sweep_markdown(doc, "test")
        self.assertIn("3.00x", md)
        self.assertIn("beta_1", md)
        self.assertIn("0.84", md)  # the paper's alpha_c of ODC beside ours

    def test_skipped_points_are_left_out_of_fits(self):
        doc = synthetic_doc("a", [1000, 2000, 3000, 4000],
                            {("dcalign", "imakura"): lambda x: 1e-3 * x})
        doc["points"][3]["results"][0] = {
            "impl": "dcalign", "method": "imakura", "backend": "cpu", "precision": "float64",
            "status": "skipped", "reason": "median 61 s at a = 3000 exceeded --max-seconds 60"}
        e = analyze.fits(doc)[("dcalign", "imakura", "cpu", "float64")]
        self.assertEqual(e["points"], 3)
        self.assertEqual(e["range"], (1000, 3000))
        self.assertIn("skipped", analyze.sweep_markdown(doc, "test"))


class Schema(unittest.TestCase):
    def test_sample_from_the_driver_is_valid(self):
        with open(SAMPLE) as f:
            doc = json.load(f)
        self.assertEqual(analyze.schema_problems(doc), [])
        statuses = {r["status"] for p in doc["points"] for r in p["results"]}
        self.assertEqual(statuses, {"ok", "skipped"})

    def test_missing_keys_are_named(self):
        with open(SAMPLE) as f:
            doc = json.load(f)
        broken = copy.deepcopy(doc)
        del broken["parameters"]["repetitions"]
        del broken["points"][0]["results"][0]["median"]
        problems = analyze.schema_problems(broken)
        self.assertIn("parameters: missing 'repetitions'", problems)
        self.assertIn("points[0].results[0]: missing 'median'", problems)
        self.assertTrue(analyze.schema_problems({"schema": "dcalign-sweep/1"}))

    def test_analyze_writes_markdown_next_to_the_json(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "sweep_c.json")
            with open(SAMPLE) as f, open(path, "w") as g:
                g.write(f.read())
            analyze.main([path, "--summary", os.path.join(d, "SUMMARY.md")])
            with open(os.path.join(d, "sweep_c.md")) as f:
                md = f.read()
            self.assertIn("Log-log fit", md)
            self.assertIn("Per-user slope", md)
            self.assertTrue(os.path.exists(os.path.join(d, "SUMMARY.md")))


if __name__ == "__main__":
    unittest.main()
