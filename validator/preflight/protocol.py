"""The preflight wire protocol: length-prefixed JSON frames, bounded, optionally HMAC-signed.

    coordinator -> participant  hello   {"type": "hello", "proto": 1, "job_id", "nonce", "deadline_in", "sections": 1}
    participant -> coordinator  header  {"type": "facts", "proto": 1, "job_id", "size", "mac", "listen", "token", "clock", "quiet",
                                         "chunks", "sections"}
                                body    the facts, ``size`` bytes: JSON texts, one per section (sections.py)
    coordinator -> participant  ack     {"type": "ack", "arrived": n, "expected": N}  or  reject {"reason"}
                                        (no ack when the header says "quiet": true; a reject still comes)
                                        {"type": "ack"} again each KEEPALIVE_S while the net check or the probes
                                        run (rounds a participant may sit out), KEEPALIVES times at most
    coordinator -> participant  probe   {"type": "probe", "targets": [...]}           (--net-check only)
    participant -> coordinator  result  {"type": "netcheck", "results": [...]}         (--net-check only)
    coordinator -> participant  resolve  {"type": "resolve", "names": [...]}           (2+ hosts; peers.py)
    participant -> coordinator  resolved {"type": "resolved", "results": {name: {"addrs", "error"}}}
    coordinator -> participant  verdict {"type": "verdict", "exit_code", "report", "text", "named", "port"[, "pending": true]}
    participant -> coordinator  ready   {"type": "ready", "lost": [token, ...]}       (a pending verdict: a proposed pass)
    coordinator -> participant  go      {"type": "go"}    (every participant said ready), or a final failing verdict
                                seal    {"type": "seal", "mac"}   (with a secret: after a verdict, go, probe or resolve)

A pass comes in two phases: a verdict with "pending": true is a proposal; each participant answers
"ready" (a node leader after its own ranks did, listing the tokens of those that did not), and acts
only on the "go" that follows. A participant that vanished in between turns it into a failing
verdict for everyone (coordinator.confirm, PRE010).

With a secret, what a rank acts on (the verdict, a probe or resolve request) is followed by its
seal: the MAC (below) of ``verdict`` 0 and the SHA-256 of the frame's body under the participant's
own token, so only a coordinator that knows the secret can make a rank exec its command, probe or
look names up, and a frame recorded from another run does not replay (each participant process
draws its token afresh). A node leader checks the seal and
hands the verdict to its ranks, which trust it as their own user's process (local.py).

A node leader (per-rank mode, local.py) adds "ranks": [{"mac", "token", "sections"}, ...] to its
header, its own first, and its body is the distinct texts of those ranks' sections (sections.py);
its members speak this same protocol to it over the node's Unix socket, the hello carrying the
coordinator's nonce.

Each frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. The MAC is
HMAC-SHA256(secret, nonce || 0 || job_id || 0 || token || 0 || body), the body being the rank's
texts joined in its order, checked before the body is parsed, so an unauthenticated peer never gets
its JSON decoded (nor any text of it kept). ``token`` is a random value each participant process
draws once: only a connection presenting the same token may replace its registration. Nothing received is executed or unpickled, and every frame is parsed by ``loads``,
which refuses nesting and numbers beyond what facts need with a one-line ProtocolError.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Callable

from validator import safejson

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

PROTO = 1
KEEPALIVE_S = 10.0  # while the coordinator measures after the gather, every participant hears from it this often
KEEPALIVES = 64  # ... at most this many times (a participant's frame budget counts them)
MAX_HEADER = 64 << 10  # small messages (hello, ack, probe results)
MAX_FACTS_HEADER = 16 << 10  # the facts header: a job id, a MAC, a token, a listener address
MAX_FACTS = 4 << 20  # one node's facts are ~10 KB; generous for huge environments
MAX_VERDICT = 64 << 20
MAX_DEPTH = 32  # facts nest 5 levels
SHORT = 40  # characters of an untrusted string quoted in a message
TOKEN_MAX = 64  # characters of a participant's token (and of a net-check listener's)
LEN = struct.Struct(">I")


class ProtocolError(Exception):
    pass


def encode(msg: dict[str, Any]) -> bytes:
    body = json.dumps(msg, separators=(",", ":")).encode()
    return LEN.pack(len(body)) + body


def hello(job_id: str, nonce: str, deadline_in: float) -> bytes:
    """The hello frame, formatted directly: the coordinator sends one per connection."""
    job = json.encoder.encode_basestring_ascii(job_id)
    body = f'{{"type":"hello","proto":{PROTO},"job_id":{job},"nonce":"{nonce}","deadline_in":{deadline_in!r},"sections":1}}'
    return frame(body.encode())


def frame(body: bytes) -> bytes:
    return LEN.pack(len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    msg = loads(body)
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise ProtocolError("not a preflight message")
    return msg


def loads(body: bytes, shallow: Callable[[Any], bool] | None = None) -> Any:
    """JSON from an untrusted peer, through the one bounded reader (validator/safejson.py):
    nesting up to MAX_DEPTH, integers up to 40 digits, finite numbers only. Anything else is one
    ProtocolError line, never a RecursionError, OverflowError or ValueError. ``shallow``: see
    safejson.loads (the facts schema's check, which bounds the depth of what it accepts)."""
    try:
        return safejson.loads(body, "frame", max_bytes=MAX_VERDICT, max_depth=MAX_DEPTH, unit="frame", shallow=shallow)
    except safejson.JsonError as e:
        raise ProtocolError(printable(str(e), 120)) from None


def loads_many(texts: list[bytes], shallow: Callable[[Any], bool] | None = None) -> list[Any]:
    """Each of ``texts`` one JSON document, as ``loads`` reads one, in one pass (safejson.loads_many)."""
    try:
        return safejson.loads_many(
            texts, "frame", max_bytes=MAX_VERDICT, max_depth=MAX_DEPTH, unit="frame", shallow=shallow
        )
    except safejson.JsonError as e:
        raise ProtocolError(printable(str(e), 120)) from None


def short(value: object, limit: int = SHORT) -> str:
    """An untrusted value for a message: a string quoted (control characters escaped) and cut to
    ``limit`` characters, a number as it is, anything else by its type."""
    if isinstance(value, str):
        more = f"... ({len(value)} characters)" if len(value) > limit else ""
        return repr(value[:limit]) + more
    if value is None or isinstance(value, (bool, float)) or (isinstance(value, int) and value.bit_length() < 128):
        return repr(value)
    return f"a {type(value).__name__}"


def printable(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, control characters escaped, unquoted."""
    cut = text[:limit]
    return (cut if cut.isprintable() else repr(cut)[1:-1]) + ("..." if len(text) > limit else "")


def mac(secret: bytes | None, nonce: str, job_id: str, body: bytes, token: str = "") -> str:
    if not secret:
        return ""
    import hashlib
    import hmac  # only with a secret: OpenSSL's import costs every rank start-up time

    signed = b"\0".join(s.encode("utf-8", "surrogatepass") for s in (nonce, job_id, token)) + b"\0" + body
    return hmac.new(secret, signed, hashlib.sha256).hexdigest()


def verify(secret: bytes | None, nonce: str, job_id: str, body: bytes, tag: object, token: str = "") -> bool:
    if not secret:
        return True
    import hmac

    # bytes, not str: compare_digest refuses non-ASCII strings with a TypeError
    expected = mac(secret, nonce, job_id, body, token).encode()
    return isinstance(tag, str) and hmac.compare_digest(expected, tag.encode("utf-8", "surrogatepass"))


def sealed(body: bytes) -> bytes:
    """What a seal signs: the sealed frame's body, by its digest (computed once for a verdict
    every participant gets; each seal is then a MAC over a few bytes)."""
    import hashlib

    return b"verdict\0" + hashlib.sha256(body).digest()


def new_nonce() -> str:
    return os.urandom(16).hex()


def load_secret(path: str | None) -> bytes | None:
    """The shared secret: --secret-file, else VALIDATOR_SECRET. Never logged or collected."""
    if path:
        from validator.errors import UserError

        try:
            with open(path, "rb") as f:
                return f.read().strip() or None
        except OSError as e:
            raise UserError(f"cannot read secret file: {e.strerror}", path) from None
    value = os.environ.get("VALIDATOR_SECRET", "")
    return value.encode() if value else None


# --------------------------------------------------------------------------- blocking side (participants)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ProtocolError("connection closed")
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket, limit: int = MAX_HEADER) -> bytes:
    (size,) = LEN.unpack(recv_exact(sock, LEN.size))
    if size > limit:
        raise ProtocolError(f"frame of {size} bytes exceeds the {limit}-byte limit")
    return recv_exact(sock, size)


def recv_msg(sock: socket.socket, limit: int = MAX_HEADER) -> dict[str, Any]:
    return decode(recv_frame(sock, limit))
