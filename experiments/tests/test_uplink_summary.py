import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "uplink_001"))
import summarize  # noqa: E402


def rec(trial, cond, method, metric, value, model="svm"):
    return {"trial": trial, "condition": cond, "method": method, "model": model, "metric": metric,
            "value": value, "seconds": 0.0}


def result(records, users=2, trials=2):
    return {"config": {"users": users, "trials": trials}, "records": records}


class UplinkSummary(unittest.TestCase):
    def test_paired_differences_bytes_and_alignment_measures(self):
        with tempfile.TemporaryDirectory() as d:
            runs = {
                "fp64": [rec(0, "-", "central", "accuracy", 0.9), rec(1, "-", "central", "accuracy", 0.8),
                         rec(0, "A", "odc", "accuracy", 0.70), rec(1, "A", "odc", "accuracy", 0.60)],
                "int8": [rec(0, "-", "central", "accuracy", 0.9), rec(1, "-", "central", "accuracy", 0.8),
                         rec(0, "A", "odc", "accuracy", 0.69), rec(1, "A", "odc", "accuracy", 0.58),
                         rec(0, "A", "odc", "uplink_bytes", 300), rec(1, "A", "odc", "uplink_bytes", 300),
                         rec(0, "A", "odc", "orthogonality_error", 1e-15, "-"),
                         rec(0, "A", "odc", "objective", 5.0, "-")],
            }
            for fmt, records in runs.items():
                with open(os.path.join(d, f"mnist_table7_uplink_{fmt}.json"), "w") as f:
                    json.dump(result(records), f)
            out = io.StringIO()
            sys.argv = ["summarize.py", d]
            with redirect_stdout(out):
                summarize.main()
            text = out.getvalue()
        self.assertIn("### mnist: SVM accuracy", text)
        self.assertIn("| - | central | 85.00 | - | - | 85.00 (+0.00 ± 0.00) |", text)
        # ODC: 65.00 under fp64, 63.50 under int8; paired differences -1 and -2: mean -1.50,
        # standard deviation 0.71.
        self.assertIn("| A | odc | 65.00 | - | - | 63.50 (-1.50 ± 0.71) |", text)
        self.assertIn("1e-15", text)
        self.assertNotIn("fashion_mnist", text)

    def test_tag_and_model_of_another_run(self):
        # experiments/uplink_mlp_001: files <dataset>_table7_uplink_mlp_<format>.json, the MLP.
        with tempfile.TemporaryDirectory() as d:
            for fmt, v in (("fp64", 0.5), ("fp16", 0.4)):
                records = [rec(0, "A", "odc", "accuracy", v, "mlp")]
                with open(os.path.join(d, f"fashion_mnist_table7_uplink_mlp_{fmt}.json"), "w") as f:
                    json.dump(result(records, trials=1), f)
            out = io.StringIO()
            sys.argv = ["summarize.py", d, "uplink_mlp"]
            with redirect_stdout(out):
                summarize.main()
            text = out.getvalue()
        self.assertIn("### fashion_mnist: MLP accuracy (%) by uplink, 1 trials", text)
        # One trial: no standard deviation of the differences.
        self.assertIn("| A | odc | 50.00 | - | 40.00 (-10.00) | - |", text)


if __name__ == "__main__":
    unittest.main()
