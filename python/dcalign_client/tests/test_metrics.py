"""dcalign-server's Prometheus endpoint (--metrics-listen), scraped during and after a test
collaboration and parsed with prometheus_client's text-format parser (Debian:
python3-prometheus-client): the counters must add up to the calls this test made.

The server is its own (two CPU workers, a fresh data directory); without the binary the tests
skip, except under CI=true, where they fail."""
import os
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.request
from pathlib import Path

import numpy as np

from dcalign_client import Client, ServiceError

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # pragma: no cover - the project's install-deps.sh installs it
    text_string_to_metric_families = None

SERVER = os.environ.get("DCALIGN_SERVER", "/work/build-py/src/cli/dcalign-server")
TOKEN = "analyst-token-for-the-metrics-test"
ROWS, FEATURES, DIM = 40, 10, 4
PARTICIPANTS = ["alice", "bob", "carol"]


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
        text = r.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


class MetricsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(SERVER, os.X_OK):
            message = f"dcalign-server not built: {SERVER} (set DCALIGN_SERVER)"
            if os.environ.get("CI") == "true":
                raise RuntimeError(message + "; CI=true requires it")
            raise unittest.SkipTest(message)
        if text_string_to_metric_families is None:
            message = "prometheus_client is not installed (Debian: python3-prometheus-client)"
            if os.environ.get("CI") == "true":
                raise RuntimeError(message)
            raise unittest.SkipTest(message)
        cls.tmp = tempfile.TemporaryDirectory(prefix="dcalign-metrics-test-")
        root = Path(cls.tmp.name)
        (root / "token").write_text(TOKEN + "\n")
        cls.log = root / "server.log"
        with open(cls.log, "wb") as log:
            cls.server = subprocess.Popen(
                [SERVER, "--insecure-localhost", "--port-file", str(root / "port"),
                 "--metrics-listen", "127.0.0.1:0", "--metrics-port-file",
                 str(root / "metrics-port"), "--data-dir", str(root / "data"),
                 "--analyst-token-file", str(root / "token"), "--device", "cpu",
                 "--cpu-workers", "2"], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not (root / "metrics-port").exists():
            if cls.server.poll() is not None or time.monotonic() > deadline:
                cls.server.kill()
                cls.server.wait()
                raise RuntimeError("dcalign-server did not start:\n" + cls.log.read_text())
            time.sleep(0.05)
        cls.target = f"127.0.0.1:{int((root / 'port').read_text())}"
        cls.metrics_port = int((root / "metrics-port").read_text())

    @classmethod
    def tearDownClass(cls):
        cls.server.send_signal(signal.SIGTERM)
        rc = cls.server.wait(timeout=90)
        cls.tmp.cleanup()
        if rc != 0:
            raise AssertionError(f"dcalign-server exited {rc} after SIGTERM")

    def client(self, token):
        return Client(self.target, token, insecure=True, deadline=30)

    def test_counters_add_up_to_a_collaboration(self):
        before = scrape(self.metrics_port)
        self.assertEqual(value(before, "dcalign_upload_bytes_total"), 0)
        self.assertEqual(value(before, "dcalign_jobs", state="running"), 0)
        # Both workers are listed, idle, with their host memory.
        for w in ("cpu0", "cpu1"):
            self.assertEqual(value(before, "dcalign_worker_running", worker=w), 0)
            self.assertGreater(value(before, "dcalign_worker_device_memory_bytes", worker=w), 0)
        rng = np.random.default_rng(7)
        anchor = rng.uniform(size=(ROWS, FEATURES))
        with self.client(TOKEN) as a:
            cid, tokens = a.create({
                "name": "metrics", "method": "odc", "dim": DIM,
                "anchor": {"kind": "uniform", "rows": ROWS, "features": FEATURES, "seed": 1},
                "participants": PARTICIPANTS, "model": "none", "max_rows": 100, "seed": 5})
            # Two refusals of known codes.
            with self.client("not-the-analyst-token-at-all") as anon:
                with self.assertRaises(ServiceError) as cm:
                    anon.status(cid)
                self.assertEqual(cm.exception.code, "UNAUTHENTICATED")
            with self.assertRaises(ServiceError) as cm:
                a.status("c" + "0" * 32)
            self.assertEqual(cm.exception.code, "NOT_FOUND")
            during = scrape(self.metrics_port)
            self.assertEqual(value(during, "dcalign_rpc_duration_seconds_count",
                                   method="CreateCollaboration", code="OK"), 1)
            for p in PARTICIPANTS:
                with self.client(tokens[p]) as c:
                    c.upload(cid, "anchor", anchor @ rng.standard_normal((FEATURES, DIM)))
            end = time.monotonic() + 60
            while a.status(cid)["job_state"] not in ("done", "failed") and time.monotonic() < end:
                time.sleep(0.05)
            self.assertEqual(a.status(cid)["job_state"], "done")
            for p in PARTICIPANTS:
                with self.client(tokens[p]) as c, tempfile.TemporaryDirectory() as out:
                    c.fetch(cid, Path(out) / "r")
        after = scrape(self.metrics_port)

        def count(method, code="OK"):
            return value(after, "dcalign_rpc_duration_seconds_count", method=method, code=code)

        self.assertEqual(count("CreateCollaboration"), 1)
        self.assertEqual(count("Upload"), 3)
        self.assertEqual(count("Fetch"), 3)
        self.assertEqual(count("GetStatus", "UNAUTHENTICATED"), 1)
        self.assertEqual(count("GetStatus", "NOT_FOUND"), 1)
        self.assertGreaterEqual(count("GetStatus"), 2)
        # Every answered call is in exactly one bucket <= +Inf, and the buckets only grow.
        for (name, labels), v in after.items():
            if name == "dcalign_rpc_duration_seconds_count":
                d = dict(labels)
                inf = value(after, "dcalign_rpc_duration_seconds_bucket", le="+Inf", **d)
                self.assertEqual(inf, v, labels)
        buckets = sorted((float(dict(l)["le"]), v) for (n, l), v in after.items()
                         if n == "dcalign_rpc_duration_seconds_bucket"
                         and dict(l)["method"] == "Upload")
        self.assertEqual([v for _, v in buckets], sorted(v for _, v in buckets))
        # Three anchors of ROWS x DIM float64 values, nothing else.
        self.assertEqual(value(after, "dcalign_upload_bytes_total"), 3 * ROWS * DIM * 8)
        self.assertEqual(value(after, "dcalign_jobs_finished_total", result="done"), 1)
        self.assertEqual(value(after, "dcalign_jobs_finished_total", result="failed"), 0)
        self.assertEqual(value(after, "dcalign_jobs", state="queued"), 0)
        self.assertEqual(value(after, "dcalign_jobs", state="running"), 0)
        for phase in ("queue", "upload_to_run", "align", "publish"):
            self.assertEqual(value(after, "dcalign_job_phase_seconds_count", phase=phase), 1,
                             phase)
        self.assertEqual(value(after, "dcalign_job_phase_seconds_count", phase="train"), 0)
        busy = sum(value(after, "dcalign_worker_busy_seconds_total", worker=w, device="cpu")
                   for w in ("cpu0", "cpu1"))
        self.assertGreater(busy, 0)
        self.assertGreaterEqual(busy, value(after, "dcalign_job_phase_seconds_sum", phase="align"))
        self.assertGreater(value(after, "dcalign_data_directory_bytes"),
                           value(before, "dcalign_data_directory_bytes") + 3 * ROWS * DIM * 8 - 1)
        self.assertGreater(value(after, "dcalign_data_directory_free_bytes"), 0)

    def test_only_get_metrics_is_served(self):
        with self.assertRaises(urllib.error.HTTPError) as cm:
            urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/other", timeout=10)
        self.assertEqual(cm.exception.code, 404)


if __name__ == "__main__":
    unittest.main()
