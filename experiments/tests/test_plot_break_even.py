import math
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "comm"))
import plot_break_even as pbe  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def built_dcalign():
    """The dcalign executable of $DCALIGN_CLI or ./build, if there is one that has `comm` (a
    build older than the command has not; tests/cli/test_comm_cli.cpp tests the command)."""
    for path in (os.environ.get("DCALIGN_CLI", ""), os.path.join(ROOT, "build/src/cli/dcalign")):
        if path and os.access(path, os.X_OK):
            done = subprocess.run([path, "--help"], capture_output=True, text=True)
            if any(line.split()[:1] == ["comm"] for line in done.stdout.splitlines()):
                return path
    return None


class Grids(unittest.TestCase):
    def test_log_grid_is_geometric_with_both_ends(self):
        g = pbe.log_grid(10.0, 1e5, 5)
        self.assertEqual(len(g), 5)
        for got, want in zip(g, [10.0, 100.0, 1e3, 1e4, 1e5]):
            self.assertAlmostEqual(got / want, 1.0, places=12)
        with self.assertRaises(ValueError):
            pbe.log_grid(0.0, 1.0, 3)
        with self.assertRaises(ValueError):
            pbe.log_grid(1.0, 10.0, 1)

    def test_linear_grid_of_participation(self):
        g = pbe.linear_grid(0.05, 1.0, 39)
        self.assertAlmostEqual(g[0], 0.05)
        self.assertAlmostEqual(g[-1], 1.0)
        self.assertAlmostEqual(g[1] - g[0], 0.025)

    def test_comm_args_keep_full_precision(self):
        args = pbe.comm_args(1000, 2.5e7, 0.1, fixed={"users": 100})
        self.assertEqual(args[0], "comm")
        self.assertEqual(args[args.index("--users") + 1], "100")
        self.assertEqual(args[args.index("--model-parameters") + 1], "25000000.0")
        n = pbe.log_grid(10.0, 1e5, 21)[7]
        self.assertEqual(float(args_value(pbe.comm_args(n, 1e6, 1), "--mean-samples")), n)


def args_value(args, option):
    return args[args.index(option) + 1]


class Figures(unittest.TestCase):
    def test_compute_covers_every_grid_point(self):
        calls = []

        def fake(n, N, p):
            calls.append((n, N, p))
            return n + N + p

        rows = pbe.compute(fake)
        self.assertEqual(len(rows), 4 * 21 * 21 + 4 * 41 + 4 * 39)
        self.assertEqual(len(rows), len(calls))
        self.assertEqual(len(pbe.select(rows, "fig4", p=0.25)), 21 * 21)
        self.assertEqual(len(pbe.select(rows, "fig5b", N=2.5e7)), 39)
        for r in rows:
            self.assertEqual(r[4], r[2] + r[3] + r[1])

    @unittest.skipUnless(built_dcalign(), "no built dcalign (set DCALIGN_CLI)")
    def test_break_even_from_dcalign_matches_the_paper(self):
        # 001's example: R* = 1.03976e10 / (p 2e10) with gamma = c.
        r_star = pbe.BreakEven(built_dcalign())
        try:
            self.assertAlmostEqual(r_star(1000, 2.5e7, 0.1), 5.1988, places=9)
            self.assertAlmostEqual(r_star(1000, 2.5e7, 1.0), 0.51988, places=9)
            self.assertEqual(r_star.calls, 2)
            with self.assertRaises(RuntimeError):
                r_star(1000, 2.5e7, 1.5)
        finally:
            r_star.close()
        self.assertFalse(os.path.exists(r_star.tmp))


if __name__ == "__main__":
    unittest.main()
