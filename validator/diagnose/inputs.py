"""Which files to read, how to open them (plain or gzip), and what each one is."""

from __future__ import annotations

import errno
import glob
import io
import os
import re
import zlib
from collections.abc import Iterable
from typing import BinaryIO

from validator import safejson
from validator.errors import UserError

GZIP_MAGIC = b"\x1f\x8b"


INFLATE_FLOOR = 1 << 30  # a .gz may always inflate to 1 GiB ...
INFLATE_RATIO = 100  # ... or to 100 times its size; past that it is a bomb: read that much, say so


class InflateLimit(OSError):
    """A .gz that inflates past the cap: what came before the cap was read."""


class _Gzip(io.RawIOBase):
    """gzip, member after member, with zlib: linear in the input whatever the members (a file of
    millions of one-byte members costs no more per byte than one member), inflated bytes capped.
    Hands over what it decompressed before a truncation or the cap, then raises."""

    def __init__(self, path: str) -> None:
        self.f = open(path, "rb")  # noqa: SIM115 - closed in close()
        self.cap = max(INFLATE_FLOOR, INFLATE_RATIO * os.fstat(self.f.fileno()).st_size)
        self.d = zlib.decompressobj(31)
        self.pending = b""
        self.total = 0
        self.in_member = False
        self.error: OSError | EOFError | None = None

    def _more(self) -> bool:
        data = self.f.read(1 << 12)
        self.pending += data
        return bool(data)

    def _next_member(self) -> bool:
        """Start the next member; False at the end of the file (zero padding allowed)."""
        while True:
            self.pending = self.pending.lstrip(b"\x00")
            if len(self.pending) >= 2 or not self._more():
                break
        if not self.pending:
            return False
        if not self.pending.startswith(GZIP_MAGIC):
            raise OSError("trailing bytes after the last gzip member are not gzip")
        self.d, self.in_member = zlib.decompressobj(31), True
        return True

    def _inflate(self, n: int) -> bytes:
        parts: list[bytes] = []
        try:
            self._inflate_into(parts, n)
        except (OSError, EOFError) as e:  # keep what came before the damage
            self.error = e
        return b"".join(parts)

    def _inflate_into(self, parts: list[bytes], n: int) -> None:
        size = 0
        while size < n:
            if not self.in_member and not self._next_member():
                break
            if not self.pending and not self._more():
                raise EOFError("Compressed file ended before the end-of-stream marker was reached")
            try:
                part = self.d.decompress(self.pending, n - size)
            except zlib.error as e:
                raise OSError(f"corrupt gzip data: {e}") from None
            self.pending = self.d.unconsumed_tail
            if self.d.eof:
                self.pending, self.in_member = self.d.unused_data + self.pending, False
            parts.append(part)
            size += len(part)

    def read(self, n: int = -1) -> bytes:
        if self.error is not None:
            raise self.error
        want = min(n if n >= 0 else 1 << 20, self.cap - self.total + 1)
        data = self._inflate(want)
        if self.total + len(data) > self.cap:
            data = data[: self.cap - self.total]
            self.error = InflateLimit(
                f"gzip inflates past {self.cap >> 20} MiB ({INFLATE_RATIO}x its size, at least 1 GiB); read that much"
            )
        self.total += len(data)
        if not data and self.error is not None:
            raise self.error
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.f.close()
        super().close()


def open_binary(path: str) -> BinaryIO:
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == GZIP_MAGIC:
        return _Gzip(path)  # type: ignore[return-value]
    return open(path, "rb")


def _walk(top: str, unread: list[tuple[str, str]]) -> list[str]:
    """The files under a directory, following links to directories (each directory once: a link
    back up is no loop); a directory that cannot be listed goes to ``unread``, never skipped in silence."""
    out: list[str] = []
    seen: set[tuple[int, int]] = set()

    def failed(e: OSError) -> None:
        unread.append((str(e.filename or top), f"cannot read directory: {e.strerror}"))

    for root, dirs, files in os.walk(top, onerror=failed, followlinks=True):
        try:
            st = os.stat(root)
        except OSError as e:
            failed(e)
            dirs[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:  # read already, by another path
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs.sort()
        out += [os.path.join(root, f) for f in sorted(files) if not f.startswith(".")]
    return out


def log_files(paths: Iterable[str], unread: list[tuple[str, str]] | None = None) -> list[str]:
    """Files, directories (recursively) and globs -> files, in a stable order. A path that names
    nothing is a usage error. Symbolic links to files are listed as they are (``unreadable``
    tells); directories that cannot be listed go to ``unread`` as (path, why)."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            out += _walk(p, unread if unread is not None else [])
        elif os.path.lexists(p):
            out.append(p)
        elif any(c in p for c in "*?["):
            found = sorted(f for f in glob.glob(p, recursive=True) if os.path.isfile(f))
            if not found:
                raise UserError("no file matches this pattern", p)
            out += found
        else:
            raise UserError("no such file or directory", p)
    return list(dict.fromkeys(out))


def _root(arg: str) -> str:
    """The directory an argument names files under: itself, a file's directory, or a glob's
    directory part before the first wildcard."""
    if os.path.isdir(arg):
        return os.path.abspath(arg)
    parts = os.path.abspath(arg).split(os.sep)
    fixed = next((i for i, part in enumerate(parts) if any(c in part for c in "*?[")), len(parts) - 1)
    return os.sep.join(parts[:fixed]) or os.sep


def display_names(files: list[str], args: Iterable[str]) -> dict[str, str]:
    """How evidence names each file: its path below the directory it was found in (or the
    common directory of the arguments), so ``rank2/stderr.log`` and ``rank3/stderr.log`` differ."""
    roots = [_root(a) for a in args]
    try:
        root = os.path.commonpath(roots) if roots else ""
    except ValueError:  # paths on different drives
        root = ""
    out: dict[str, str] = {}
    for f in files:
        rel = os.path.relpath(os.path.abspath(f), root) if root else f
        out[f] = os.path.basename(f) if rel.startswith("..") else rel
    return out


def unreadable(path: str) -> str | None:
    """Why a listed path is not read, or None for a regular file. Never opens it: a FIFO would
    block, a device could be endless."""
    import stat

    try:
        st = os.stat(path)
    except OSError as e:
        return f"cannot read: {e.strerror}"
    if stat.S_ISREG(st.st_mode):
        return None
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"))
    kind = next((name for test, name in kinds if test(st.st_mode)), "not a regular file")
    return f"skipped: {kind}, not a regular file (never opened)"


def sniff(path: str) -> str:
    """log | fr-pickle | fr-json | trace | errorfile | binary, from the first bytes."""
    try:
        with open_binary(path) as f:
            head = f.read(4096)
    except (OSError, EOFError) as e:
        raise UserError(f"cannot read: {e}", path) from None
    if head[:1] == b"\x80":
        return "fr-pickle"
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        first = stripped.split(b"\n", 1)[0]
        if b'"validator-trace"' in first:
            return "trace"
        if b'"pg_config"' in head or b'"entries"' in head or b'"comm_lib_version"' in head:
            return "fr-json"
        if b'"message"' in head and (b'"extraInfo"' in head or b"py_callstack" in head):
            return "errorfile"
    if b"\x00" in head.lstrip(b"\x00"):  # a log truncated in place (logrotate's copytruncate) starts with NULs only
        return "binary"
    if head and not head.strip(b"\x00") and not _text_after_nuls(path):
        return (
            "binary"  # NULs and nothing after them (within NUL_SCAN): no log (red-teamed: "no failure found", exit 0)
        )
    return "log"


NUL_SCAN = 64 << 20  # of a file that starts with NULs, this much is looked through for text (past a sparse hole)


def _text_after_nuls(path: str) -> bool:
    """Whether text follows the NULs a file starts with: a copytruncate'd log's hole (skipped with SEEK_DATA where
    the file is sparse), then its lines; NULs alone, or more than NUL_SCAN of them, are no log."""
    try:
        with open_binary(path) as f:
            if isinstance(f, io.BufferedReader):  # a plain file (not a .gz): past the hole, where it is sparse
                try:
                    f.seek(os.lseek(f.fileno(), 0, os.SEEK_DATA))
                except OSError as e:
                    if e.errno == errno.ENXIO:  # a hole to the end: no data at all
                        return False
            seen = 0
            while seen < NUL_SCAN:
                chunk = f.read(1 << 20)
                if not chunk:
                    return False
                if chunk.strip(b"\x00"):
                    return True
                seen += len(chunk)
    except (OSError, EOFError):
        return False
    return False


_RANK_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)
_TRAILING = re.compile(r"(\d+)$")


def rank_from_name(path: str) -> int | None:
    """``rank3.log``, ``train_rank_3.out``, ``nccl_trace_rank_3`` -> 3; otherwise None."""
    base = os.path.basename(path)
    for suffix in (".gz", ".log", ".txt", ".out", ".err", ".json", ".pkl", ".pickle", ".jsonl"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    if m := _RANK_NAME.search(base):
        return int(m.group(1))
    return None


def dump_rank(path: str) -> int | None:
    """Flight Recorder dumps are ``<prefix><global rank>``; odd names fall back to rank patterns."""
    r = rank_from_name(path)
    if r is not None:
        return r
    base = os.path.basename(path)
    for suffix in (".gz", ".json", ".pkl", ".pickle"):
        base = base.removesuffix(suffix)
    m = _TRAILING.search(base)
    return int(m.group(1)) if m else None


def local_rank_from_path(path: str) -> int | None:
    """torchrun --log-dir layout: ``.../attempt_0/<local_rank>/{stdout,stderr}.log|error.json``."""
    parent = os.path.basename(os.path.dirname(path))
    if parent.isdecimal() and len(parent) < 10 and os.path.basename(path) in ("stdout.log", "stderr.log", "error.json"):
        return int(parent)
    return None


MAX_JSON = 64 << 20  # a JSON input (Flight Recorder dump, error.json) inflated: beyond this it is refused


def read_limited(path: str, limit: int, what: str) -> bytes:
    """The whole (inflated) file, refused past ``limit`` bytes."""
    try:
        with open_binary(path) as f:
            data = f.read(limit + 1)
    except (OSError, EOFError) as e:
        raise UserError(f"cannot read: {e}", path) from None
    if len(data) > limit:
        raise UserError(f"{what} larger than {limit >> 20} MiB (inflated); not read", path)
    return data


def file_rank(path: str) -> int | None:
    """The rank a file's name or place tells: ``rank3.log``, or torchrun ``--log-dir``'s
    ``attempt_0/3/stderr.log`` (a local rank: the global one on a single node; a ``[rankN]:``
    prefix or c10d's ``[Rank N]`` in the lines overrides it)."""
    r = rank_from_name(path)
    return r if r is not None else local_rank_from_path(path)


def read_json(path: str) -> object:
    data = read_limited(path, MAX_JSON, "JSON document")
    return safejson.loads(data, path, max_bytes=MAX_JSON)  # bounded: depth, numbers; one line naming the file
