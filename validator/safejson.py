"""Bounded reading of untrusted input: files and JSON documents.

Everything the validator reads was written by someone else (facts pulled from clusters, frames
from anyone on the network), so every reader here refuses, with one line that quotes at most a
short prefix, what would cost unbounded memory or time or crash the parser:

- files that are not regular files (a FIFO would block forever, a device never ends);
- more bytes than a limit, checked before anything is parsed;
- JSON nested deeper than ``MAX_DEPTH`` (measured without recursion, so never RecursionError);
- integers of more than ``MAX_INT_DIGITS`` digits and non-finite numbers (NaN, Infinity, 1e999).

The limits are documented in docs/usage.md ("Limits").
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import stat
from collections.abc import Callable, Iterator

from validator.errors import UserError

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import IO, Any

MAX_BYTES = 16 << 20  # one JSON document, unless the caller sets its own limit
MAX_DEPTH = 64  # facts are 6 levels deep, preflight frames 9
MAX_INT_DIGITS = 40  # beyond 128-bit integers: no fact needs more
QUOTE = 40  # characters of a bad value quoted in an error

# Number shapes at C speed (a regex over every digit cost ~0.3 ms a node's facts): digits -> 0,
# e/E -> e, +/- -> +, the rest -> space; then plain substring searches.
_SHAPES = bytes(48 if 48 <= b <= 57 else 101 if b in (69, 101) else 43 if b in (43, 45) else 32 for b in range(256))
_LONG_INT = b"0" * (MAX_INT_DIGITS + 1)
_BIG_FLOATS = (b"0e000", b"0e+000", b"0" * 300)  # what could exceed a double: 1e999, 1E+400, 400 digits
_CONTAINERS = (dict, list)
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_PAIRS = bytes.maketrans(b"[{]}", b"(())")


class JsonError(UserError):
    """Input that is not (acceptable) JSON. ``syntax``: the text is not JSON at all (as opposed
    to JSON beyond the limits); ``line``: its line, when known."""

    def __init__(self, message: str, where: str = "", syntax: bool = False, line: int | None = None) -> None:
        super().__init__(message, where)
        self.syntax = syntax
        self.line = line


class _Refused(ValueError):
    """Raised inside the JSON parser's hooks; becomes a JsonError."""


class _Deep(Exception):
    """A document nested deeper than the limit; becomes a JsonError."""


def clip(value: object, limit: int = QUOTE) -> str:
    """``value`` quoted for an error message: its repr, at most ``limit`` characters of it."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        return repr(text[:limit]) + f"... ({len(text):,} characters)"
    return repr(text)


def size(n: int) -> str:
    """Bytes as a person reads them: ``16 MiB``, ``800 KiB``, ``12 bytes``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} bytes"


@contextlib.contextmanager
def open_regular(path: str, what: str = "file") -> Iterator[IO[bytes]]:
    """``path`` opened for binary reading; refused when it is not a regular file (a FIFO or a
    device would block or never end). Opened non-blocking so that a FIFO cannot stall the open."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise UserError(f"cannot read {what}: {e.strerror}", path) from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as e:
        os.close(fd)
        raise UserError(f"cannot read {what}: {e.strerror}", path) from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        raise UserError(f"not a regular file ({kind}); skipped", path)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as f:
        yield f


def read_text(path: str, limit: int, what: str = "file") -> str:
    """A regular file of at most ``limit`` bytes, as UTF-8 text."""
    with open_regular(path, what) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UserError(f"{what} is larger than {size(limit)}; refused", path)
    return decode_utf8(data, path)


def decode_utf8(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UserError(f"not a text file (byte {e.start} is not UTF-8)", f"{where}:{line}") from None


def too_deep(data: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether ``data``'s brackets nest deeper than ``limit`` outside strings, decided without
    recursion and at C speed: each round removes every innermost pair, so a text ``limit``
    deep is empty after ``limit`` rounds. (Unbalanced brackets are left to the parser.)"""
    if data.count(b"[") + data.count(b"{") <= limit:
        return False  # cannot nest deeper than there are brackets
    brackets = _brackets(data)
    for _ in range(limit):
        brackets = brackets.replace(b"()", b"")
        if not brackets:
            return False
    return b"()" in brackets


def deeper_than(doc: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a parsed document nests deeper than ``limit``, one level at a time (no recursion;
    ~20 us for a node's facts, where scanning the text first cost ~100 us)."""
    level = [doc] if type(doc) in _CONTAINERS else []
    for _ in range(limit):
        if not level:
            return False
        level = [v for c in level for v in (c.values() if type(c) is dict else c) if type(v) in _CONTAINERS]
    return bool(level)


def _brackets(data: bytes) -> bytes:
    """The brackets of ``data`` outside strings, as ``(`` and ``)``; a window at a time, so that
    the pieces between quotes never all exist at once."""
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")  # escapes pair left to right, as JSON reads them
    out: list[bytes] = []
    inside = False
    for start in range(0, len(unescaped), 1 << 20):
        pieces = unescaped[start : start + (1 << 20)].split(b'"')
        out.append(b"".join(pieces[inside::2]).translate(_PAIRS, _NOT_BRACKETS))
        inside ^= len(pieces) % 2 == 0  # an odd number of quotes: the window ends inside a string
    return b"".join(out)


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text.lstrip('-')):,} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"a number out of range ({clip(text, 20)})")
    return value


def _constant(text: str) -> float:
    raise _Refused(f"{text} is not a JSON number")


_DECODERS = {
    (i, f): json.JSONDecoder(parse_int=_int if i else None, parse_float=_float if f else None, parse_constant=_constant)
    for i in (False, True)
    for f in (False, True)
}


def _decoder(raw: bytes) -> json.JSONDecoder:
    """The C decoder, with a Python callback only where the text may hold what it refuses."""
    shapes = raw.translate(_SHAPES)
    big, bigger, long = _BIG_FLOATS
    return _DECODERS[_LONG_INT in shapes, big in shapes or bigger in shapes or long in shapes]


def loads(
    data: str | bytes,
    where: str = "",
    *,
    line: int | None = None,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    unit: str = "document",
    shallow: Callable[[Any], bool] | None = None,
) -> Any:
    """Parse untrusted JSON within the limits, or raise JsonError naming ``where`` and a line:
    a syntax error's own (``facts.json:4``), else ``line``, where the text starts in its file
    (JSON Lines). ``unit`` names what a truncation would have truncated. ``shallow``: a check
    that accepts only documents nested less than ``max_depth`` deep (a schema, which the caller
    applies anyway): a document it accepts is not walked for its depth."""
    return next(_parse(data, where, line, max_bytes, max_depth, unit, False, shallow))


def loads_many(
    texts: list[bytes],
    where: str = "",
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    unit: str = "document",
    shallow: Callable[[Any], bool] | None = None,
) -> list[Any]:
    """Each of ``texts`` one JSON document on its own (no space around it), parsed in one pass of
    the decoder: the many small texts of one frame (validator/preflight/sections.py) at the cost
    of one. Limits and errors as for ``loads``, ``max_bytes`` over them all; ``shallow`` is asked
    of each document in turn."""
    raw, ends, at = b"".join(texts), [], 0
    ascii_ = raw.isascii()
    for i, t in enumerate(texts):  # where each text ends in the decoded string
        try:
            at += len(t) if ascii_ else len(t.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise JsonError(f"not valid JSON: byte {e.start} of text {i + 1} is not UTF-8", where, True) from None
        ends.append(at)
    return list(_parse(raw, where, None, max_bytes, max_depth, unit, False, shallow, ends))


def items(data: str | bytes, where: str = "", *, max_bytes: int = MAX_BYTES, unit: str = "document") -> Iterator[Any]:
    """The elements of a top-level JSON array one at a time (each parsed when it is reached, so
    a caller can stop early without the whole array in memory), or the one document that is
    not an array; limits and errors as for ``loads``."""
    return _parse(data, where, None, max_bytes, MAX_DEPTH, unit, True)


_SPACE = re.compile(r"[ \t\n\r]*")


def _parse(
    data: str | bytes,
    where: str,
    line: int | None,
    max_bytes: int,
    max_depth: int,
    unit: str,
    array: bool,
    shallow: Callable[[Any], bool] | None = None,
    ends: list[int] | None = None,
) -> Iterator[Any]:
    def at(n: int | None) -> str:
        return where if n is None else f"{where}:{n}" if where else f"line {n}"

    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise JsonError(f"JSON {unit} larger than {size(max_bytes)} ({size(len(raw))}); refused", at(line))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        n = raw.count(b"\n", 0, e.start) + (line or 1)
        raise JsonError(f"not valid JSON: byte {e.start} is not UTF-8", at(n), True, n) from None
    if text.startswith("\ufeff") and not ends:  # a byte order mark (an editor's on Windows): RFC 8259 lets it go
        text = text[1:]
    decoder = _decoder(raw)
    try:
        pos = _SPACE.match(text).end() if array else 0  # type: ignore[union-attr]  # matches the empty string
        for end in ends or ():  # loads_many: each document ends exactly where its text does
            doc, pos = decoder.raw_decode(text, pos)
            if pos != end:  # more after it, or (a number) running on into the next text
                raise json.JSONDecodeError("Extra data" if pos < end else "Expecting end of text", text, min(pos, end))
            if not (shallow is not None and shallow(doc)) and deeper_than(doc, max_depth):
                raise _Deep
            yield doc
        if ends is not None:
            return
        if not (array and text.startswith("[", pos)):
            doc = decoder.decode(text)
            if not (shallow is not None and shallow(doc)) and deeper_than(doc, max_depth):
                raise _Deep
            yield doc
            return
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
        more = not text.startswith("]", pos)
        if not more:  # []
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
        while more:
            doc, pos = decoder.raw_decode(text, pos)
            if deeper_than(doc, max_depth):
                raise _Deep
            pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
            more = text.startswith(",", pos)
            if not more and not text.startswith("]", pos):
                raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            yield doc
        if pos < len(text):
            raise json.JSONDecodeError("Extra data", text, pos)
    except _Refused as e:
        raise JsonError(f"JSON with {e}; refused", at(line)) from None
    except json.JSONDecodeError as e:
        ends_early = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated")
        hint = f"; truncated {unit}?" if ends_early else ""
        n = e.lineno + (line or 1) - 1
        raise JsonError(f"not valid JSON: {e.msg} (column {e.colno}){hint}", at(n), True, n) from None
    except (_Deep, RecursionError):  # RecursionError: the C decoder stops a deep document at the recursion limit
        raise JsonError(f"JSON nested more than {max_depth} levels deep; refused", at(line)) from None
    except (ValueError, OverflowError) as e:  # not reached within the limits; never escapes
        raise JsonError(f"JSON refused: {type(e).__name__}: {clip(str(e), 80)}", at(line)) from None
