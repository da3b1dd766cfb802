"""Which files to read, how to open them (plain or gzip), and what each one is."""

from __future__ import annotations

import glob
import gzip
import io
import json
import os
import re
from collections.abc import Iterable
from typing import BinaryIO

from validator.errors import UserError

GZIP_MAGIC = b"\x1f\x8b"


class _Gzip(io.RawIOBase):
    """gzip that hands over what it decompressed before a truncation, then raises."""

    def __init__(self, path: str) -> None:
        self.f = gzip.open(path, "rb")  # noqa: SIM115 - closed in close()
        self.error: EOFError | None = None

    def read(self, n: int = -1) -> bytes:
        if self.error is not None:
            raise self.error
        parts: list[bytes] = []
        size = 0
        while n < 0 or size < n:
            try:
                part = self.f.read1(1 << 16 if n < 0 else min(1 << 16, n - size))
            except EOFError as e:
                self.error = e
                break
            if not part:
                break
            parts.append(part)
            size += len(part)
        if not parts and self.error is not None:
            raise self.error
        return b"".join(parts)

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


def expand(paths: Iterable[str]) -> list[str]:
    """Files, directories (recursively) and globs -> files, in a stable order. A path that names
    nothing is a usage error."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                out += [os.path.join(root, f) for f in sorted(files) if not f.startswith(".")]
        elif os.path.exists(p):
            out.append(p)
        elif any(c in p for c in "*?["):
            found = sorted(f for f in glob.glob(p, recursive=True) if os.path.isfile(f))
            if not found:
                raise UserError("no file matches this pattern", p)
            out += found
        else:
            raise UserError("no such file or directory", p)
    return list(dict.fromkeys(out))


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
    if b"\x00" in head:
        return "binary"
    return "log"


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
    if parent.isdigit() and os.path.basename(path) in ("stdout.log", "stderr.log", "error.json"):
        return int(parent)
    return None


def read_json(path: str) -> object:
    with open_binary(path) as f:
        try:
            return json.load(f)
        except (ValueError, UnicodeDecodeError) as e:
            raise UserError(f"not valid JSON: {e}", path) from None
