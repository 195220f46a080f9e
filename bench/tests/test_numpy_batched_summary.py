"""Medians, ratios and PASS/MISS verdicts of bench/numpy_batched_summary.py on hand-made documents."""

import argparse
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numpy_batched_summary as s27  # noqa: E402


def point(name, align, wall=None, numpy=(1.0,), gemm=(0.5,), size=None, failed=()):
    """A dcalign-issue27-point/1 document; failed lists (wall) of runs that exited with 1."""
    a, l, c = size or s27.POINTS[name]
    wall = wall if wall is not None else [t + 0.01 for t in align]
    runs = [{"index": i, "wall_seconds": w, "alignment_seconds": t, "exit_status": 0}
            for i, (t, w) in enumerate(zip(align, wall))]
    runs += [{"index": len(runs) + i, "wall_seconds": w, "alignment_seconds": None,
              "exit_status": 1} for i, w in enumerate(failed)]
    return {"schema": s27.POINT_SCHEMA, "name": name, "a": a, "l": l, "c": c,
            "dcalign": {"runs": runs, "warmup": []},
            "numpy": {"product": {"chosen": "matmul"},
                      "batched_odc": {"seconds": list(numpy)},
                      "gemm_floor": {"seconds": list(gemm)}}}


def passing_set():
    """Every binding goal met with margin."""
    return [point("f6a", [0.10, 0.11, 0.12], numpy=[0.5], gemm=[0.1]),
            point("f6c", [0.2], numpy=[0.9]),
            point("f6l", [1.0], numpy=[2.5]),
            point("small", [0.001] * 30, wall=[0.010] * 30)]


def verdicts(docs):
    _, _, goals = s27.summarize(docs)
    return {(g["id"], g["point"]): g["verdict"] for g in goals}, goals


class Rows(unittest.TestCase):
    def test_medians_of_odd_and_even_counts(self):
        r = s27.point_row(point("f6a", [0.3, 0.1, 0.2], wall=[0.4, 0.1, 0.3],
                                numpy=[4.0, 1.0, 3.0, 2.0], gemm=[5.0, 1.0, 3.0]))
        self.assertAlmostEqual(r["dcalign_align"], 0.2)
        self.assertAlmostEqual(r["dcalign_wall"], 0.3)
        self.assertAlmostEqual(r["numpy_batched"], 2.5)  # even count: mean of the middle two
        self.assertAlmostEqual(r["numpy_gemm"], 3.0)
        self.assertEqual((r["dcalign_runs"], r["numpy_runs"]), (3, 4))

    def test_ratios(self):
        r = s27.point_row(point("f6a", [0.1], wall=[0.4], numpy=[0.35], gemm=[0.08]))
        self.assertAlmostEqual(r["numpy_over_dcalign"], 3.5)
        self.assertAlmostEqual(r["numpy_over_dcalign_wall"], 0.875)
        self.assertAlmostEqual(r["dcalign_over_gemm"], 1.25)
        self.assertTrue(r["issue_size"])

    def test_failed_runs_are_counted_but_not_in_the_medians(self):
        r = s27.point_row(point("small", [0.001, 0.002, 0.003], wall=[0.01, 0.02, 0.03],
                                failed=[9.0, 9.0, 9.0]))
        self.assertAlmostEqual(r["dcalign_wall"], 0.02)
        self.assertEqual((r["dcalign_runs"], r["dcalign_failed"]), (3, 3))

    def test_a_size_other_than_the_issues_is_marked(self):
        self.assertFalse(s27.point_row(point("f6a", [0.1], size=(2000, 10, 5)))["issue_size"])


class Goals(unittest.TestCase):
    def test_all_met(self):
        v, goals = verdicts(passing_set())
        self.assertEqual(s27.overall(goals), "PASS")
        for name in s27.FIG6:
            self.assertEqual(v[("speedup", name)], "PASS")
        self.assertEqual(v[("gemm", "f6a")], "PASS")
        self.assertEqual(v[("small_wall", "small")], "PASS")

    def test_speedup_threshold_is_inclusive(self):
        docs = passing_set()
        docs[1] = point("f6c", [0.1], numpy=[0.2])        # exactly 2.0x
        v, goals = verdicts(docs)
        self.assertEqual(v[("speedup", "f6c")], "PASS")
        docs[1] = point("f6c", [0.1], numpy=[0.199])      # 1.99x
        v, goals = verdicts(docs)
        self.assertEqual(v[("speedup", "f6c")], "MISS")
        self.assertEqual(s27.overall(goals), "MISS")

    def test_gemm_floor_threshold(self):
        docs = passing_set()
        docs[0] = point("f6a", [0.65], numpy=[5.0], gemm=[0.5])   # 1.3x exactly
        v, _ = verdicts(docs)
        self.assertEqual(v[("gemm", "f6a")], "PASS")
        docs[0] = point("f6a", [0.66], numpy=[5.0], gemm=[0.5])   # 1.32x
        v, goals = verdicts(docs)
        self.assertEqual(v[("gemm", "f6a")], "MISS")
        self.assertEqual(v[("speedup", "f6a")], "PASS")
        self.assertEqual(s27.overall(goals), "MISS")

    def test_small_case_uses_the_whole_process_median(self):
        docs = passing_set()
        # alignment far below 15 ms, but the processes' median wall time above it
        docs[3] = point("small", [0.0005] * 30, wall=[0.010] * 14 + [0.016] * 16)
        v, _ = verdicts(docs)
        self.assertEqual(v[("small_wall", "small")], "MISS")
        docs[3] = point("small", [0.0005] * 30, wall=[0.015] * 16 + [0.5] * 14)
        v, _ = verdicts(docs)
        self.assertEqual(v[("small_wall", "small")], "PASS")

    def test_missing_and_resized_points_are_not_applicable(self):
        docs = passing_set()[1:]                                   # no f6a
        docs[0] = point("f6c", [0.1], numpy=[1.0], size=(100, 10, 100))
        v, goals = verdicts(docs)
        self.assertEqual(v[("speedup", "f6a")], "N/A")
        self.assertEqual(v[("gemm", "f6a")], "N/A")
        self.assertEqual(v[("speedup", "f6c")], "N/A")
        self.assertEqual(s27.overall(goals), "N/A")

    def test_reported_points_do_not_decide(self):
        docs = passing_set() + [point("l950", [1.0], numpy=[1.1]),
                                point("base", [0.1], numpy=[0.1])]
        v, goals = verdicts(docs)
        self.assertEqual(v[("speedup", "l950")], "MISS")
        self.assertEqual(v[("speedup", "base")], "MISS")
        self.assertEqual(s27.overall(goals), "PASS")


class Markdown(unittest.TestCase):
    def test_table_and_lines(self):
        run = {"command": "bench/run_odc_vs_numpy_batched.sh", "cpu": {"model": "Test CPU", "avx512f": True,
                                                          "cores": 2},
               "dcalign": {"binary": "b/dcalign", "blas_reported": None},
               "numpy": {"numpy": "9.9", "blas": {"openblas": {"version": "0.3.99",
                                                             "architecture": "Haswell"}}}}
        text, rows, goals = s27.summarize(passing_set(), run)
        self.assertIn("| f6a | (20000, 50, 50) | 3 / 1 | 110.00 ms |", text)
        self.assertIn("| 4.55x | 1.10x |", text)          # 0.5 / 0.11 and 0.11 / 0.1
        self.assertIn("not reported", text)
        self.assertIn("avx512f: yes", text)
        self.assertIn("OpenBLAS 0.3.99, kernel set Haswell", text)
        self.assertIn("PASS: all goals", text)
        # Fig. 6 points first, the small case last
        self.assertLess(text.index("| f6a |"), text.index("| small |"))

    def test_reported_blas_object(self):
        report = {"blas": {"library": "OpenBLAS 0.3.21", "kernels": "SkylakeX",
                           "chosen_by": "dcalign", "threads": 2}}
        blas = s27.reported_blas(report)
        line = s27.format_blas(blas)
        self.assertIn("kernels SkylakeX", line)
        self.assertIn("threads 2", line)
        self.assertEqual(s27.format_blas(s27.reported_blas({"seconds": {}}, "usage")),
                         "not reported")

    def test_busy_machine_is_flagged(self):
        docs = passing_set()
        docs[0]["others_busy_start"] = 0.9
        text, rows, _ = s27.summarize(docs)
        self.assertIn("**Warning**", text)
        self.assertIn("90%", text)
        text, _, _ = s27.summarize(passing_set())
        self.assertNotIn("**Warning**", text)


class Assemble(unittest.TestCase):
    def test_raw_runs_become_a_point_document(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "runs.tsv"), "w") as f:
                f.write("warmup 0 100.000000 100.500000 0\n"
                        "run 0 101.000000 101.012500 0\n"
                        "run 1 102,000000 102,020000 0\n"      # a comma locale
                        "run 2 103.000000 103.001000 1\n")
            for kind, i, total in (("warmup", 0, 0.4), ("run", 0, 0.002), ("run", 1, 0.003)):
                with open(os.path.join(d, f"report_{kind}_{i}.json"), "w") as f:
                    json.dump({"method": "odc", "seconds": {"target": total / 2,
                                                            "total": total}}, f)
                with open(os.path.join(d, f"stderr_{kind}_{i}.txt"), "w") as f:
                    f.write(f"dcalign: odc aligned 4 users (a = 400, l = 8) in {total} s "
                            "(read 0.000125 s); objective 1, orthogonality error 1e-16\n")
            with open(os.path.join(d, "peer.json"), "w") as f:
                json.dump({"batched_odc": {"seconds": [0.01, 0.03]},
                           "gemm_floor": {"seconds": [0.001, 0.001]}}, f)
            out = os.path.join(d, "small.json")
            args = argparse.Namespace(
                name="small", a=400, l=8, c=4, runs=os.path.join(d, "runs.tsv"), reports=d,
                peer=os.path.join(d, "peer.json"), out=out, anchors="x.npy", seed=1, warmup=1,
                repetitions=3, dcalign_command="dcalign align", started="T",
                load_start="0.1 0.2 0.3", load_end=None, busy_start=0.05, busy_end=None)
            self.assertEqual(s27.assemble(args), 1)  # one run failed
            doc = json.load(open(out))
            self.assertEqual(len(doc["dcalign"]["warmup"]), 1)
            runs = doc["dcalign"]["runs"]
            self.assertEqual([r["exit_status"] for r in runs], [0, 0, 1])
            self.assertAlmostEqual(runs[0]["wall_seconds"], 0.0125, places=6)
            self.assertAlmostEqual(runs[1]["wall_seconds"], 0.02, places=6)
            self.assertEqual(runs[1]["alignment_seconds"], 0.003)
            self.assertEqual(runs[0]["read_seconds"], 0.000125)
            self.assertIsNone(runs[2]["alignment_seconds"])
            self.assertIsNone(doc["dcalign"]["blas_reported"])
            self.assertEqual(doc["load_average_start"], [0.1, 0.2, 0.3])
            self.assertEqual([x["name"] for x in s27.load_points(d)], ["small"])
            r = s27.point_row(doc)
            self.assertAlmostEqual(r["dcalign_align"], 0.0025)
            self.assertAlmostEqual(r["numpy_batched"], 0.02)
            self.assertAlmostEqual(r["numpy_over_dcalign"], 8.0)


if __name__ == "__main__":
    unittest.main()
