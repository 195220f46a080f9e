"""gpu_report.py joins gpu_bench's and the PyTorch peer's JSON into the summary's table."""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import gpu_report  # noqa: E402


def series(method, resident, upload, status="ok", **extra):
    r = {"a": 1000, "l": 50, "c": 1000, "precision": "float64", "method": method,
         "status": status,
         "resident": {"repetitions": 3, "median": resident, "p10": resident * 0.9,
                      "p90": resident * 1.1, "seconds": [resident] * 3},
         "with_upload": {"repetitions": 3, "median": upload, "seconds": [upload] * 3}}
    r.update(extra)
    return r


BENCH = {
    "schema": "dcalign-gpu-bench/1", "status": "ok", "command": "gpu_bench --json x",
    "parameters": {"host_memory": "pageable"},
    "machine": {"gpu": {"name": "NVIDIA H200", "multiprocessors": 132,
                        "memory_bytes": 150 * 2**30},
                "cuda_driver_version": "13.0", "cuda_runtime_version": "13.0",
                "backend": "cuda"},
    "reference": {"d2d_copy": {"bandwidth_bytes_per_s": 4.0e12, "bytes_per_copy": 2**31},
                  "gemm": {"float64": {"n": 8192, "flops_per_s": 50e12},
                           "float32": {"n": 8192, "flops_per_s": 40e12}}},
    "results": [
        series("odc", 0.004, 0.104, derived={"anchor_bandwidth_fraction": 0.1,
                                             "product_flop_fraction": 0.25},
               report={"iterations": 7}),
        series("gopp", 0.5, 0.6, status="capped", reason="time cap reached after 2 of 20"),
        {"a": 1000, "l": 50, "c": 10000, "precision": "float64", "method": "odc",
         "status": "skipped", "reason": "needs about 12 GiB"},
    ],
}
PEER = {
    "schema": "dcalign-torch-peer/1", "status": "ok",
    "parameters": {"host_memory": "pageable"},
    "machine": {"torch": "2.11.0", "cuda": "13.0"},
    "results": [series("odc", 0.012, 0.208),
                series("imakura", 0.3, 0.4, status="error", reason="OutOfMemoryError")],
}


class Report(unittest.TestCase):
    def write(self, d, name, doc):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def test_table_joins_both_sides(self):
        lines = gpu_report.table(BENCH, PEER)
        odc = next(x for x in lines if "| odc |" in x and "(1000, 50, 1000)" in x)
        self.assertIn("| 4.000 (3.600-4.400) |", odc)
        self.assertIn("| 104.0 | 12.0 | 208.0 |", odc)  # with upload, ms
        self.assertIn("| 3.00x |", odc)  # peer/dcalign resident: 12 / 4
        self.assertIn("| 2.00x |", odc)  # with upload: 208 / 104
        self.assertIn("| 10.0% | 25.0% | 7 |", odc)
        gopp = next(x for x in lines if "| gopp |" in x)
        self.assertIn("capped: time cap reached after 2 of 20", gopp)
        skipped = next(x for x in lines if "(1000, 50, 10000)" in x)
        self.assertIn("skipped: needs about 12 GiB", skipped)
        # the peer's Imakura row has no dcalign counterpart here: still listed
        imakura = next(x for x in lines if "| imakura |" in x)
        self.assertIn("peer error", imakura)

    def test_phase_table(self):
        self.assertEqual(gpu_report.phase_table(BENCH), [])  # no "phases": no table
        bench = json.loads(json.dumps(BENCH))
        odc = bench["results"][0]
        odc["anchor_bytes"] = 4.0e8  # 1000 x 50 x 1000 float64
        odc["phases"] = {"products": 0.001, "polar": 0.002, "rest": 0.001,
                         "evaluation": 0.0005, "repetitions": 10}
        bench["results"].append(dict(odc, precision="float32",
                                     phases={"skipped": "over the cap"}))
        lines = gpu_report.phase_table(bench)
        self.assertEqual(len(lines), 3)  # header, rule, the float64 row only
        # 4e8 B / 1 ms / 4e12 B/s = 10%; 2 a c l^2 = 5e12 flop / 1 ms / 50e12 flop/s = 10%
        self.assertIn("| (1000, 50, 1000) | float64 | 4.000 | 1.000 | 2.000 | 1.000 | 0.500 | "
                      "10.0% | 10.0% |", lines[2])

    def test_report_with_missing_or_partial_files(self):
        with tempfile.TemporaryDirectory() as d:
            bench = self.write(d, "b.json", BENCH)
            text = gpu_report.report(bench, os.path.join(d, "missing.json"))
            self.assertIn("PyTorch peer results:", text)
            self.assertIn("4000 GB/s", text)
            self.assertIn("50.0 TFLOP/s", text)
            self.assertIn("NVIDIA H200", text)
            text = gpu_report.report(os.path.join(d, "missing.json"), None)
            self.assertIn("gpu_bench results:", text)
            no_gpu = self.write(d, "n.json", {"status": "no_gpu", "reason": "no driver",
                                              "results": []})
            self.assertIn("gpu_bench: no_gpu: no driver", gpu_report.report(no_gpu, None))

    def test_counts(self):
        with tempfile.TemporaryDirectory() as d:
            bench = self.write(d, "b.json", BENCH)
            peer = self.write(d, "p.json", PEER)
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                gpu_report.main(["--counts", "--bench", bench, "--peer", peer])
        out = buf.getvalue().splitlines()
        self.assertEqual(out[0], "gpu_bench: 1 capped, 1 ok, 1 skipped")
        self.assertEqual(out[1], "torch_peer: 1 error, 1 ok")


if __name__ == "__main__":
    unittest.main()
