"""The preflight wire protocol: length-prefixed JSON frames, bounded, optionally HMAC-signed.

    coordinator -> participant  hello   {"type": "hello", "proto": 1, "job_id", "nonce"}
    participant -> coordinator  header  {"type": "facts", "proto": 1, "job_id", "size", "mac", "listen"}
                                body    the facts document, ``size`` bytes of JSON
    coordinator -> participant  ack     {"type": "ack", "arrived": n, "expected": N}  or  reject {"reason"}
    coordinator -> participant  probe   {"type": "probe", "targets": [...]}           (--net-check only)
    participant -> coordinator  result  {"type": "netcheck", "results": [...]}         (--net-check only)
    coordinator -> participant  verdict {"type": "verdict", "exit_code", "report", "text"}

Each frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. The MAC is
HMAC-SHA256(secret, nonce || 0 || job_id || 0 || body), checked before the body is parsed, so an
unauthenticated peer never gets its JSON decoded. Nothing received is executed or unpickled.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from typing import Any

PROTO = 1
MAX_HEADER = 64 << 10  # header frames and small messages
MAX_FACTS = 4 << 20  # one node's facts are ~10 KB; generous for huge environments
MAX_VERDICT = 64 << 20
LEN = struct.Struct(">I")


class ProtocolError(Exception):
    pass


def encode(msg: dict[str, Any]) -> bytes:
    body = json.dumps(msg, separators=(",", ":")).encode()
    return LEN.pack(len(body)) + body


def frame(body: bytes) -> bytes:
    return LEN.pack(len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    try:
        msg = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"not JSON: {e}") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise ProtocolError("not a preflight message")
    return msg


def mac(secret: bytes | None, nonce: str, job_id: str, body: bytes) -> str:
    if not secret:
        return ""
    import hashlib
    import hmac  # only with a secret: OpenSSL's import costs every rank start-up time

    return hmac.new(secret, nonce.encode() + b"\0" + job_id.encode() + b"\0" + body, hashlib.sha256).hexdigest()


def verify(secret: bytes | None, nonce: str, job_id: str, body: bytes, tag: object) -> bool:
    if not secret:
        return True
    import hmac

    return isinstance(tag, str) and hmac.compare_digest(mac(secret, nonce, job_id, body), tag)


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


def recv_msg(sock: socket.socket, limit: int = MAX_HEADER) -> dict[str, Any]:
    (size,) = LEN.unpack(recv_exact(sock, LEN.size))
    if size > limit:
        raise ProtocolError(f"frame of {size} bytes exceeds the {limit}-byte limit")
    return decode(recv_exact(sock, size))
