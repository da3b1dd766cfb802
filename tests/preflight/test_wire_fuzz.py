"""Property tests over the preflight wire (issue 10, item 6): the bounded JSON reader, and a live
coordinator (in this process, on loopback, with a secret) fed random and mutated real frames.
Nothing may escape as an exception, every connection ends, and the job's own registration stays."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.harness.hostile import Live
from tests.preflight.conftest import base_env, ranks
from validator import pipeline
from validator.preflight import protocol as wire
from validator.preflight import sections

SECRET = b"fuzz-secret"
FACTS = pipeline.probe_local(environ=base_env(**ranks(2, 1)[1]), port_check=False)
FACTS["pid"] += 1  # rank 1 is another process than the coordinator (both are probed in this one)
BODY = json.dumps(FACTS, separators=(",", ":")).encode()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30,
)  # fmt: skip

# Token-level mutations that broke the parser on main, spliced into real frames.
NASTY = [b"[" * 5000, b"{" * 3000, b"Infinity", b"-Infinity", b"NaN", b"1e999", b"9" * 5000, b"\xff\xfe",
         b'"\\ud800"', b"\x00", b"]", b'"', b"\\", b",", b"-", b"0.", b"1e", b"true"]  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["flip", "cut", "splice", "nasty"]))
        if op == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del data[at : at + draw(st.integers(1, 64))]
        elif op == "splice":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        else:
            data[at:at] = draw(st.sampled_from(NASTY))
    return bytes(data)


@given(st.one_of(st.binary(max_size=512), mutated(BODY), mutated(wire.encode({"type": "hello", "nonce": "x"}))))
@settings(max_examples=300, deadline=None, derandomize=True)
def test_loads_raises_only_protocol_error(data: bytes) -> None:
    try:
        wire.decode(data)
    except wire.ProtocolError as e:
        assert "\n" not in str(e) and len(str(e)) < 200, "one short line"


@given(json_values)
@settings(max_examples=200, deadline=None, derandomize=True)
def test_loads_reads_what_facts_can_hold(value: Any) -> None:
    assert wire.loads(json.dumps(value).encode()) == value


def test_loads_refuses_what_facts_never_need() -> None:
    for text, why in [(b"[" * 100_000 + b"]" * 100_000, "nested more than"), (b"[" * 40 + b"]" * 40, "nested more than"),
                      (b'{"pid": Infinity}', "Infinity is not"), (b"[1e999]", "out of range"),
                      (b"9" * 5000, "integer of 5,000 digits"), (b'{"a": NaN}', "NaN is not")]:  # fmt: skip
        with pytest.raises(wire.ProtocolError, match=why):
            wire.loads(text)


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    own = pipeline.probe_local(environ=base_env(**ranks(2, 1)[0]), port_check=False)
    srv = Live(own, {0, 1, 2}, SECRET)
    yield srv
    srv.close()


def exchange(port: int, build: Any) -> list[dict[str, Any]]:
    """Connect, let ``build(hello)`` make the bytes, send them, half-close, read until the end."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        hello = wire.recv_msg(s)
        try:
            s.sendall(build(hello))
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # refused mid-send
        got = []
        while True:
            try:
                got.append(wire.recv_msg(s, wire.MAX_VERDICT))
            except wire.ProtocolError as e:
                assert "closed" in str(e), e
                return got
            except ConnectionResetError:
                return got


@given(
    how=st.sampled_from(["raw", "header", "body"]),
    raw=mutated(wire.encode({"type": "facts", "proto": 1, "job_id": "", "size": len(BODY), "mac": ""}) + wire.frame(BODY)),
    fields=st.dictionaries(st.sampled_from(["type", "proto", "job_id", "size", "mac", "listen", "token"]), json_values, max_size=3),
    body=mutated(BODY),
    sign=st.booleans(),
)  # fmt: skip
@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_live_coordinator_survives_mutated_frames(
    live: Live, how: str, raw: bytes, fields: dict[str, Any], body: bytes, sign: bool
) -> None:
    def build(hello: dict[str, Any]) -> bytes:
        if how == "raw":
            return raw
        data = body if how == "body" else BODY
        mac = wire.mac(SECRET, str(hello["nonce"]), "", data, "t") if sign else "0" * 64
        header: dict[str, Any] = {
            "type": "facts",
            "proto": 1,
            "job_id": "",
            "size": len(data),
            "mac": mac,
            "token": "t",
        }
        if how == "header":
            header.update(fields)
        return wire.encode(header) + wire.frame(data)

    replies = exchange(live.port, build)  # returns: every connection ends once we stop sending
    assert all(r.get("type") in ("ack", "reject") for r in replies), replies
    assert live.errors == [], live.errors
    c = live.c
    assert c is not None and c.arrivals[c.own_id].conn is None, "the coordinator's own registration stays"
    for _ in range(200):  # the coordinator's thread may not have run connection_lost yet (bounded wait)
        if not (c.gate.in_flight or c.gate.bodies or c.gate.silent):
            break
        time.sleep(0.01)
    assert c.gate.in_flight == 0 and not c.gate.bodies and not c.gate.silent, "nothing held once the connection ended"


PIECES = sections.pieces(FACTS)
SIZES, (REFS,), CHUNKED = sections.layout([PIECES])
refs = st.lists(
    st.tuples(st.sampled_from(sorted(sections.NAMES)) | st.text(max_size=8), st.integers(-2, 12)), max_size=12
)
layout_fields = st.fixed_dictionaries(
    {},
    optional={
        "chunks": st.lists(st.integers(-5, 6000), max_size=12) | json_values,
        "sections": refs.map(lambda rs: [list(r) for r in rs]) | json_values,
        "ranks": st.lists(st.fixed_dictionaries({"mac": st.just("x"), "token": st.text(max_size=3),
                                                 "sections": refs.map(lambda rs: [list(r) for r in rs])}), max_size=3)
        | json_values,
        "size": st.integers(-1, 10**7) | json_values,
    },
)  # fmt: skip


@given(how=st.sampled_from(["header", "body", "both"]), fields=layout_fields, body=mutated(CHUNKED), sign=st.booleans())
@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_live_coordinator_survives_mutated_sectioned_frames(
    live: Live, how: str, fields: dict[str, Any], body: bytes, sign: bool
) -> None:
    """The layout in sections (validator/preflight/sections.py): chunk sizes, section references
    and a leader's ranks drawn at random, over a mutated body; each connection ends in an ack
    or a reject, and nothing is held once it ends."""

    def build(hello: dict[str, Any]) -> bytes:
        data = CHUNKED if how == "header" else body
        signed = sections.signed(PIECES) if how == "header" else data
        mac = wire.mac(SECRET, str(hello["nonce"]), "", signed, "t") if sign else "0" * 64
        header: dict[str, Any] = {"type": "facts", "proto": 1, "job_id": "", "size": len(data), "mac": mac,
                                  "token": "t", "chunks": SIZES, "sections": REFS}  # fmt: skip
        if how != "body":
            header.update(fields)
        return wire.encode(header) + wire.frame(data)

    replies = exchange(live.port, build)
    assert all(r.get("type") in ("ack", "reject") for r in replies), replies
    assert live.errors == [], live.errors
    c = live.c
    assert c is not None and c.arrivals[c.own_id].conn is None, "the coordinator's own registration stays"
    for _ in range(200):
        if not (c.gate.in_flight or c.gate.bodies or c.gate.silent):
            break
        time.sleep(0.01)
    assert c.gate.in_flight == 0 and not c.gate.bodies and not c.gate.silent, "nothing held once the connection ended"
    assert c.sections.bytes <= c.sections.KEPT and all(n <= c.sections.KEEP for n in c.sections.count.values())
