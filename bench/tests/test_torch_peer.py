"""The PyTorch peer computes what the papers define (tested when PyTorch is importable, on the
CPU), and without PyTorch or a GPU it answers with the reason instead of failing."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
PEER = os.path.join(BENCH, "torch_peer.py")
sys.path.insert(0, BENCH)

import torch_peer  # noqa: E402

try:
    import torch

    HAVE_TORCH = True
except Exception:  # not installed (CI), or broken
    torch = None
    HAVE_TORCH = False
HAVE_CUDA = HAVE_TORCH and torch.cuda.is_available()


def load_json(path):
    with open(path) as f:
        return json.load(f)


def run_peer(*args, timeout=300):
    return subprocess.run([sys.executable, PEER, *args], capture_output=True, text=True,
                          timeout=timeout)


class Helpers(unittest.TestCase):
    def test_points_parse_and_reject_bad_shapes(self):
        self.assertEqual(torch_peer.parse_points("20,3,4; 5,5,1"), [(20, 3, 4), (5, 5, 1)])
        for bad in ("20,3", "3,20,4", "20,3,0", "a,b,c", ""):
            with self.assertRaises(ValueError, msg=bad):
                torch_peer.parse_points(bad)

    def test_stats_interpolate_like_numpy(self):
        s = torch_peer.stats([float(x) for x in range(11, 0, -1)])  # 1..11, unsorted
        self.assertEqual(s["repetitions"], 11)
        self.assertEqual((s["median"], s["min"], s["max"]), (6.0, 1.0, 11.0))
        self.assertAlmostEqual(s["p10"], 2.0)
        self.assertAlmostEqual(s["p90"], 10.0)
        self.assertEqual(torch_peer.stats([]), {"repetitions": 0})

    def test_unknown_method_is_rejected(self):
        with self.assertRaises(ValueError):
            torch_peer.parse_list("odc,svd", torch_peer.METHODS, "--methods")


class Protocol(unittest.TestCase):
    """Runs whether or not PyTorch is there: the answers must be well-formed JSON."""

    def test_describe(self):
        r = run_peer("--describe")
        self.assertEqual(r.returncode, 0, r.stderr)
        d = json.loads(r.stdout)
        self.assertEqual(d["peer"], "torch")
        self.assertEqual(d["available"], HAVE_TORCH)

    def test_driver_protocol_answers_every_series(self):
        r = run_peer("--a", "20", "--l", "3", "--c", "4", "--series",
                     "odc:float64,gopp:float32", "--warmup", "0", "--repetitions", "1",
                     "--seed", "5")
        self.assertEqual(r.returncode, 0, r.stderr)
        results = json.loads(r.stdout)["results"]
        self.assertEqual([(x["method"], x["precision"]) for x in results],
                         [("odc", "float64"), ("gopp", "float32")])
        self.assertNotEqual(results[1]["status"], "ok")  # no GOPP peer
        if not HAVE_CUDA:
            self.assertEqual(results[0]["status"], "error")
            self.assertTrue(results[0]["reason"])
        else:
            self.assertEqual(results[0]["status"], "ok")
            self.assertEqual(len(results[0]["seconds"]), 1)

    @unittest.skipIf(HAVE_CUDA, "this machine has PyTorch with a GPU")
    def test_standalone_without_gpu_says_why(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "peer.json")
            r = run_peer("--device", "cuda", "--points", "20,3,4", "--json", out)
            self.assertEqual(r.returncode, 3, r.stderr)
            doc = load_json(out)
        self.assertIn(doc["status"], ("no_torch", "no_gpu"))
        self.assertTrue(doc["reason"])
        self.assertEqual(len(doc["results"]), 4)  # 1 point x 2 precisions x 2 methods
        self.assertTrue(all(x["status"] == "error" for x in doc["results"]))


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not importable")
class Methods(unittest.TestCase):
    def setUp(self):
        g = torch.Generator(device="cpu")
        g.manual_seed(3)
        self.A = torch.randn((5, 40, 6), generator=g, dtype=torch.float64)
        self.O = torch_peer.haar_orthogonal(torch, 6, g, torch.float64, "cpu")
        self.eye = torch.eye(6, dtype=torch.float64)

    def test_haar_matrix_is_orthogonal(self):
        self.assertLess((self.O.T @ self.O - self.eye).abs().max().item(), 1e-13)

    def test_odc_is_the_orthogonal_polar_factor(self):
        G, Z = torch_peer.odc(torch, self.A, self.O)
        torch.testing.assert_close(Z, self.A[0] @ self.O)
        for i in range(self.A.shape[0]):
            self.assertLess((G[i].T @ G[i] - self.eye).abs().max().item(), 1e-12)
            # polar factor of M = A_i^T Z: P = G^T M is symmetric positive definite
            P = G[i].T @ (self.A[i].T @ Z)
            self.assertLess((P - P.T).abs().max().item(), 1e-10)
            self.assertGreater(torch.linalg.eigvalsh(P).min().item(), 0)

    def test_imakura_is_least_squares_onto_the_top_left_singular_vectors(self):
        G, Z = torch_peer.imakura(torch, self.A)
        W = torch.cat(list(self.A), dim=1)  # [A_1 ... A_c]
        U = torch.linalg.svd(W, full_matrices=False)[0][:, :6]
        # Z spans the top-6 left singular subspace of W (columns may differ by sign)
        torch.testing.assert_close((U.T @ Z).abs(), self.eye, atol=1e-10, rtol=0)
        for i in range(self.A.shape[0]):
            expect = torch.linalg.pinv(self.A[i]) @ Z
            torch.testing.assert_close(G[i], expect, atol=1e-10, rtol=1e-10)

    def test_kawakami_satisfies_its_constraint(self):
        G, Z = torch_peer.kawakami(torch, self.A)
        self.assertIsNone(Z)
        # sum_i G_i^T A_i^T A_i G_i = V^T V = I (paper 001, Alg. 3)
        S = sum(G[i].T @ self.A[i].T @ self.A[i] @ G[i] for i in range(self.A.shape[0]))
        torch.testing.assert_close(S, self.eye, atol=1e-10, rtol=0)

    def test_standalone_benchmark_on_the_cpu(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "peer.json")
            r = run_peer("--device", "cpu", "--points", "30,4,5;12,3,2", "--methods",
                         "odc,imakura,kawakami", "--precision", "float32,float64",
                         "--repetitions", "3", "--warmup", "2", "--json", out)
            self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
            doc = load_json(out)
        self.assertEqual(doc["schema"], "dcalign-torch-peer/1")
        self.assertEqual(doc["status"], "ok")
        self.assertEqual(len(doc["results"]), 2 * 2 * 3)
        for x in doc["results"]:
            self.assertEqual(x["status"], "ok", x)
            self.assertEqual(x["resident"]["repetitions"], 3)
            self.assertEqual(len(x["with_upload"]["seconds"]), 3)
            self.assertEqual(len(x["warmup_seconds"]), 1)  # the checked run is the first
            self.assertLessEqual(x["resident"]["min"], x["resident"]["median"])
            if x["method"] == "odc":
                tol = 1e-4 if x["precision"] == "float32" else 1e-12
                self.assertLess(x["check"]["orthogonality_error"], tol)

    def test_time_caps_are_recorded(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "peer.json")
            r = run_peer("--device", "cpu", "--points", "30,4,5", "--methods", "odc",
                         "--precision", "float64", "--repetitions", "50", "--warmup", "1",
                         "--max-seconds-per-series", "1e-9", "--json", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            x = load_json(out)["results"][0]
        self.assertEqual(x["status"], "capped")
        self.assertEqual(x["resident"]["repetitions"], 1)  # one timed pair at least
        self.assertIn("time cap", x["reason"])


if __name__ == "__main__":
    unittest.main()
