"""The client of dcalign-server (proto/dcalign/service/v1/analyst.proto).

Every call carries a deadline and, when a token is given, the metadata
``authorization: Bearer <token>``. A call the server refuses raises ServiceError with the gRPC
status code's name ("PERMISSION_DENIED"); input that cannot be sent (a NaN, a 3-D array, a spec
with an unknown field, a malformed request id) raises ValueError before anything reaches the
server.
"""
from __future__ import annotations

import hashlib
import os
import queue
import re
import secrets
import shutil
import stat
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple, Union

import grpc
import numpy as np
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor

try:
    from ._proto import analyst_pb2 as pb
    from ._proto import analyst_pb2_grpc as pb_grpc
    from ._proto import health_pb2, health_pb2_grpc
except ImportError as e:  # pragma: no cover - a source checkout before generate_stubs.py
    raise ImportError(
        "dcalign_client: the gRPC stubs are missing: run python/dcalign_client/generate_stubs.py "
        "or install the package (see python/dcalign_client/README.md)") from e

from ._outputs import (_MARKER, _SigtermCleanup, _check_replaceable, _fsync, _mark_written,
                       _read_at_most, _relative_parts, _remove_written, _swap_into_place)

__all__ = ["Client", "ServiceError", "UploadResult", "matrix_bytes", "read_token_file"]

PathLike = Union[str, "os.PathLike[str]"]

_PARTS = {"anchor": pb.PART_ANCHOR, "data": pb.PART_DATA, "labels": pb.PART_LABELS}

# A token file is small (as `dcalign client` and the server read one).
_MAX_TOKEN_FILE_BYTES = 4096

# Request ids of CreateCollaboration and ReissueToken (analyst.proto, request_id): the server
# answers a repeated id with the first answer for this long.
_REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
_RETRY_WINDOW_MINUTES = 10
_TRIES = 3  # of a call with a request id, while the network fails (as the C++ client)
_TRANSIENT = ("UNAVAILABLE", "DEADLINE_EXCEEDED")

class ServiceError(Exception):
    """A call that failed: `code` is the gRPC status code's name ("UNAUTHENTICATED"),
    `message` the server's (or this client's) explanation, `rpc` the call's name.
    `request_id` is the request id that create() and reissue() sent (None for other calls): a
    call that failed with UNAVAILABLE or DEADLINE_EXCEEDED may have been carried out, and
    calling again with that id within 10 minutes returns its answer."""

    def __init__(self, code: str, message: str, rpc: str = "",
                 request_id: Optional[str] = None):
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.rpc = rpc
        self.request_id = request_id

    def __str__(self) -> str:
        return f"{self.rpc + ': ' if self.rpc else ''}{self.code}: {self.message}"


class UploadResult(NamedTuple):
    """What an upload achieved: the offset the server had acknowledged before this call
    (`resumed_from`; equal to `total` when the part was already stored), the bytes
    acknowledged now, the part's size, and whether the part is verified and stored."""

    resumed_from: int
    committed: int
    total: int
    complete: bool


def _rpc_error(rpc: str, e: grpc.RpcError) -> ServiceError:
    code = e.code() if hasattr(e, "code") else None
    name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
    details = e.details() if hasattr(e, "details") else str(e)
    return ServiceError(name, details or "", rpc)


def _part(part: Union[str, int]) -> int:
    """'anchor' / 'PART_ANCHOR' / pb.PART_ANCHOR -> pb.PART_ANCHOR."""
    if isinstance(part, str):
        key = part.lower()
        key = key[len("part_"):] if key.startswith("part_") else key
        if key in _PARTS:
            return _PARTS[key]
    elif isinstance(part, int) and not isinstance(part, bool) and part in _PARTS.values():
        return part
    raise ValueError(f"part {part!r}: expected 'anchor', 'data' or 'labels'")


def matrix_bytes(matrix: Any) -> Tuple[int, int, bytes]:
    """(rows, cols, data): the wire format of an upload, the values in column-major order as
    little-endian IEEE 754 float64. Raises ValueError for anything but a finite, non-empty,
    real 2-D array (the first NaN or Inf is named by row and column)."""
    a = np.asarray(matrix)
    if a.ndim != 2:
        raise ValueError(f"a release must be a 2-D matrix: got an array of shape {a.shape}")
    if a.dtype.kind not in "biuf":
        raise ValueError(f"a release must hold real numbers: got dtype {a.dtype}")
    if a.size == 0:
        raise ValueError(f"a release must not be empty: got shape {a.shape}")
    a = a.astype("<f8", copy=False)
    bad = ~np.isfinite(a)
    if bad.any():
        # Column-major order, as the server scans a part.
        col, row = np.argwhere(bad.T)[0]
        raise ValueError(f"the matrix has a NaN or Inf at row {row}, column {col}: "
                         "nothing was sent")
    return a.shape[0], a.shape[1], a.tobytes(order="F")


def read_token_file(path: PathLike) -> str:
    """A token file's contents without trailing line breaks (as `dcalign client` reads it).

    Raises ValueError, naming the path, for a file that cannot be a token file: not a regular
    file (a directory, a FIFO, a device), larger than 4096 bytes, not UTF-8, holding no token,
    or a token with whitespace or control characters in it (a space, a tab, a line break before
    the end). The message never quotes the token. A missing file raises FileNotFoundError."""
    where = f"the token file '{os.fspath(path)}'"
    expected = f"expected a regular file of at most {_MAX_TOKEN_FILE_BYTES} bytes"
    # stat first: opening a FIFO or a device could block or act; fstat again once open.
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError(f"{where} is not a regular file: {expected}")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{where} is not a regular file: {expected}")
        if st.st_size > _MAX_TOKEN_FILE_BYTES:
            raise ValueError(f"{where} holds {st.st_size} bytes: {expected}")
        data = _read_at_most(fd, _MAX_TOKEN_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _MAX_TOKEN_FILE_BYTES:  # it grew since fstat
        raise ValueError(f"{where} holds more than {_MAX_TOKEN_FILE_BYTES} bytes: {expected}")
    try:
        token = data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ValueError(f"{where} is not UTF-8 text: expected one line holding a token") \
            from None
    if not token:
        raise ValueError(f"{where} holds no token: expected one line holding a token")
    for i, ch in enumerate(token):
        if ch.isspace() or not ch.isprintable():
            raise ValueError(f"{where}: its token holds the character U+{ord(ch):04X} at "
                             f"position {i}: expected one line of printable characters without "
                             "spaces (a token is never split across lines)")
    return token


def _message_to_dict(msg) -> Dict[str, Any]:
    """Every field of `msg` (defaults included) as plain Python values: integers stay
    integers (json_format would write uint64 as strings), enums become their names."""
    out: Dict[str, Any] = {}
    for f in msg.DESCRIPTOR.fields:
        value = getattr(msg, f.name)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            out[f.name] = dict(value)
        elif f.label == FieldDescriptor.LABEL_REPEATED:
            out[f.name] = [_field_value(f, v) for v in value]
        else:
            out[f.name] = _field_value(f, value)
    return out


def _field_value(f, value):
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        return _message_to_dict(value)
    if f.type == FieldDescriptor.TYPE_ENUM:
        return f.enum_type.values_by_number[value].name if value in f.enum_type.values_by_number \
            else value
    return value


def _safe_parts(name: str) -> List[str]:
    """The components of a file name sent by Fetch, or DATA_LOSS for one that could leave the
    output directory (absolute, '..', backslashes, empty components) or is the marker's."""
    parts = _relative_parts(name)
    if parts is None or _MARKER in parts:
        raise ServiceError("DATA_LOSS", f"the server sent the file name {name!r}: refused",
                           "Fetch")
    return parts


# ---- Directories that fetch writes whole (the format of the C++ client's io::StagedOutputs).



class Client:
    """A connection to dcalign-server as the analyst or as one participant (the token decides).

    target:      host:port
    token:       the analyst's or a participant's token; None or "" sends no authorization
    ca_cert:     PEM roots that signed the server's certificate: a file path, or the PEM bytes
                 (default: the system's roots)
    server_name: the name to check the server's certificate against, if not the target's host
    insecure:    plaintext, for a server started with --insecure-localhost
    deadline:    seconds each call (a whole upload or fetch stream included) may take
    chunk_bytes: the size of upload chunks (at most the server's --max-chunk-bytes)
    """

    def __init__(self, target: str, token: Optional[str], *, ca_cert: Union[PathLike, bytes,
                 None] = None, server_name: Optional[str] = None, insecure: bool = False,
                 deadline: float = 60.0, chunk_bytes: int = 1 << 20):
        if not (0 < deadline <= 86400):
            raise ValueError(f"deadline {deadline}: expected more than 0 and at most 86400 s")
        if not (isinstance(chunk_bytes, int) and 1 <= chunk_bytes <= 64 << 20):
            raise ValueError(f"chunk_bytes {chunk_bytes}: expected 1 to {64 << 20}")
        if token and any(ch in token for ch in "\r\n\0"):
            raise ValueError("the token holds a line break or NUL: read it with read_token_file")
        if insecure and (ca_cert is not None or server_name):
            raise ValueError("ca_cert and server_name apply to TLS: not with insecure=True")
        self.target = target
        self.deadline = float(deadline)
        self.chunk_bytes = chunk_bytes
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        # Fetch chunks are up to the server's chunk limit (1 MiB by default).
        options = [("grpc.max_receive_message_length", max(4 << 20, 2 * chunk_bytes + 4096))]
        if insecure:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            roots = None
            if isinstance(ca_cert, bytes):
                roots = ca_cert
            elif ca_cert is not None:
                roots = Path(ca_cert).read_bytes()
            if server_name:
                options.append(("grpc.ssl_target_name_override", server_name))
            self._channel = grpc.secure_channel(
                target, grpc.ssl_channel_credentials(root_certificates=roots), options=options)
        self._stub = pb_grpc.AnalystStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    # -- plumbing ------------------------------------------------------------------------------
    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _unary(self, rpc: str, request):
        try:
            return getattr(self._stub, rpc)(request, timeout=self.deadline,
                                            metadata=self._metadata)
        except grpc.RpcError as e:
            raise _rpc_error(rpc, e) from None

    def _retried(self, rpc: str, request, request_id: str):
        """A call that the server carries out once per request id: tried up to _TRIES times,
        with the same request (and id), while it fails with UNAVAILABLE or DEADLINE_EXCEEDED.
        A ServiceError carries the id; a transient one says how to recover the answer."""
        for attempt in range(1, _TRIES + 1):
            try:
                return self._unary(rpc, request)
            except ServiceError as e:
                e.request_id = request_id
                if e.code not in _TRANSIENT:
                    raise
                if attempt == _TRIES:
                    e.message = (f"{e.message} (tried {_TRIES} times; the server may have "
                                 f"carried it out: call again with request_id={request_id!r} "
                                 f"within {_RETRY_WINDOW_MINUTES} minutes to get its answer)")
                    raise
            time.sleep(0.2 * attempt)
        raise AssertionError("unreachable")

    @staticmethod
    def new_request_id() -> str:
        """A new request id for create() or reissue(): 24 random characters of [A-Za-z0-9_-].
        Record it before the call to be able to recover the call's answer (the tokens) after a
        crash or a lost connection: see create()."""
        return secrets.token_urlsafe(18)

    @staticmethod
    def _request_id(request_id: Optional[str]) -> str:
        """`request_id` checked (ValueError), or a new one for None."""
        if request_id is None:
            return Client.new_request_id()
        if not isinstance(request_id, str) or not _REQUEST_ID.fullmatch(request_id):
            raise ValueError(f"request_id {request_id!r}: expected 16 to 64 characters of "
                             "A-Z a-z 0-9 _ - (see Client.new_request_id())")
        return request_id

    # -- the analyst ---------------------------------------------------------------------------
    def create(self, spec: Union[Dict[str, Any], "pb.CollaborationSpec"],
               request_id: Optional[str] = None) -> Tuple[str, Dict[str, str]]:
        """Creates a collaboration from a CollaborationSpec given as a dict (the proto's field
        names, e.g. {"name": .., "method": "odc", "dim": 4, "anchor": {"kind": "uniform", ...},
        "participants": [...], "model": "none", "max_rows": 100, "seed": 5}).
        Returns (collaboration_id, {participant: token}); the tokens are shown only once.

        `request_id` (16 to 64 characters of A-Z a-z 0-9 _ -; None: Client.new_request_id())
        makes the call safe to repeat: the server answers the same request_id with the same
        spec, within 10 minutes, with the first call's answer (the same collaboration and
        tokens) instead of creating another. The call is tried up to 3 times with the same id
        while it fails with UNAVAILABLE or DEADLINE_EXCEEDED. A caller who lost the answer (a
        crash, a lost connection, a failed write of the tokens) may call again with the same
        request_id within 10 minutes: choose one with Client.new_request_id() and record it
        before the call, or take it from the raised ServiceError's `request_id`. The same id
        with another spec is refused (INVALID_ARGUMENT). A malformed id raises ValueError
        before anything is sent."""
        rid = self._request_id(request_id)
        if isinstance(spec, pb.CollaborationSpec):
            message = spec
        else:
            try:
                message = json_format.ParseDict(spec, pb.CollaborationSpec())
            except (json_format.ParseError, TypeError, AttributeError) as e:
                raise ValueError(f"not a CollaborationSpec: {e}") from None
        resp = self._retried("CreateCollaboration",
                             pb.CreateCollaborationRequest(spec=message, request_id=rid), rid)
        return resp.collaboration_id, {t.participant: t.token for t in resp.tokens}

    def reissue(self, collaboration_id: str, participant: str,
                request_id: Optional[str] = None) -> str:
        """Revokes the participant's token and returns its new one.

        `request_id` works as in create(): the server answers the same request_id for the same
        collaboration and participant, within 10 minutes, with the first call's token instead of
        revoking that one too; the call is tried up to 3 times with the same id while it fails
        with UNAVAILABLE or DEADLINE_EXCEEDED. A caller who lost the answer may call again with
        the same request_id within 10 minutes (Client.new_request_id() chooses one to record
        before the call; a raised ServiceError carries it as `request_id`)."""
        rid = self._request_id(request_id)
        resp = self._retried("ReissueToken", pb.ReissueTokenRequest(
            collaboration_id=collaboration_id, participant=participant, request_id=rid), rid)
        return resp.token.token

    def add_participant(self, collaboration_id: str, participant: str,
                        request_id: Optional[str] = None) -> str:
        """Adds a participant who joins after the collaboration's job is done and returns its
        token. It uploads its anchor only; an enrolment job computes its G_i against the fitted
        alignment without changing anyone else's (status() shows its enrolment_state).
        `request_id` works as in create()."""
        rid = self._request_id(request_id)
        resp = self._retried("AddParticipant", pb.AddParticipantRequest(
            collaboration_id=collaboration_id, participant=participant, request_id=rid), rid)
        return resp.token.token

    def run(self, collaboration_id: str) -> str:
        """Queues the alignment (once every release is in); returns the job's state."""
        return self._unary("Run", pb.RunRequest(collaboration_id=collaboration_id)).state

    def delete_collaboration(self, collaboration_id: str) -> None:
        self._unary("DeleteCollaboration",
                    pb.DeleteCollaborationRequest(collaboration_id=collaboration_id))

    # -- the analyst or a participant ----------------------------------------------------------
    def status(self, collaboration_id: str) -> Dict[str, Any]:
        """GetStatus as a dict: spec, participants (with their parts), job_state (none, queued,
        running, done, failed), job_attempts, job_error, job_report (JSON text once done)."""
        return _message_to_dict(self._unary(
            "GetStatus", pb.GetStatusRequest(collaboration_id=collaboration_id)))

    def healthy(self) -> bool:
        """The gRPC health protocol's answer for the whole server: SERVING is True; an
        unreachable server is False."""
        try:
            resp = self._health.Check(health_pb2.HealthCheckRequest(service=""),
                                      timeout=self.deadline, metadata=self._metadata)
        except grpc.RpcError:
            return False
        return resp.status == health_pb2.HealthCheckResponse.SERVING

    # -- a participant -------------------------------------------------------------------------
    def upload_offset(self, collaboration_id: str, part: Union[str, int]) -> Dict[str, Any]:
        """{"committed": acknowledged bytes, "complete": bool, "total": 0 if never started}."""
        resp = self._unary("GetUploadOffset", pb.GetUploadOffsetRequest(
            collaboration_id=collaboration_id, part=_part(part)))
        return {"committed": resp.committed, "complete": resp.complete, "total": resp.total}

    def upload(self, collaboration_id: str, part: Union[str, int], matrix: Any, *,
               stop_after_chunks: int = 0) -> UploadResult:
        """Uploads `matrix` (any real 2-D array; sent column-major float64) as `part` ("anchor",
        "data" or "labels"), resuming from the offset the server acknowledged earlier for the
        same content. `stop_after_chunks` > 0 ends the stream after that many chunks (a
        deliberate interruption, for tests): the result then says complete=False.

        A part whose previous stream the server still holds (a client that reconnects at once
        after a disconnect) is refused with ABORTED "... in progress": tried again every 0.1 s
        for up to 5 s, as the C++ client does."""
        for attempt in range(51):
            try:
                return self._upload_once(collaboration_id, part, matrix, stop_after_chunks)
            except ServiceError as e:
                if e.code != "ABORTED" or "in progress" not in e.message or attempt == 50:
                    raise
                time.sleep(0.1)
        raise AssertionError("unreachable")

    def _upload_once(self, collaboration_id: str, part: Union[str, int], matrix: Any,
                     stop_after_chunks: int) -> UploadResult:
        part = _part(part)
        rows, cols, data = matrix_bytes(matrix)
        total = len(data)
        header = pb.UploadHeader(collaboration_id=collaboration_id, part=part, rows=rows,
                                 cols=cols, total_bytes=total,
                                 sha256=hashlib.sha256(data).hexdigest())
        # The request stream is fed one message at a time: each chunk starts at the offset the
        # previous ack acknowledged. None ends the stream (the client's half-close).
        outbox: "queue.Queue[Optional[pb.UploadRequest]]" = queue.Queue()
        outbox.put(pb.UploadRequest(header=header))

        def requests():
            while True:
                item = outbox.get()
                if item is None:
                    return
                yield item

        call = self._stub.Upload(requests(), timeout=self.deadline, metadata=self._metadata)
        chunks = 0
        offset = resumed_from = 0
        complete = False
        try:
            ack = next(call, None)  # where the server stands: resume from there
            if ack is None:
                raise ServiceError("UNKNOWN", "the server closed the stream without an ack",
                                   "Upload")
            offset = resumed_from = ack.committed
            complete = ack.complete
            if offset > total:
                raise ServiceError("DATA_LOSS", f"the server acknowledged {offset} of {total} "
                                   "bytes", "Upload")
            while not complete and offset < total:
                if stop_after_chunks > 0 and chunks == stop_after_chunks:
                    break
                n = min(self.chunk_bytes, total - offset)
                outbox.put(pb.UploadRequest(chunk=pb.UploadChunk(
                    offset=offset, data=data[offset:offset + n])))
                ack = next(call, None)
                if ack is None:
                    break  # the server ended the stream: its status says why
                if ack.committed != offset + n:
                    raise ServiceError("DATA_LOSS", f"a chunk ending at {offset + n} was "
                                       f"acknowledged as {ack.committed}", "Upload")
                offset = ack.committed
                chunks += 1
            outbox.put(None)
            for _ in call:  # the server sends nothing more; this waits for its status
                pass
            # OK after the last byte: the server verified the checksum and values and stored it.
            complete = complete or offset == total
        except grpc.RpcError as e:
            if stop_after_chunks > 0 and chunks == stop_after_chunks and \
                    e.code() == grpc.StatusCode.ABORTED:
                return UploadResult(resumed_from, offset, total, False)  # the deliberate stop
            raise _rpc_error("Upload", e) from None
        finally:
            outbox.put(None)
            if not call.done():
                call.cancel()
        return UploadResult(resumed_from, offset, total, complete)

    def delete_release(self, collaboration_id: str) -> None:
        """Removes the caller's own release (before the job runs)."""
        self._unary("DeleteRelease", pb.DeleteReleaseRequest(collaboration_id=collaboration_id))

    def fetch(self, collaboration_id: str, out_dir: PathLike) -> List[str]:
        """Writes the caller's results (G.npy, report.json, ...) into the directory `out_dir`
        and returns their relative names.

        Before the call, `out_dir` is checked: its parent must be a directory, and `out_dir`
        must not exist, or be an empty directory, or a directory that an earlier fetch wrote
        (it holds the marker .dcalign-fetch.json and nothing but the files that the marker
        lists). Anything else, a symbolic link included (never followed), raises
        FileExistsError naming the first entry in the way: a fetch never deletes a file it did
        not write. A directory of an older client, without the marker, is not replaced either.

        The files are written into a new hidden temporary directory beside `out_dir`, each
        checked against the size and SHA-256 the server declared; then the marker is written,
        everything is flushed to disk, and the directory is put in place in one step (an
        existing `out_dir` is swapped with it, checked again first, and the old one is removed
        through its marker). On any failure, an exception, KeyboardInterrupt or (on the main
        thread, with SIGTERM's default action) SIGTERM, the temporary directory is removed and
        an earlier result stays as it was; after SIGTERM the process then dies of it. File names
        that could leave `out_dir` (absolute, '..') are refused (DATA_LOSS)."""
        dest = Path(os.path.abspath(out_dir))
        parent = dest.parent
        if dest == parent:
            raise ValueError(f"the output '{dest}' has no parent directory: expected a "
                             "directory to create or replace")
        if not parent.is_dir():
            if parent.exists():
                raise NotADirectoryError(f"the output's parent {parent} is not a directory")
            raise FileNotFoundError(f"the output's parent directory {parent} does not exist")
        _check_replaceable(dest)  # before the call
        with _SigtermCleanup() as guard:
            tmp: Optional[Path] = None
            try:
                with guard.deferred(then_raise=True):
                    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.fetch-", dir=parent))
                names = self._receive(collaboration_id, tmp)
                _mark_written(tmp, collaboration_id, names)
            except BaseException:
                with guard.deferred():
                    if tmp is not None:
                        shutil.rmtree(tmp, ignore_errors=True)
                raise
            # From here on a SIGTERM waits until the result is in place and the old one gone.
            with guard.deferred():
                try:
                    # Checked again: a file put into the old result meanwhile keeps it.
                    _check_replaceable(dest)
                    old = _swap_into_place(tmp, dest)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
                if old is not None and not _remove_written(old):
                    warnings.warn(f"the previous result in '{dest}' was replaced; what was added "
                                  f"to it meanwhile is kept in '{old}'", RuntimeWarning,
                                  stacklevel=2)
                _fsync(parent, directory=True)
        return names

    def _receive(self, collaboration_id: str, tmp: Path) -> List[str]:
        """The Fetch stream into the fresh directory `tmp`; every file verified."""
        root = os.path.realpath(tmp)
        names: List[str] = []
        seen: Set[str] = set()
        current = None  # [name, file object, sha256, bytes so far, declared size, declared sum]

        def close_current():
            name, f, digest, have, size, want = current
            f.flush()
            os.fsync(f.fileno())
            f.close()
            if have != size or digest.hexdigest() != want:
                raise ServiceError("DATA_LOSS", f"{name} arrived corrupt ({have} of {size} "
                                   "bytes, or its SHA-256 differs)", "Fetch")

        call = self._stub.Fetch(pb.FetchRequest(collaboration_id=collaboration_id),
                                timeout=self.deadline, metadata=self._metadata)
        try:
            for chunk in call:
                if current is None or chunk.file != current[0]:
                    if current is not None:
                        close_current()
                        current = None
                    parts = _safe_parts(chunk.file)
                    if chunk.file in seen:
                        raise ServiceError("DATA_LOSS", f"{chunk.file} was sent twice", "Fetch")
                    path = Path(root, *parts)
                    if not os.path.realpath(path).startswith(root + os.sep):
                        raise ServiceError("DATA_LOSS", f"{chunk.file} leaves the output",
                                           "Fetch")
                    try:
                        path.parent.mkdir(parents=True, exist_ok=True)
                        f = open(path, "xb")
                    except (FileExistsError, NotADirectoryError, IsADirectoryError):
                        raise ServiceError("DATA_LOSS", f"{chunk.file} clashes with another "
                                           "file of the result", "Fetch") from None
                    current = [chunk.file, f, hashlib.sha256(), 0, chunk.file_size,
                               chunk.sha256]
                    names.append(chunk.file)
                    seen.add(chunk.file)
                if chunk.offset != current[3]:
                    raise ServiceError("DATA_LOSS", f"a chunk of {chunk.file} out of order",
                                       "Fetch")
                if current[3] + len(chunk.data) > current[4]:
                    raise ServiceError("DATA_LOSS", f"{chunk.file} is longer than declared",
                                       "Fetch")
                current[1].write(chunk.data)
                current[2].update(chunk.data)
                current[3] += len(chunk.data)
            if current is not None:
                close_current()
                current = None
        except grpc.RpcError as e:
            raise _rpc_error("Fetch", e) from None
        finally:
            if current is not None:
                current[1].close()
            call.cancel()  # ends a stream left early (no-op after its end)
        if "G.npy" not in names:
            raise ServiceError("DATA_LOSS", "the result has no G.npy", "Fetch")
        return names
