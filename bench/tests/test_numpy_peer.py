"""The NumPy peer computes what the papers define, and speaks the driver's protocol."""

import contextlib
import io
import json
import os
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numpy_peer  # noqa: E402

RANDOMIZED = {"algorithm": "randomized", "oversampling": 10, "power_iterations": 2}
EXACT = {"algorithm": "exact", "oversampling": 10, "power_iterations": 2}


class Methods(unittest.TestCase):
    def setUp(self):
        self.anchors = numpy_peer.make_anchors(60, 5, 7, seed=3, dtype=np.float64)

    def test_anchors_are_uniform_and_seeded(self):
        again = numpy_peer.make_anchors(60, 5, 7, seed=3, dtype=np.float64)
        self.assertEqual(len(self.anchors), 7)
        self.assertEqual(self.anchors[0].shape, (60, 5))
        for x, y in zip(self.anchors, again):
            np.testing.assert_array_equal(x, y)
        values = np.concatenate([x.ravel() for x in self.anchors])
        self.assertTrue(0.0 <= values.min() and values.max() < 1.0)
        other = numpy_peer.make_anchors(60, 5, 7, seed=4, dtype=np.float64)
        self.assertFalse(np.array_equal(self.anchors[0], other[0]))

    def test_odc_is_the_orthogonal_polar_factor(self):
        g = numpy_peer.odc(self.anchors, np.random.default_rng(1))
        o = numpy_peer.haar_orthogonal(5, np.random.default_rng(1), np.float64)
        target = self.anchors[0] @ o
        for a_i, g_i in zip(self.anchors, g):
            np.testing.assert_allclose(g_i.T @ g_i, np.eye(5), atol=1e-12)
            # Polar factor of M = A_i^T T: M = G P with P = G^T M symmetric positive definite.
            p = g_i.T @ (a_i.T @ target)
            np.testing.assert_allclose(p, p.T, atol=1e-10)
            self.assertGreater(np.linalg.eigvalsh(p).min(), 0)

    def test_randomized_svd_finds_a_dominant_subspace(self):
        rng = np.random.default_rng(0)
        u, _ = np.linalg.qr(rng.standard_normal((200, 6)))
        v, _ = np.linalg.qr(rng.standard_normal((80, 6)))
        w = u @ np.diag([100, 50, 20, 10, 5, 2.0]) @ v.T + 1e-6 * rng.standard_normal((200, 80))
        uk, s, vk = numpy_peer.randomized_svd(w, 4, rng)
        np.testing.assert_allclose(s, [100, 50, 20, 10], rtol=1e-6)
        np.testing.assert_allclose(np.abs(uk.T @ u[:, :4]), np.eye(4), atol=1e-6)
        np.testing.assert_allclose(np.abs(vk.T @ v[:, :4]), np.eye(4), atol=1e-6)

    def test_randomized_svd_falls_back_to_exact_when_the_sketch_is_full(self):
        w = np.random.default_rng(2).random((30, 12))
        uk, s, vk = numpy_peer.randomized_svd(w, 5, np.random.default_rng(0))  # 5 + 10 >= 12
        u, s_exact, vt = np.linalg.svd(w, full_matrices=False)
        np.testing.assert_allclose(s, s_exact[:5], rtol=1e-12)

    def test_imakura_solves_the_least_squares_problems(self):
        g = numpy_peer.imakura(self.anchors, np.random.default_rng(1), EXACT)
        u, _, _ = np.linalg.svd(np.hstack(self.anchors), full_matrices=False)
        z = u[:, :5]
        for a_i, g_i in zip(self.anchors, g):
            np.testing.assert_allclose(g_i, np.linalg.lstsq(a_i, z, rcond=None)[0], atol=1e-10)

    def test_kawakami_meets_its_constraint(self):
        for svd in (EXACT, RANDOMIZED):
            g = numpy_peer.kawakami(self.anchors, np.random.default_rng(1), svd)
            # sum_i ||A_i g_ik||^2 = 1 for every column k (paper 001, problem 47).
            norms = sum(np.sum((a_i @ g_i) ** 2, axis=0) for a_i, g_i in zip(self.anchors, g))
            np.testing.assert_allclose(norms, np.ones(5), atol=1e-10)

    def test_float32(self):
        anchors = numpy_peer.make_anchors(40, 4, 3, seed=1, dtype=np.float32)
        self.assertEqual(anchors[0].dtype, np.float32)
        for method in numpy_peer.METHODS.values():
            g = method(anchors, np.random.default_rng(0), RANDOMIZED)
            self.assertEqual(g[0].dtype, np.float32)


class Protocol(unittest.TestCase):
    def run_main(self, args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(numpy_peer.main(args), 0)
        return json.loads(out.getvalue())

    def test_point(self):
        answer = self.run_main(["--a", "30", "--l", "3", "--c", "4", "--series",
                                "odc:float64,kawakami:float32,imakura:float64", "--warmup", "2",
                                "--repetitions", "3", "--seed", "9"])
        got = {(r["method"], r["precision"]): r for r in answer["results"]}
        self.assertEqual(set(got), {("odc", "float64"), ("kawakami", "float32"),
                                    ("imakura", "float64")})
        for r in got.values():
            self.assertEqual(r["status"], "ok")
            self.assertEqual(len(r["warmup_seconds"]), 2)
            self.assertEqual(len(r["seconds"]), 3)
            self.assertTrue(all(t > 0 for t in r["seconds"]))

    def test_errors_are_reported_per_series(self):
        # With l > a, R_i is not square and numpy.linalg.solve fails; the answer is still one
        # JSON object, with the failure in the series' entry.
        answer = self.run_main(["--a", "3", "--l", "5", "--c", "2", "--series",
                                "kawakami,odc", "--repetitions", "1"])
        got = {r["method"]: r for r in answer["results"]}
        self.assertEqual(got["kawakami"]["status"], "error")
        self.assertIn("LinAlgError", got["kawakami"]["reason"])
        self.assertEqual(got["odc"]["status"], "ok")

    def test_describe(self):
        d = self.run_main(["--describe"])
        self.assertEqual(d["numpy"], np.__version__)
        self.assertIn("blas", d)


if __name__ == "__main__":
    unittest.main()
