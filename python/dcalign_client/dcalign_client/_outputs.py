"""The local outputs of dcalign_client: a fetched directory is written under a temporary name,
marked, flushed and swapped into place, and replaces only a directory that a fetch wrote itself
(its marker lists every file); a SIGTERM during the work removes the temporaries first. The same
rules as the C++ client's (src/io/staged_outputs.hpp)."""
from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import os
import signal
import stat
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional, Set, Tuple

# The marker of a directory that fetch wrote (the C++ client's io::kWrittenMarker): a directory
# is replaced only when it holds a valid marker and nothing but the files the marker lists.
_MARKER = ".dcalign-fetch.json"
_MARKER_FORMAT = "dcalign-fetch"
_MARKER_VERSION = 1
_MAX_MARKER_BYTES = 1 << 20
_MAX_TREE_ENTRIES = 100000
_NOT_REPLACED = (f"not replaced (a fetch replaces only a directory that it wrote itself, marked "
                 f"by {_MARKER}; choose a new directory or remove it yourself)")



def _read_at_most(fd: int, limit: int) -> bytes:
    """Up to `limit` bytes from `fd` (fewer only at the end of the file)."""
    parts: List[bytes] = []
    have = 0
    while have < limit:
        block = os.read(fd, limit - have)
        if not block:
            break
        parts.append(block)
        have += len(block)
    return b"".join(parts)


def _fsync(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _relative_parts(name: str) -> Optional[List[str]]:
    """The components of a relative file name with '/' separators, or None for one that could
    leave its directory or is not plain (absolute, '..', backslashes, NUL, empty components)."""
    parts = name.split("/")
    if (not name or name.startswith("/") or ".." in name or "\\" in name or "\0" in name
            or any(p in ("", ".") for p in parts)):
        return None
    return parts


def _read_marker(dir_fd: int) -> Tuple[Optional[List[str]], str]:
    """The names that the marker of the directory open as `dir_fd` lists, or (None, why it is
    not a fetch's marker). The marker is never followed through a symbolic link, and read only
    up to _MAX_MARKER_BYTES."""
    try:
        fd = os.open(_MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except FileNotFoundError:
        return None, f"there is no {_MARKER}"
    except OSError as e:
        return None, f"its {_MARKER} cannot be read ({e.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, f"its {_MARKER} is not a regular file"
        if st.st_size > _MAX_MARKER_BYTES:
            return None, (f"its {_MARKER} holds {st.st_size} bytes, more than a marker can "
                          f"({_MAX_MARKER_BYTES})")
        data = _read_at_most(fd, _MAX_MARKER_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _MAX_MARKER_BYTES:
        return None, f"its {_MARKER} holds more bytes than a marker can ({_MAX_MARKER_BYTES})"
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, f"its {_MARKER} is not JSON"
    if not isinstance(doc, dict) or doc.get("format") != _MARKER_FORMAT:
        return None, f'its {_MARKER} is not a fetch\'s marker (no "format": "{_MARKER_FORMAT}")'
    version = doc.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        return None, f'its {_MARKER} has no integer "format_version"'
    files = doc.get("files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None, f'its {_MARKER} has no "files" list of names'
    for f in files:
        if _relative_parts(f) is None:
            return None, f"its {_MARKER} lists the name {f!r}, which leaves the directory"
    return files, ""


def _list_tree(top: Path, refuse: Callable[[str], Exception]) -> List[Tuple[str, str]]:
    """Every entry below the directory `top`, sorted, as (relative name with '/', kind): kind
    is "dir", "file" (a regular file), "link" (a symbolic link, never followed) or "other".
    More than _MAX_TREE_ENTRIES entries raise refuse(why)."""
    out: List[Tuple[str, str]] = []
    pending = [""]
    while pending:
        rel = pending.pop()
        with os.scandir(top / rel if rel else top) as it:
            for e in it:
                name = f"{rel}/{e.name}" if rel else e.name
                if e.is_symlink():
                    kind = "link"
                elif e.is_dir(follow_symlinks=False):
                    kind = "dir"
                    pending.append(name)
                elif e.is_file(follow_symlinks=False):
                    kind = "file"
                else:
                    kind = "other"
                out.append((name, kind))
                if len(out) > _MAX_TREE_ENTRIES:
                    raise refuse(f"holds more than {_MAX_TREE_ENTRIES} entries")
    out.sort()
    return out


def _check_replaceable(dest: Path) -> bool:
    """Raises FileExistsError (naming `dest` and the first entry in the way) unless a fetch may
    put its directory at `dest`: nothing is there, or an empty directory, or a directory that an
    earlier fetch wrote (a valid marker, and below it nothing but the regular files the marker
    lists and their directories). A symbolic link is never followed. True when `dest` exists."""

    def refuse(why: str) -> FileExistsError:
        return FileExistsError(f"'{dest}' {why}: {_NOT_REPLACED}")

    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise refuse("is a symbolic link (never followed)")
    if not stat.S_ISDIR(st.st_mode):
        raise refuse("exists and is not a directory")
    entries = _list_tree(dest, refuse)
    if not entries:
        return True
    try:
        fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise refuse(f"cannot be opened as a directory ({e.strerror})") from None
    try:
        files, why = _read_marker(fd)
    finally:
        os.close(fd)
    if files is None:
        first = next((name for name, _ in entries if name != _MARKER), entries[0][0])
        raise refuse(f"holds '{first}', which a fetch did not write ({why})")
    listed = set(files)
    parents = {"/".join(parts[:i]) for parts in (f.split("/") for f in files)
               for i in range(1, len(parts))}
    for name, kind in entries:
        if name == _MARKER or (kind == "file" and name in listed) or \
                (kind == "dir" and name in parents):
            continue
        if kind == "link":
            raise refuse(f"holds the symbolic link '{name}', which a fetch did not write")
        raise refuse(f"holds '{name}', which a fetch did not write")
    return True


def _mark_written(tmp: Path, collaboration_id: str, names: List[str]) -> None:
    """Writes the marker listing `names` into the fetched directory `tmp`, then flushes the
    marker and every directory to disk (the files are flushed as they are closed)."""
    files = sorted(names)
    doc = {"format": _MARKER_FORMAT, "format_version": _MARKER_VERSION,
           "collaboration": collaboration_id, "files": files}
    with open(tmp / _MARKER, "x", encoding="utf-8") as f:
        f.write(json.dumps(doc, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    dirs = {"/".join(parts[:i]) for parts in (n.split("/") for n in files)
            for i in range(1, len(parts))}
    for d in sorted(dirs, key=lambda d: d.count("/"), reverse=True):  # deepest first
        _fsync(tmp.joinpath(*d.split("/")), directory=True)
    _fsync(tmp, directory=True)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@functools.lru_cache(maxsize=None)
def _renameat2() -> Optional[Callable[..., int]]:
    """glibc's renameat2, or None (not Linux, or a C library without it)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def _exchange(a: Path, b: Path) -> bool:
    """Swaps the directory entries `a` and `b` in one step (renameat2 RENAME_EXCHANGE). False
    where the system or the file system cannot; OSError naming `b` when the swap failed."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, f"cannot swap the new result into place ({os.strerror(err)})", str(b))


def _swap_into_place(tmp: Path, dest: Path) -> Optional[Path]:
    """Moves the directory `tmp` to `dest`. An existing `dest` is swapped with it in one step or,
    where that cannot be done, moved aside to a new hidden sibling first (and moved back when
    the second rename fails): `dest` is always the old or the new directory. Returns where the
    old directory now is (None when there was none); the caller disposes of it."""
    if not os.path.lexists(dest):
        os.rename(tmp, dest)
        return None
    if _exchange(tmp, dest):
        return tmp  # the old directory is where the new one was
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
    try:
        os.rename(dest, old)  # onto the empty directory that mkdtemp made
    except BaseException:
        with contextlib.suppress(OSError):
            os.rmdir(old)
        raise
    try:
        os.rename(tmp, dest)
    except BaseException:
        os.rename(old, dest)
        raise
    return old


def _open_below(dir_fd: int, parts: List[str]) -> int:
    """A new descriptor of the directory dir_fd/parts[0]/parts[1]/..., no component followed
    through a symbolic link. The caller closes it."""
    fd = os.dup(dir_fd)
    try:
        for part in parts:
            below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                            dir_fd=fd)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def _remove_written(directory: Path) -> bool:
    """Removes a directory that a fetch wrote, through its marker only: the regular files it
    lists, the marker, then the directories that became empty (a directory without a marker is
    removed only when empty). Anything else (a file put there since) stays, and so does the
    directory; False then. Nothing is followed through a symbolic link."""
    try:
        top = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        files, _ = _read_marker(top)
        if files is None:
            files = []  # an empty directory (anything else stays, and so does it)
        dirs: Set[Tuple[str, ...]] = set()
        for name in files:
            parts = name.split("/")  # _read_marker checked that each name stays below
            dirs.update(tuple(parts[:i]) for i in range(1, len(parts)))
            try:
                fd = _open_below(top, parts[:-1])
            except OSError:
                continue
            try:
                if stat.S_ISREG(os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode):
                    os.unlink(parts[-1], dir_fd=fd)
            except OSError:
                pass
            finally:
                os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(_MARKER, dir_fd=top)
        for d in sorted(dirs, key=len, reverse=True):  # deepest first
            try:
                fd = _open_below(top, list(d[:-1]))
            except OSError:
                continue
            try:
                os.rmdir(d[-1], dir_fd=fd)
            except OSError:
                pass
            finally:
                os.close(fd)
    finally:
        os.close(top)
    try:
        os.rmdir(directory)
    except OSError:
        return False
    return True


class _Terminated(BaseException):
    """Raised by the SIGTERM handler of _SigtermCleanup, so that fetch's cleanup runs."""


class _SigtermCleanup:
    """While fetch runs on the main thread and SIGTERM has its default action (death), SIGTERM
    raises _Terminated instead, so that the temporaries are removed; when the block ends the
    process then dies of SIGTERM, as it would have. Within deferred() blocks a SIGTERM waits.
    On other threads, or with a handler of the program's own, nothing is changed."""

    def __init__(self) -> None:
        self.installed = False
        self.pending = False
        self.deferring = 0

    def __enter__(self) -> "_SigtermCleanup":
        if threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                    signal.signal(signal.SIGTERM, self._handler)
                    self.installed = True
            except (ValueError, OSError):  # no signals here (an embedded interpreter)
                pass
        return self

    def _handler(self, signum: int, frame: Any) -> None:
        if self.pending:
            return  # already on the way out
        self.pending = True
        if not self.deferring:
            raise _Terminated()

    @contextlib.contextmanager
    def deferred(self, then_raise: bool = False) -> Iterator[None]:
        """A block that a SIGTERM does not interrupt; with `then_raise`, one that came meanwhile
        raises _Terminated when the block ends."""
        self.deferring += 1
        try:
            yield
        finally:
            self.deferring -= 1
        if then_raise and self.pending and not self.deferring:
            raise _Terminated()

    def __exit__(self, *exc: Any) -> None:
        if not self.installed:
            return
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if self.pending:
            # The cleanup is done: die of the signal, as without the handler.
            os.kill(os.getpid(), signal.SIGTERM)
            raise SystemExit(128 + signal.SIGTERM)  # not reached where SIGTERM kills
