"""dcalign_client without dcalign-server: the wire format of matrices, token files, and the
client's side of the protocol against an in-process fake server (metadata, deadlines, request
ids and their retries, Fetch's checks, the directories it replaces, its cleanup on SIGTERM)."""
import contextlib
import hashlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from concurrent import futures
from pathlib import Path
from unittest import mock

import grpc
import numpy as np

from dcalign_client import Client, ServiceError, matrix_bytes, read_token_file
from dcalign_client import _outputs as outputs_module
from dcalign_client._proto import analyst_pb2 as pb
from dcalign_client._proto import analyst_pb2_grpc as pb_grpc


class MatrixBytesTest(unittest.TestCase):
    def test_c_order_becomes_column_major_little_endian(self):
        m = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # C order
        rows, cols, data = matrix_bytes(m)
        self.assertEqual((rows, cols), (2, 3))
        self.assertEqual(struct.unpack("<6d", data), (1.0, 4.0, 2.0, 5.0, 3.0, 6.0))
        self.assertEqual(matrix_bytes(np.asfortranarray(m))[2], data)
        self.assertEqual(matrix_bytes(m.astype(">f8"))[2], data)  # big-endian input
        self.assertEqual(matrix_bytes(m.astype(np.int32))[2], data)
        self.assertEqual(matrix_bytes(m.T.T)[2], data)
        self.assertEqual(matrix_bytes(np.arange(12.0).reshape(3, 4)[:, ::2])[2],
                         struct.pack("<6d", 0, 4, 8, 2, 6, 10))  # a strided view

    def test_rejects_what_cannot_be_a_release(self):
        m = np.ones((3, 2))
        m[2, 1] = np.nan
        with self.assertRaisesRegex(ValueError, "NaN or Inf at row 2, column 1"):
            matrix_bytes(m)
        m[2, 1] = np.inf
        with self.assertRaisesRegex(ValueError, "NaN or Inf"):
            matrix_bytes(m)
        for bad in (np.ones(3), np.ones((2, 2, 2)), 1.0):
            with self.assertRaisesRegex(ValueError, "2-D"):
                matrix_bytes(bad)
        with self.assertRaisesRegex(ValueError, "empty"):
            matrix_bytes(np.ones((0, 4)))
        with self.assertRaisesRegex(ValueError, "real numbers"):
            matrix_bytes(np.ones((2, 2), dtype=complex))


class ReadTokenFileTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_reads_one_line(self):
        path = self.root / "t"
        for text, token in (("abc-DEF_123\n", "abc-DEF_123"), ("abc\r\n\n", "abc"),
                            ("x" * 4096, "x" * 4096)):
            path.write_text(text)
            self.assertEqual(read_token_file(path), token)
            self.assertEqual(read_token_file(str(path)), token)

    def test_refuses_what_cannot_be_a_token_file(self):
        path = self.root / "t"
        for text, why in (("x" * 4097, "4097 bytes"), ("secret token\n", "U\\+0020"),
                          ("secret\ttoken", "U\\+0009"), ("secret\ntoken\n", "U\\+000A"),
                          ("secret\x01token", "U\\+0001"), ("secret\x00token", "U\\+0000"),
                          ("secret\u2028token", "U\\+2028"), ("\n", "no token"),
                          ("", "no token")):
            with self.subTest(text=text[:20]):
                path.write_text(text)
                with self.assertRaisesRegex(ValueError, why) as cm:
                    read_token_file(path)
                self.assertIn(str(path), str(cm.exception))
                self.assertNotIn("secret", str(cm.exception))  # never the token itself
        path.write_bytes(b"\xff\xfe")
        with self.assertRaisesRegex(ValueError, "not UTF-8"):
            read_token_file(path)
        with self.assertRaisesRegex(ValueError, "not a regular file"):
            read_token_file(self.root)
        fifo = self.root / "fifo"
        os.mkfifo(fifo)  # opening it would block without a writer
        with self.assertRaisesRegex(ValueError, f"'{fifo}' is not a regular file"):
            read_token_file(fifo)
        with self.assertRaises(FileNotFoundError):
            read_token_file(self.root / "missing")


class FakeAnalyst(pb_grpc.AnalystServicer):
    """Records the metadata and deadline of each call (`calls`) and its name (`rpcs`); Fetch
    sends `self.chunks`, calls `after_first_chunk` once the first is sent, and records the
    SIGTERM handler in place meanwhile; CreateCollaboration and ReissueToken record the request
    ids and fail with the codes in `failures`, one per call, before answering."""

    def __init__(self):
        self.calls = []
        self.rpcs = []
        self.chunks = []
        self.after_first_chunk = None
        self.sigterm_handlers = []
        self.request_ids = []
        self.failures = []

    def _record(self, context, rpc):
        self.calls.append((dict(context.invocation_metadata()), context.time_remaining()))
        self.rpcs.append(rpc)

    def GetStatus(self, request, context):
        self._record(context, "GetStatus")
        return pb.GetStatusResponse(job_state="none", spec=pb.CollaborationSpec(max_rows=7))

    def Fetch(self, request, context):
        self._record(context, "Fetch")
        self.sigterm_handlers.append(signal.getsignal(signal.SIGTERM))
        for i, chunk in enumerate(self.chunks):
            yield chunk
            if i == 0 and self.after_first_chunk is not None:
                self.after_first_chunk()

    def _answer_once(self, request, context, rpc):
        self._record(context, rpc)
        self.request_ids.append(request.request_id)
        if self.failures:
            context.abort(self.failures.pop(0), "injected by the test")

    def CreateCollaboration(self, request, context):
        self._answer_once(request, context, "CreateCollaboration")
        return pb.CreateCollaborationResponse(
            collaboration_id="c-" + request.spec.name,
            tokens=[pb.ParticipantToken(participant="alice", token="t-alice")])

    def ReissueToken(self, request, context):
        self._answer_once(request, context, "ReissueToken")
        return pb.ReissueTokenResponse(token=pb.ParticipantToken(
            participant=request.participant, token="t-new-" + request.participant))


def chunks_of(name, data, step=4, size=None, sha=None):
    """The FetchChunk messages of one file, as the server sends them."""
    out = []
    for off in range(0, max(len(data), 1), step):
        out.append(pb.FetchChunk(file=name, offset=off, data=data[off:off + step],
                                 file_size=len(data) if size is None else size,
                                 sha256=(sha or hashlib.sha256(data).hexdigest())
                                 if off == 0 else ""))
    return out


def tree(path):
    """Everything below `path` (symbolic links not followed): {relative name: bytes of a file,
    "dir", or "-> target" of a link}."""
    out = {}
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(top, name)
            rel = os.path.relpath(full, path)
            if os.path.islink(full):
                out[rel] = "-> " + os.readlink(full)
            elif os.path.isdir(full):
                out[rel] = "dir"
            else:
                out[rel] = Path(full).read_bytes()
    return out


def hidden(path):
    """The hidden entries of a directory: where a fetch's temporaries would be."""
    return sorted(n for n in os.listdir(path) if n.startswith("."))


def marker(out):
    return json.loads((Path(out) / ".dcalign-fetch.json").read_text())


SPEC = {"name": "s", "participants": ["alice"]}
REQUEST_ID = r"\A[A-Za-z0-9_-]{16,64}\Z"

# A child process that fetches into argv[2] from the fake server at argv[1] (its Fetch blocks
# after the first chunk) and is killed by SIGTERM meanwhile.
FETCH_CHILD = """
import sys
from dcalign_client import Client
Client(sys.argv[1], "tok", insecure=True, deadline=60).fetch("c1", sys.argv[2])
print("fetch returned")
"""


class FakeServerTest(unittest.TestCase):
    def setUp(self):
        self.servicer = FakeAnalyst()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_AnalystServicer_to_server(self.servicer, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.client = Client(f"127.0.0.1:{self.port}", "tok-123", insecure=True, deadline=7.5)
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        self.release = threading.Event()  # ends a Fetch that a test holds open

    def tearDown(self):
        self.release.set()
        self.client.close()
        self.server.stop(None)
        self.tmp.cleanup()

    def fetched(self, out, files, collaboration="c1"):
        """Fetches `files` ({name: bytes}) into `out` and checks the result and its marker."""
        self.servicer.chunks = [c for name, data in files.items() for c in chunks_of(name, data)]
        self.assertEqual(self.client.fetch(collaboration, out), list(files))
        self.assertEqual(marker(out), {"format": "dcalign-fetch", "format_version": 1,
                                       "collaboration": collaboration,
                                       "files": sorted(files)})
        for name, data in files.items():
            self.assertEqual((Path(out) / name).read_bytes(), data)
        self.assertEqual(hidden(Path(out).parent), [])

    def test_metadata_deadline_and_status_dict(self):
        st = self.client.status("c1")
        self.assertEqual(st["job_state"], "none")
        self.assertEqual(st["spec"]["max_rows"], 7)  # an int, not json_format's string
        self.assertEqual(st["participants"], [])
        metadata, remaining = self.servicer.calls[-1]
        self.assertEqual(metadata["authorization"], "Bearer tok-123")
        self.assertIsNotNone(remaining)  # None: the call had no deadline
        self.assertTrue(0 < remaining <= 8.0, remaining)  # 7.5 s, as the timeout header rounds it

    def test_unimplemented_becomes_service_error(self):
        with self.assertRaises(ServiceError) as cm:
            self.client.run("c1")
        self.assertEqual(cm.exception.code, "UNIMPLEMENTED")
        self.assertEqual(cm.exception.rpc, "Run")

    # -- request ids -------------------------------------------------------------------------
    def test_create_and_reissue_send_a_new_well_formed_request_id(self):
        self.assertEqual(self.client.create(SPEC), ("c-s", {"alice": "t-alice"}))
        self.assertEqual(self.client.create(SPEC), ("c-s", {"alice": "t-alice"}))
        self.assertEqual(self.client.reissue("c-s", "alice"), "t-new-alice")
        ids = self.servicer.request_ids
        self.assertEqual(len(ids), 3)
        for rid in ids:
            self.assertRegex(rid, REQUEST_ID)
        self.assertEqual(len(set(ids)), 3, ids)  # a new one for each call
        new = {Client.new_request_id() for _ in range(50)}
        self.assertEqual(len(new), 50)
        for rid in new:
            self.assertRegex(rid, REQUEST_ID)

    def test_a_given_request_id_is_sent(self):
        rid, rid2 = Client.new_request_id(), "A" * 16 + "-_z9"
        self.client.create(SPEC, request_id=rid)
        self.client.reissue("c-s", "alice", request_id=rid2)
        self.assertEqual(self.servicer.request_ids, [rid, rid2])

    def test_retries_reuse_the_request_id(self):
        self.servicer.failures = [grpc.StatusCode.UNAVAILABLE,
                                  grpc.StatusCode.DEADLINE_EXCEEDED]
        self.assertEqual(self.client.create(SPEC), ("c-s", {"alice": "t-alice"}))
        ids = self.servicer.request_ids
        self.assertEqual(len(ids), 3)
        self.assertEqual(len(set(ids)), 1, ids)
        self.servicer.failures = [grpc.StatusCode.UNAVAILABLE]
        rid = Client.new_request_id()
        self.assertEqual(self.client.reissue("c-s", "alice", request_id=rid), "t-new-alice")
        self.assertEqual(ids[3:], [rid, rid])

    def test_retries_end_after_three_tries(self):
        self.servicer.failures = [grpc.StatusCode.UNAVAILABLE] * 5
        with self.assertRaises(ServiceError) as cm:
            self.client.create(SPEC)
        ids = self.servicer.request_ids
        self.assertEqual(len(ids), 3)
        self.assertEqual(len(set(ids)), 1, ids)
        self.assertEqual(cm.exception.code, "UNAVAILABLE")
        self.assertEqual(cm.exception.request_id, ids[0])  # to call again with
        self.assertIn(f"request_id={ids[0]!r} within 10 minutes", cm.exception.message)
        # Other errors are not tried again.
        self.servicer.failures = [grpc.StatusCode.PERMISSION_DENIED]
        with self.assertRaises(ServiceError) as cm:
            self.client.reissue("c-s", "alice")
        self.assertEqual(cm.exception.code, "PERMISSION_DENIED")
        self.assertEqual(len(ids), 4)
        self.assertEqual(cm.exception.request_id, ids[3])

    def test_a_malformed_request_id_is_refused_before_the_call(self):
        for bad in ("", "x" * 15, "x" * 65, "has a space in it!", "é" * 20, "x" * 16 + "\n",
                    "x" * 16 + "/", b"x" * 16, 12345678901234567):
            with self.subTest(bad=bad):
                with self.assertRaisesRegex(ValueError, "request_id .*16 to 64 characters"):
                    self.client.create(SPEC, request_id=bad)
                with self.assertRaisesRegex(ValueError, "request_id"):
                    self.client.reissue("c-s", "alice", request_id=bad)
        self.assertEqual(self.servicer.rpcs, [])

    # -- fetch -------------------------------------------------------------------------------
    def test_fetch_writes_checked_files_into_place(self):
        g = b"\x93NUMPY fake G" * 3
        self.servicer.chunks = chunks_of("G.npy", g) + chunks_of("model/m.bin", b"") + \
            chunks_of("report.json", b"{}")
        out = self.root / "out"
        self.assertEqual(self.client.fetch("c1", out), ["G.npy", "model/m.bin", "report.json"])
        self.assertEqual((out / "G.npy").read_bytes(), g)
        self.assertEqual((out / "model" / "m.bin").read_bytes(), b"")
        self.assertEqual(sorted(os.listdir(self.root)), ["out"])  # no temporary left
        self.assertEqual(marker(out), {"format": "dcalign-fetch", "format_version": 1,
                                       "collaboration": "c1",
                                       "files": ["G.npy", "model/m.bin", "report.json"]})
        # A second fetch replaces the first.
        self.servicer.chunks = chunks_of("G.npy", b"new")
        self.client.fetch("c1", out)
        self.assertEqual(sorted(os.listdir(out)), [".dcalign-fetch.json", "G.npy"])
        self.assertEqual(marker(out)["files"], ["G.npy"])
        self.assertEqual(sorted(os.listdir(self.root)), ["out"])

    def test_fetch_into_an_empty_directory(self):
        out = self.root / "out"
        out.mkdir()
        self.fetched(out, {"G.npy": b"g", "report.json": b"{}"})
        self.assertEqual(sorted(os.listdir(self.root)), ["out"])

    def test_a_second_fetch_replaces_only_what_the_first_wrote(self):
        out = self.root / "out"
        (self.root / "notes.txt").write_text("beside it")
        self.fetched(out, {"G.npy": b"g1", "model/m.bin": b"m", "model/sub/x.json": b"{}",
                           "report.json": b"{1}"})
        self.fetched(out, {"G.npy": b"g2", "report.json": b"{2}"}, collaboration="c2")
        self.assertEqual(tree(out), {".dcalign-fetch.json": (out / ".dcalign-fetch.json")
                                     .read_bytes(), "G.npy": b"g2", "report.json": b"{2}"})
        self.assertEqual(sorted(os.listdir(self.root)), ["notes.txt", "out"])
        self.assertEqual((self.root / "notes.txt").read_text(), "beside it")
        # Where the file system cannot swap two directories in one step: moved aside first.
        with mock.patch.object(outputs_module, "_exchange", return_value=False) as exchange:
            self.fetched(out, {"G.npy": b"g3", "model/m.bin": b"m3"}, collaboration="c3")
            exchange.assert_called_once()
        self.assertEqual(sorted(os.listdir(out)), [".dcalign-fetch.json", "G.npy", "model"])
        self.assertEqual(sorted(os.listdir(self.root)), ["notes.txt", "out"])

    def test_fetch_keeps_a_directory_it_did_not_write(self):
        out = self.root / "mine"
        out.mkdir()
        (out / "G.npy").write_bytes(b"an older client's result, or the user's")
        (out / "notes.txt").write_text("keep")
        before = tree(out)
        self.servicer.chunks = chunks_of("G.npy", b"g")
        with self.assertRaises(FileExistsError) as cm:
            self.client.fetch("c1", out)
        self.assertIn(f"'{out}' holds 'G.npy', which a fetch did not write", str(cm.exception))
        self.assertIn(".dcalign-fetch.json", str(cm.exception))
        self.assertEqual(tree(out), before)
        (out / "G.npy").unlink()
        with self.assertRaisesRegex(FileExistsError, "holds 'notes.txt', which a fetch did not "
                                    "write .*not replaced"):
            self.client.fetch("c1", out)
        self.assertEqual(os.listdir(out), ["notes.txt"])
        (self.root / "file").write_text("x")
        with self.assertRaisesRegex(FileExistsError, "exists and is not a directory"):
            self.client.fetch("c1", self.root / "file")
        with self.assertRaises(FileNotFoundError):
            self.client.fetch("c1", self.root / "missing" / "out")
        with self.assertRaises(NotADirectoryError):
            self.client.fetch("c1", self.root / "file" / "out")
        self.assertEqual(self.servicer.rpcs, [])  # every check came before any call
        self.assertEqual(hidden(self.root), [])

    def test_fetch_never_follows_a_symbolic_link(self):
        target = self.root / "target"
        self.fetched(target, {"G.npy": b"g", "report.json": b"{}"})
        empty = self.root / "empty"
        empty.mkdir()
        before = tree(self.root)
        calls = len(self.servicer.rpcs)
        for name, to in (("link", target), ("to-empty", empty), ("dangling", "nowhere")):
            with self.subTest(name):
                link = self.root / name
                os.symlink(to, link)
                with self.assertRaisesRegex(FileExistsError, f"'{link}' is a symbolic link"):
                    self.client.fetch("c1", link)
                with self.assertRaisesRegex(FileExistsError, "symbolic link"):
                    self.client.fetch("c1", str(link) + "/")
                self.assertTrue(link.is_symlink())
                link.unlink()
        self.assertEqual(tree(self.root), before)
        self.assertEqual(len(self.servicer.rpcs), calls)

    def test_fetch_refuses_a_marked_directory_that_holds_more(self):
        out = self.root / "out"
        elsewhere = self.root / "elsewhere"
        elsewhere.write_text("not a result")
        good = {"G.npy": b"g", "model/m.bin": b"m", "report.json": b"{}"}
        mark = out / ".dcalign-fetch.json"

        def marker_saying(doc):
            return lambda: mark.write_text(json.dumps(doc))

        valid = {"format": "dcalign-fetch", "format_version": 1, "files": sorted(good)}
        cases = {
            "a file beside": (lambda: (out / "notes.txt").write_text("x"), "'notes.txt'"),
            "a file below": (lambda: (out / "model" / "notes.txt").write_text("x"),
                             "'model/notes.txt'"),
            "an empty directory": (lambda: (out / "extra").mkdir(), "'extra'"),
            "a link below": (lambda: os.symlink(elsewhere, out / "model" / "link"),
                             "symbolic link 'model/link'"),
            "a listed file as a link": (
                lambda: ((out / "G.npy").unlink(), os.symlink(elsewhere, out / "G.npy")),
                "symbolic link 'G.npy'"),
            "a listed file as a directory": (
                lambda: ((out / "G.npy").unlink(), (out / "G.npy").mkdir()), "'G.npy'"),
            "a listed directory as a link": (
                lambda: ((out / "model" / "m.bin").unlink(), (out / "model").rmdir(),
                         os.symlink(self.root, out / "model")), "symbolic link 'model'"),
            "another format": (marker_saying(dict(valid, format="other")), "format"),
            "no version": (marker_saying({k: v for k, v in valid.items()
                                          if k != "format_version"}), "format_version"),
            "a version as text": (marker_saying(dict(valid, format_version="1")),
                                  "format_version"),
            "files as text": (marker_saying(dict(valid, files="G.npy")), '"files"'),
            "files not names": (marker_saying(dict(valid, files=["G.npy", 1])), '"files"'),
            "a name leaving": (marker_saying(dict(valid, files=valid["files"] + ["../x"])),
                               "'../x'"),
            "not JSON": (lambda: mark.write_text("{"), "not JSON"),
            "a list": (lambda: mark.write_text("[]"), "format"),
            "too large": (lambda: mark.write_text(json.dumps(valid) + " " * (1 << 20)),
                          "more than a marker can"),
            "a linked marker": (lambda: (mark.rename(self.root / "m.json"),
                                         os.symlink(self.root / "m.json", mark)),
                                "cannot be read"),
        }
        for what, (spoil, why) in cases.items():
            with self.subTest(what):
                self.fetched(out, good)
                spoil()
                before = tree(self.root)
                calls = len(self.servicer.rpcs)
                with self.assertRaises(FileExistsError) as cm:
                    self.client.fetch("c1", out)
                self.assertIn(f"'{out}' ", str(cm.exception))
                self.assertIn(why, str(cm.exception))
                self.assertEqual(tree(self.root), before)
                self.assertEqual(len(self.servicer.rpcs), calls)  # refused before the call
                shutil.rmtree(out)  # the case's own files (rmtree follows no link)
                with contextlib.suppress(FileNotFoundError):
                    (self.root / "m.json").unlink()
                self.assertEqual(sorted(os.listdir(self.root)), ["elsewhere"])

    def test_a_failed_fetch_keeps_the_previous_result(self):
        out = self.root / "out"
        self.fetched(out, {"G.npy": b"g1", "report.json": b"{}"})
        before = tree(self.root)
        for what, chunks in (
                ("checksum", chunks_of("G.npy", b"0123456789", sha="0" * 64)),
                ("after a good file", chunks_of("report.json", b"{}") +
                 chunks_of("G.npy", b"0123456789", size=11)),
                ("the marker's name", chunks_of("G.npy", b"g") +
                 chunks_of(".dcalign-fetch.json", b"{}"))):
            with self.subTest(what):
                self.servicer.chunks = chunks
                with self.assertRaises(ServiceError) as cm:
                    self.client.fetch("c1", out)
                self.assertEqual(cm.exception.code, "DATA_LOSS")
                self.assertEqual(tree(self.root), before)  # no temporary, the result kept
                self.assertEqual(hidden(self.root), [])

    def test_a_file_added_during_the_fetch_keeps_the_previous_result(self):
        out = self.root / "out"
        self.fetched(out, {"G.npy": b"g1"})
        self.servicer.after_first_chunk = lambda: (out / "notes.txt").write_text("mine")
        self.servicer.chunks = chunks_of("G.npy", b"g2")
        with self.assertRaisesRegex(FileExistsError, "holds 'notes.txt'"):
            self.client.fetch("c1", out)
        self.assertEqual((out / "notes.txt").read_text(), "mine")
        self.assertEqual((out / "G.npy").read_bytes(), b"g1")
        self.assertEqual(sorted(os.listdir(self.root)), ["out"])

    def test_fetch_refuses_bad_names_and_corrupt_files(self):
        good = chunks_of("G.npy", b"0123456789")
        cases = {
            "../evil": good + chunks_of("../evil", b"x"),
            "/tmp/evil": good + chunks_of("/tmp/evil", b"x"),
            "a/../../evil": chunks_of("a/../../evil", b"x") + good,
            "empty component": chunks_of("a//b", b"x") + good,
            "the marker": good + chunks_of(".dcalign-fetch.json", b"{}"),
            "a marker below": good + chunks_of("model/.dcalign-fetch.json", b"{}"),
            "below a file": good + chunks_of("G.npy/x", b"x"),
            "checksum": chunks_of("G.npy", b"0123456789", sha="0" * 64),
            "short": chunks_of("G.npy", b"0123456789", size=11),
            "long": chunks_of("G.npy", b"0123456789", size=9),
            "order": list(reversed(good)),
            "twice": good + chunks_of("r.json", b"{}") + good,
            "no G.npy": chunks_of("report.json", b"{}"),
        }
        out = self.root / "sub" / "out"
        out.parent.mkdir()
        for what, chunks in cases.items():
            with self.subTest(what):
                self.servicer.chunks = chunks
                with self.assertRaises(ServiceError) as cm:
                    self.client.fetch("c1", out)
                self.assertEqual(cm.exception.code, "DATA_LOSS")
                self.assertEqual(os.listdir(out.parent), [])  # hidden temporaries included
                self.assertEqual(sorted(os.listdir(self.root)), ["sub"])

    def test_sigterm_handler_only_while_fetching_on_the_main_thread(self):
        if signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
            self.skipTest("SIGTERM has a handler in this test process already")
        self.servicer.chunks = chunks_of("G.npy", b"g")
        self.client.fetch("c1", self.root / "a")
        during = self.servicer.sigterm_handlers[-1]
        self.assertTrue(callable(during), during)  # cleans up, then dies of SIGTERM
        self.assertEqual(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)
        # On another thread, signal handlers are not touched.
        errors = []
        worker = threading.Thread(target=lambda: errors.append(
            self.client.fetch("c1", self.root / "b")))
        worker.start()
        worker.join(30)
        self.assertEqual(errors, [["G.npy"]])
        self.assertEqual(self.servicer.sigterm_handlers[-1], signal.SIG_DFL)
        # Nor is a handler of the program's own.
        def mine(signum, frame):
            pass
        previous = signal.signal(signal.SIGTERM, mine)
        try:
            self.client.fetch("c1", self.root / "c")
            self.assertIs(self.servicer.sigterm_handlers[-1], mine)
            self.assertIs(signal.getsignal(signal.SIGTERM), mine)
        finally:
            signal.signal(signal.SIGTERM, previous)

    def test_sigterm_during_a_fetch_leaves_no_temporary(self):
        out = self.root / "out"
        self.fetched(out, {"G.npy": b"g1", "model/m.bin": b"m"})
        before = tree(self.root)
        self.servicer.chunks = chunks_of("G.npy", b"x" * 64, step=8)
        self.servicer.after_first_chunk = lambda: self.release.wait(60)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        child = subprocess.Popen([sys.executable, "-c", FETCH_CHILD, f"127.0.0.1:{self.port}",
                                  str(out)], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        try:
            # Wait until the child has begun writing the first file into its temporary.
            deadline = time.monotonic() + 60
            while not any((self.root / n / "G.npy").exists() for n in hidden(self.root)):
                if child.poll() is not None or time.monotonic() > deadline:
                    self.fail(f"the child did not begin its fetch: {child.communicate()}")
                time.sleep(0.01)
            child.send_signal(signal.SIGTERM)
            stdout, stderr = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        self.assertEqual(child.returncode, -signal.SIGTERM, (stdout, stderr))
        self.assertEqual(stdout, b"")
        self.assertEqual(hidden(self.root), [])
        self.assertEqual(tree(self.root), before)  # the earlier result as it was


class ClientOptionsTest(unittest.TestCase):
    def test_rejects_bad_options(self):
        with self.assertRaises(ValueError):
            Client("127.0.0.1:1", "t", insecure=True, deadline=0)
        with self.assertRaises(ValueError):
            Client("127.0.0.1:1", "t", insecure=True, chunk_bytes=0)
        with self.assertRaises(ValueError):
            Client("127.0.0.1:1", "t\n", insecure=True)
        c = Client("127.0.0.1:1", "t", insecure=True)
        with self.assertRaisesRegex(ValueError, "part"):
            c.upload_offset("c1", "weights")
        with self.assertRaisesRegex(ValueError, "CollaborationSpec"):
            c.create({"no_such_field": 1})
        c.close()

    def test_unreachable_server(self):
        with Client("127.0.0.1:1", "t", insecure=True, deadline=2) as c:
            self.assertFalse(c.healthy())
            with self.assertRaises(ServiceError) as cm:
                c.status("c1")
            self.assertIn(cm.exception.code, ("UNAVAILABLE", "DEADLINE_EXCEEDED"))


if __name__ == "__main__":
    unittest.main()
