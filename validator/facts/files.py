"""Facts files: one JSON document, a JSON array of them, or JSON Lines (``srun validator probe
--json > facts.jsonl``), read within the limits of ``validator.safejson``.

A file of at most ``MAX_DOC_BYTES`` is parsed whole (a pretty-printed document or an array),
falling back to JSON Lines when it is not one document. A larger file must be JSON Lines: it is
streamed one line at a time, each line at most ``MAX_LINE_BYTES``, so memory holds one line and
the documents that load, whatever the file's size.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import IO, Any

from validator.errors import UserError
from validator.facts import load_facts
from validator.facts.share import Shared
from validator.model import Facts
from validator.safejson import QUOTE, JsonError, decode_utf8, items, loads, open_regular, size

MAX_DOC_BYTES = 16 << 20  # a file parsed whole (one document or an array of them)
MAX_LINE_BYTES = 4 << 20  # one document of JSON Lines (a node's facts are ~4 KB)
MAX_BAD = 100  # bad documents reported per file before it is abandoned
CHUNK = 1 << 20

Document = tuple[str, Any]  # (where, document) or (where, UserError) for a bad one


def load_file(path: str, shared: Shared | None = None) -> tuple[list[Facts], list[str]]:
    """The facts documents of one file that load, and one error line per one that does not;
    after ``MAX_BAD`` bad ones the rest of the file is not read (one more line says so). With
    ``shared``, what a node's ranks have in common is held once (validator/facts/share.py)."""
    facts: list[Facts] = []
    errors: list[str] = []
    try:
        for where, doc in read_documents(path):
            if not isinstance(doc, UserError):
                try:
                    loaded = load_facts(doc, where)
                    facts.append(shared.add(loaded) if shared is not None else loaded)
                    continue
                except UserError as e:
                    doc = e
            errors.append(str(doc))
            if len(errors) >= MAX_BAD:
                errors.append(f"{path}: more than {MAX_BAD} bad documents; the rest of the file is not read")
                break
    except UserError as e:
        errors.append(str(e))
    return facts, errors


def read_documents(path: str) -> Iterator[Document]:
    """(where, document) for each JSON document in a file. Errors name the file and line; a bad
    document is yielded as a ``UserError`` in place of its document, so the ones after it are
    still read."""
    with open_regular(path, "facts file") as f:
        head = f.read(MAX_DOC_BYTES + 1)
        yield from _whole(path, head) if len(head) <= MAX_DOC_BYTES else _stream(path, head, f)


def _whole(path: str, data: bytes) -> Iterator[Document]:
    """A document, an array of them (parsed one element at a time), or JSON Lines."""
    array = re.match(rb"\s*\[", data) is not None
    read = 0
    try:
        for doc in items(data, path, max_bytes=MAX_DOC_BYTES, unit="file"):
            yield (f"{path}[{read}]" if array else path), doc
            read += 1
    except JsonError as whole:
        text = decode_utf8(data, path) if whole.syntax and not read else ""
        lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
        if len(lines) <= 1 or not any(_is_object(ln) for _, ln in lines[:MAX_BAD]):
            raise  # one (pretty-printed) document or array, or beyond the limits
        for n, line in lines:
            yield _line(path, n, line.encode())


def _stream(path: str, head: bytes, f: IO[bytes]) -> Iterator[Document]:
    """JSON Lines too large to read whole: one line at a time, each bounded."""
    for n, line, whole in _lines(head, f):
        if not whole:
            shown = repr(line[:QUOTE].decode("utf-8", "replace")) + "..."
            if n == 1:
                raise UserError(
                    f"larger than {size(MAX_DOC_BYTES)}, and its first line is over {size(MAX_LINE_BYTES)} "
                    f"(starts {shown}): facts files this large must be JSON Lines (`jq -c '.[]' FILE`)",
                    f"{path}:1",
                )
            yield f"{path}:{n}", UserError(f"line longer than {size(MAX_LINE_BYTES)} (starts {shown})", f"{path}:{n}")
        elif line.strip():
            where, doc = _line(path, n, line)
            if n == 1 and isinstance(doc, UserError) and not line.lstrip().startswith(b"{"):
                raise UserError(
                    f"larger than {size(MAX_DOC_BYTES)} and not JSON Lines: facts files this large must be "
                    "one document per line (`jq -c '.[]' FILE`)",
                    path,
                )
            yield where, doc


def _lines(buf: bytes, f: IO[bytes]) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, line, whole) for each line of ``buf`` and what follows it in ``f``; a line
    over ``MAX_LINE_BYTES`` comes as its first 60 bytes and ``whole`` False, the rest skipped."""
    n, pos, skipping = 0, 0, False
    while True:
        cut = buf.find(b"\n", pos)
        if cut < 0:
            if len(buf) - pos > MAX_LINE_BYTES and not skipping:
                n, skipping = n + 1, True
                yield n, buf[pos : pos + 60], False
            more = f.read(CHUNK)
            if not more:
                if pos < len(buf) and not skipping:
                    yield n + 1, buf[pos:], True
                return
            buf, pos = (b"" if skipping else buf[pos:]) + more, 0
            continue
        if skipping:
            skipping = False
        elif cut - pos > MAX_LINE_BYTES:
            n += 1
            yield n, buf[pos : pos + 60], False
        else:
            n += 1
            yield n, buf[pos:cut], True
        pos = cut + 1


def _line(path: str, n: int, line: bytes) -> Document:
    where = f"{path}:{n}"
    try:
        return where, loads(line, path, line=n, max_bytes=MAX_LINE_BYTES, unit="line")
    except JsonError as e:
        return where, e


def _is_object(line: str) -> bool:
    """A whole JSON object on one line: the mark of JSON Lines."""
    try:
        return isinstance(loads(line, max_bytes=MAX_LINE_BYTES), dict)
    except JsonError:
        return False
