"""plot.py draws one panel per sweep from the JSON files."""

import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import plot  # noqa: E402
from test_analyze import SAMPLE, synthetic_doc  # noqa: E402


class Figure(unittest.TestCase):
    def test_three_panels_to_png(self):
        docs = {
            "l": synthetic_doc("l", [50, 100, 150], {("dcalign", "odc"): lambda x: 1e-5 * x ** 2,
                                                     ("numpy", "odc"): lambda x: 2e-5 * x ** 2}),
            "a": synthetic_doc("a", [1000, 2000], {("dcalign", "odc"): lambda x: 1e-5 * x}),
        }
        with tempfile.TemporaryDirectory() as d:
            files = []
            for name, doc in docs.items():
                files.append(os.path.join(d, f"sweep_{name}.json"))
                with open(files[-1], "w") as f:
                    json.dump(doc, f)
            files.append(SAMPLE)
            out = os.path.join(d, "fig", "fig6.png")
            self.assertEqual(plot.main(files + ["--out", out]), 0)
            with open(out, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_one_file_per_sweep(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(SystemExit):
                plot.main([SAMPLE, SAMPLE, "--out", os.path.join(d, "x.png")])


if __name__ == "__main__":
    unittest.main()
