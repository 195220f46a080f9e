"""dcalign_client without dcalign-server: the wire format of matrices, and the client's side of
the protocol against an in-process fake server (metadata, deadlines, Fetch's checks)."""
import hashlib
import os
import struct
import tempfile
import unittest
from concurrent import futures
from pathlib import Path

import grpc
import numpy as np

from dcalign_client import Client, ServiceError, matrix_bytes
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


class FakeAnalyst(pb_grpc.AnalystServicer):
    """Records the metadata and deadline of each call; Fetch sends `self.chunks`."""

    def __init__(self):
        self.calls = []
        self.chunks = []

    def _record(self, context):
        self.calls.append((dict(context.invocation_metadata()), context.time_remaining()))

    def GetStatus(self, request, context):
        self._record(context)
        return pb.GetStatusResponse(job_state="none", spec=pb.CollaborationSpec(max_rows=7))

    def Fetch(self, request, context):
        self._record(context)
        yield from self.chunks


def chunks_of(name, data, step=4, size=None, sha=None):
    """The FetchChunk messages of one file, as the server sends them."""
    out = []
    for off in range(0, max(len(data), 1), step):
        out.append(pb.FetchChunk(file=name, offset=off, data=data[off:off + step],
                                 file_size=len(data) if size is None else size,
                                 sha256=(sha or hashlib.sha256(data).hexdigest())
                                 if off == 0 else ""))
    return out


class FakeServerTest(unittest.TestCase):
    def setUp(self):
        self.servicer = FakeAnalyst()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_AnalystServicer_to_server(self.servicer, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.client = Client(f"127.0.0.1:{port}", "tok-123", insecure=True, deadline=7.5)
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)

    def tearDown(self):
        self.client.close()
        self.server.stop(None)
        self.tmp.cleanup()

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

    def test_fetch_writes_checked_files_into_place(self):
        g = b"\x93NUMPY fake G" * 3
        self.servicer.chunks = chunks_of("G.npy", g) + chunks_of("model/m.bin", b"") + \
            chunks_of("report.json", b"{}")
        out = self.root / "out"
        self.assertEqual(self.client.fetch("c1", out), ["G.npy", "model/m.bin", "report.json"])
        self.assertEqual((out / "G.npy").read_bytes(), g)
        self.assertEqual((out / "model" / "m.bin").read_bytes(), b"")
        self.assertEqual(sorted(os.listdir(self.root)), ["out"])  # no temporary left
        # A second fetch replaces the first.
        self.servicer.chunks = chunks_of("G.npy", b"new")
        self.client.fetch("c1", out)
        self.assertEqual(sorted(os.listdir(out)), ["G.npy"])
        self.assertEqual(sorted(os.listdir(self.root)), ["out"])

    def test_fetch_refuses_bad_names_and_corrupt_files(self):
        good = chunks_of("G.npy", b"0123456789")
        cases = {
            "../evil": good + chunks_of("../evil", b"x"),
            "/tmp/evil": good + chunks_of("/tmp/evil", b"x"),
            "a/../../evil": chunks_of("a/../../evil", b"x") + good,
            "empty component": chunks_of("a//b", b"x") + good,
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
                self.assertEqual(os.listdir(out.parent), [])
                self.assertEqual(sorted(os.listdir(self.root)), ["sub"])

    def test_fetch_keeps_a_directory_it_did_not_write(self):
        out = self.root / "mine"
        out.mkdir()
        (out / "notes.txt").write_text("keep")
        self.servicer.chunks = chunks_of("G.npy", b"g")
        with self.assertRaises(FileExistsError):
            self.client.fetch("c1", out)
        self.assertEqual(os.listdir(out), ["notes.txt"])
        with self.assertRaises(FileNotFoundError):
            self.client.fetch("c1", self.root / "missing" / "out")


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
