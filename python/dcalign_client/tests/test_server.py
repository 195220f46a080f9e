"""dcalign_client against a real dcalign-server (env DCALIGN_SERVER, default
/work/build-py/src/cli/dcalign-server), started on 127.0.0.1 with --insecure-localhost in a
temporary data directory and stopped with SIGTERM at the end (its exit status must be 0).

Without the binary these tests skip, except under CI=true, where they fail."""
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest
from itertools import combinations
from pathlib import Path

import numpy as np

from dcalign_client import Client, ServiceError

SERVER = os.environ.get("DCALIGN_SERVER", "/work/build-py/src/cli/dcalign-server")
ANALYST_TOKEN = "analyst-token-for-the-python-client-tests"
PARTICIPANTS = ["alice", "bob", "carol"]
ROWS, FEATURES, DIM = 40, 10, 4

_server = None  # the subprocess.Popen
_tmp = None
_target = None


def spec(name, participants=PARTICIPANTS):
    return {"name": name, "method": "odc", "dim": DIM,
            "anchor": {"kind": "uniform", "rows": ROWS, "features": FEATURES, "seed": 1},
            "participants": list(participants), "model": "none", "max_rows": 100, "seed": 5}


def _log():
    return (Path(_tmp.name) / "server.log").read_text(errors="replace")


def setUpModule():
    global _server, _tmp, _target
    if not os.access(SERVER, os.X_OK):
        message = f"dcalign-server not built: {SERVER} (set DCALIGN_SERVER)"
        if os.environ.get("CI") == "true":
            raise RuntimeError(message + "; CI=true requires it")
        raise unittest.SkipTest(message)
    _tmp = tempfile.TemporaryDirectory(prefix="dcalign-client-test-")
    root = Path(_tmp.name)
    token_file = root / "analyst.token"
    token_file.write_text(ANALYST_TOKEN + "\n")
    token_file.chmod(0o600)
    port_file = root / "port"
    with open(root / "server.log", "wb") as log:
        _server = subprocess.Popen(
            [SERVER, "--insecure-localhost", "--listen", "127.0.0.1:0", "--port-file",
             str(port_file), "--data-dir", str(root / "data"), "--analyst-token-file",
             str(token_file), "--device", "cpu"],
            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not port_file.exists():
        if _server.poll() is not None or time.monotonic() > deadline:
            _server.kill()
            _server.wait()
            raise RuntimeError(f"dcalign-server did not start (exit {_server.returncode}):\n"
                               + _log())
        time.sleep(0.05)
    _target = f"127.0.0.1:{int(port_file.read_text())}"


def tearDownModule():
    if _server is None:
        return
    try:
        _server.send_signal(signal.SIGTERM)
        try:
            rc = _server.wait(timeout=90)
        except subprocess.TimeoutExpired:
            _server.kill()
            _server.wait()
            raise AssertionError("dcalign-server did not stop within 90 s of SIGTERM:\n" + _log())
        if rc != 0:
            raise AssertionError(f"dcalign-server exited {rc} after SIGTERM:\n" + _log())
    finally:
        _tmp.cleanup()


def analyst(**kw):
    return Client(_target, ANALYST_TOKEN, insecure=True, deadline=30, **kw)


def participant(token, **kw):
    return Client(_target, token, insecure=True, deadline=30, **kw)


def wait_done(client, cid, timeout=120):
    end = time.monotonic() + timeout
    while True:
        st = client.status(cid)
        if st["job_state"] in ("done", "failed") or time.monotonic() > end:
            return st
        time.sleep(0.1)


class ServerTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_healthy(self):
        with analyst() as a:
            self.assertTrue(a.healthy())

    def test_three_participants_end_to_end(self):
        rng = np.random.default_rng(2024)
        anchor = rng.uniform(size=(ROWS, FEATURES))
        # Each participant's secret basis F_i; its release A_i = A F_i (C order, as numpy makes it).
        releases = {p: anchor @ rng.standard_normal((FEATURES, DIM)) for p in PARTICIPANTS}
        with analyst() as a:
            cid, tokens = a.create(spec("py-e2e"))
            self.assertEqual(sorted(tokens), sorted(PARTICIPANTS))
            self.assertEqual(a.status(cid)["job_state"], "none")
            for p in PARTICIPANTS:
                with participant(tokens[p]) as c:
                    res = c.upload(cid, "anchor", releases[p])
                    self.assertTrue(res.complete)
                    self.assertEqual((res.resumed_from, res.total), (0, ROWS * DIM * 8))
                    self.assertEqual(c.upload_offset(cid, "anchor"),
                                     {"committed": ROWS * DIM * 8, "complete": True,
                                      "total": ROWS * DIM * 8})
            st = a.status(cid)
            self.assertTrue(all(p["uploaded"] for p in st["participants"]))
            self.assertEqual(st["participants"][0]["parts"][0]["part"], "PART_ANCHOR")
            self.assertIn(a.run(cid), ("queued", "running", "done"))  # queued by itself already
            st = wait_done(a, cid)
            self.assertEqual(st["job_state"], "done", st["job_error"])
            self.assertIsInstance(json.loads(st["job_report"]), dict)
            self.assertEqual(st["spec"]["anchor"]["rows"], ROWS)

            aligned = {}
            for p in PARTICIPANTS:
                with participant(tokens[p]) as c:
                    out = self.root / p
                    names = c.fetch(cid, out)
                    self.assertIn("G.npy", names)
                    self.assertIn("report.json", names)
                    json.loads((out / "report.json").read_text())
                    G = np.load(out / "G.npy")
                    self.assertEqual(G.shape, (DIM, DIM))
                    np.testing.assert_allclose(G.T @ G, np.eye(DIM), rtol=0, atol=1e-12)
                    aligned[p] = releases[p] @ G
                    marker = json.loads((out / ".dcalign-fetch.json").read_text())
                    self.assertEqual(marker, {"format": "dcalign-fetch", "format_version": 1,
                                              "collaboration": cid, "files": sorted(names)})
                    # A second fetch replaces the first, which it recognizes by the marker.
                    self.assertEqual(c.fetch(cid, out), names)
                    np.testing.assert_array_equal(np.load(out / "G.npy"), G)
                    self.assertEqual(json.loads((out / ".dcalign-fetch.json").read_text()),
                                     marker)
                    self.assertEqual([n for n in os.listdir(self.root) if n.startswith(".")],
                                     [])
                    # A user's file in it keeps it from being replaced (before any call).
                    (out / "notes.txt").write_text("mine")
                    with self.assertRaisesRegex(FileExistsError, "holds 'notes.txt'"):
                        c.fetch(cid, out)
                    self.assertEqual((out / "notes.txt").read_text(), "mine")
                    np.testing.assert_array_equal(np.load(out / "G.npy"), G)
            # The alignment did something: the aligned releases agree better than the raw ones.
            raw = np.mean([np.linalg.norm(releases[p] - releases[q])
                           for p, q in combinations(PARTICIPANTS, 2)])
            done = np.mean([np.linalg.norm(aligned[p] - aligned[q])
                            for p, q in combinations(PARTICIPANTS, 2)])
            self.assertLess(done, raw)
            # Once the job ran, the release is frozen.
            with participant(tokens["alice"]) as c:
                with self.assertRaises(ServiceError) as cm:
                    c.delete_release(cid)
                self.assertEqual(cm.exception.code, "FAILED_PRECONDITION")
            a.delete_collaboration(cid)
            with self.assertRaises(ServiceError) as cm:
                a.status(cid)
            self.assertIn(cm.exception.code, ("NOT_FOUND", "PERMISSION_DENIED"))

    def test_late_participant_is_enrolled(self):
        rng = np.random.default_rng(11)
        anchor = rng.uniform(size=(ROWS, FEATURES))
        with analyst() as a:
            cid, tokens = a.create(spec("py-late"))
            with self.assertRaises(ServiceError) as cm:
                a.add_participant(cid, "dave")
            self.assertEqual(cm.exception.code, "FAILED_PRECONDITION")
            for p in PARTICIPANTS:
                with participant(tokens[p]) as c:
                    c.upload(cid, "anchor", anchor @ rng.standard_normal((FEATURES, DIM)))
            self.assertEqual(wait_done(a, cid)["job_state"], "done")
            token = a.add_participant(cid, "dave")
            with participant(token) as c:
                c.upload(cid, "anchor", anchor @ rng.standard_normal((FEATURES, DIM)))
                end = time.monotonic() + 60
                while time.monotonic() < end:
                    mine = [p for p in c.status(cid)["participants"] if p["participant"] == "dave"]
                    if mine[0].get("enrolment_state") in ("done", "failed"):
                        break
                    time.sleep(0.05)
                self.assertTrue(mine[0]["late"])
                self.assertEqual(mine[0]["enrolment_state"], "done")
                files = c.fetch(cid, self.root / "dave")
                self.assertIn("G.npy", [Path(f).name for f in files])
                G = np.load(self.root / "dave" / "G.npy")
                self.assertEqual(G.shape, (DIM, DIM))
                # ODC enrols by a Procrustes step: G is orthogonal.
                np.testing.assert_allclose(G.T @ G, np.eye(DIM), atol=1e-10)

    def test_resume_after_interrupted_upload(self):
        A = np.random.default_rng(7).standard_normal((ROWS, DIM))
        total = ROWS * DIM * 8  # 1280 bytes: 5 chunks of 256
        with analyst() as a:
            cid, tokens = a.create(spec("py-resume"))
            with participant(tokens["bob"], chunk_bytes=256) as c:
                self.assertEqual(c.upload_offset(cid, "anchor")["total"], 0)
                first = c.upload(cid, "anchor", A, stop_after_chunks=2)
                self.assertEqual(first.committed, 512)
                self.assertFalse(first.complete)
                self.assertEqual(c.upload_offset(cid, "anchor"),
                                 {"committed": 512, "complete": False, "total": total})
                # A token reissued in between: the old one is dead, the new one resumes.
                new_token = a.reissue(cid, "bob")
                with self.assertRaises(ServiceError) as cm:
                    c.upload_offset(cid, "anchor")
                self.assertEqual(cm.exception.code, "UNAUTHENTICATED")
            with participant(new_token, chunk_bytes=256) as c:
                second = c.upload(cid, "anchor", A)
                self.assertEqual(second, (512, total, total, True))
                self.assertEqual(c.upload_offset(cid, "anchor")["complete"], True)
                again = c.upload(cid, "anchor", A)  # already stored: nothing is sent
                self.assertEqual(again, (total, total, total, True))
                with self.assertRaises(ServiceError) as cm:
                    c.upload(cid, "anchor", A + 1)
                self.assertEqual(cm.exception.code, "ALREADY_EXISTS")
                c.delete_release(cid)
                self.assertEqual(c.upload_offset(cid, "anchor")["total"], 0)
            bob = a.status(cid)["participants"][1]
            self.assertEqual((bob["participant"], bob["uploaded"]), ("bob", False))
            a.delete_collaboration(cid)

    def test_request_id_repeats_the_first_answer(self):
        rid = Client.new_request_id()
        with analyst() as a:
            cid, tokens = a.create(spec("py-request-id"), request_id=rid)
            again, tokens_again = a.create(spec("py-request-id"), request_id=rid)
            if again != cid:
                a.delete_collaboration(again)
                a.delete_collaboration(cid)
                self.skipTest("server predates request_id: two creates with the same "
                              f"request_id made two collaborations ({SERVER})")
            self.assertEqual(tokens_again, tokens)
            # The same id with another request is refused, not answered.
            with self.assertRaises(ServiceError) as cm:
                a.create(spec("py-request-id-other"), request_id=rid)
            self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
            self.assertEqual(cm.exception.request_id, rid)
            # Without an id given, each call gets a new one: two collaborations.
            other, _ = a.create(spec("py-request-id"))
            self.assertNotEqual(other, cid)
            a.delete_collaboration(other)
            # A repeated reissue returns the same new token instead of revoking it in turn.
            rid2 = Client.new_request_id()
            token = a.reissue(cid, "bob", request_id=rid2)
            self.assertNotEqual(token, tokens["bob"])
            self.assertEqual(a.reissue(cid, "bob", request_id=rid2), token)
            with participant(token) as c:
                self.assertEqual(c.upload_offset(cid, "anchor")["total"], 0)
            with participant(tokens["bob"]) as c:
                with self.assertRaises(ServiceError) as cm:
                    c.upload_offset(cid, "anchor")
                self.assertEqual(cm.exception.code, "UNAUTHENTICATED")
            a.delete_collaboration(cid)

    def test_errors(self):
        with analyst() as a:
            cid, tokens = a.create(spec("py-errors"))
            for token in (None, "", "not-a-valid-token-at-all"):
                with Client(_target, token, insecure=True, deadline=30) as anon:
                    with self.assertRaises(ServiceError) as cm:
                        anon.status(cid)
                    self.assertEqual(cm.exception.code, "UNAUTHENTICATED", token)
                    with self.assertRaises(ServiceError) as cm:
                        anon.create(spec("py-anon"))
                    self.assertEqual(cm.exception.code, "UNAUTHENTICATED")
            with participant(tokens["carol"]) as c:
                for call in (lambda: c.run(cid), lambda: c.create(spec("py-p")),
                             lambda: c.delete_collaboration(cid),
                             lambda: c.reissue(cid, "alice")):
                    with self.assertRaises(ServiceError) as cm:
                        call()
                    self.assertEqual(cm.exception.code, "PERMISSION_DENIED")
                    self.assertTrue(cm.exception.message)
                # Refused before anything is sent: the server never heard of the upload.
                bad = np.ones((ROWS, DIM))
                bad[3, 2] = np.nan
                with self.assertRaisesRegex(ValueError, "NaN or Inf at row 3, column 2"):
                    c.upload(cid, "anchor", bad)
                with self.assertRaisesRegex(ValueError, "2-D"):
                    c.upload(cid, "anchor", np.ones(ROWS * DIM))
                self.assertEqual(c.upload_offset(cid, "anchor")["total"], 0)
                for shape in ((ROWS, DIM - 1), (ROWS + 1, DIM)):
                    with self.assertRaises(ServiceError) as cm:
                        c.upload(cid, "anchor", np.ones(shape))
                    self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
                    self.assertEqual(cm.exception.rpc, "Upload")
                with self.assertRaises(ServiceError) as cm:
                    c.fetch(cid, self.root / "out")
                self.assertEqual(cm.exception.code, "FAILED_PRECONDITION")
                self.assertEqual(os.listdir(self.root), [])
            with self.assertRaises(ServiceError) as cm:
                a.upload(cid, "anchor", np.ones((ROWS, DIM)))
            self.assertEqual(cm.exception.code, "PERMISSION_DENIED")
            with self.assertRaises(ServiceError) as cm:
                a.run(cid)
            self.assertEqual(cm.exception.code, "FAILED_PRECONDITION")
            with self.assertRaises(ServiceError) as cm:
                a.create(dict(spec("py-bad"), dim=0))
            self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
            a.delete_collaboration(cid)


if __name__ == "__main__":
    unittest.main()
