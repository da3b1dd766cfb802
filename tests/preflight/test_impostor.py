"""Something other than the job's coordinator holds the job's port and answers like one (a
squatter on the master, or a man in the middle): a real `validator preflight` rank must never exec
its command on a verdict it cannot trust, and never print a traceback, whatever comes back.

- Any verdict that is not well formed (an exit code that is not one, no text, a report, a port or
  a list of named ranks and hosts of the wrong type) is refused: the rank reports the port's
  holder (PRE002) and exits 1.
- With a secret, a verdict counts only with its seal (protocol.py): a pass without one, with a seal
  made without the secret, or with a real seal recorded for another participant, is refused.
  The real coordinator's sealed verdict is accepted (the last test, and every test with a secret).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.preflight.conftest import preflight, ranks
from validator.model import Report
from validator.preflight import protocol as wire
from validator.preflight.participant import well_formed

pytestmark = [pytest.mark.root]

SECRET = "impostor-test-secret"
PASS: dict[str, Any] = {"type": "verdict", "exit_code": 0, "text": "preflight PASSED (forged)\n", "report": {},
                        "named": {"ranks": "", "hosts": []}}  # fmt: skip


class Impostor:
    """Holds ``port`` and plays coordinator: a hello, reads the facts (bounded), then sends
    ``answer(nonce, token)`` and closes. At most ``limit`` connections, for at most 30 s."""

    def __init__(self, port: int, answer: Any, limit: int = 20) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.answer, self.limit, self.served, self.stop = answer, limit, 0, threading.Event()
        self.replies: list[str] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        until = time.monotonic() + 30
        while not self.stop.is_set() and self.served < self.limit and time.monotonic() < until:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            with c:
                self.served += 1
                nonce = wire.new_nonce()
                c.settimeout(5)
                try:
                    c.sendall(wire.hello("job", nonce, 2.0))
                    header = wire.recv_msg(c, wire.MAX_FACTS_HEADER)
                    wire.recv_exact(c, wire.LEN.size + int(header["size"]))
                    c.sendall(self.answer(nonce, str(header.get("token"))))
                    self.replies.append(
                        str(wire.recv_msg(c, wire.MAX_VERDICT).get("type"))
                    )  # what it answers, if anything
                except (OSError, wire.ProtocolError, KeyError, ValueError):
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.sock.close()


def seal(secret: str, nonce: str, token: str, verdict: bytes) -> bytes:
    mac = wire.mac(secret.encode(), nonce, "job", wire.sealed(verdict[wire.LEN.size :]), token)
    return wire.encode({"type": "seal", "mac": mac})


def rank1(
    tmp_path: Path, port: int, answer: Any, replies: list[str] | None = None, **env: str
) -> tuple[int, str, bool]:
    """Rank 1 of a 2-rank job, its rank 0 never coming: (exit code, stderr, whether it ran its
    command); what it answered the impostor goes to ``replies``."""
    marker = tmp_path / "ran"
    impostor = Impostor(port, answer)
    try:
        (run,) = preflight(tmp_path, ranks(2, port, **env)[1:], "--timeout", "8", "--job-id", "job",
                           command=["touch", str(marker)], limit=60)  # fmt: skip
    finally:
        impostor.close()
    assert impostor.served >= 1, "the rank never reached the impostor"
    if replies is not None:
        replies += impostor.replies
    return run.rc, run.err, marker.exists()


MALFORMED = {
    "no exit code": {"type": "verdict", "text": "x"},
    "exit code a string": {**PASS, "exit_code": "0"},
    "exit code a bool": {**PASS, "exit_code": False},
    "exit code out of range": {**PASS, "exit_code": 256},
    "no text": {k: v for k, v in PASS.items() if k != "text"},
    "report a list": {**PASS, "report": []},
    "port a string": {**PASS, "port": "29500"},
    "named hosts a number": {**PASS, "named": {"hosts": 5}},
    "named ranks a list": {**PASS, "named": {"ranks": [0]}},
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_verdict_is_refused_without_a_traceback(tmp_path: Path, port: int, case: str) -> None:
    frame = wire.encode(MALFORMED[case])
    rc, err, ran = rank1(tmp_path, port, lambda nonce, token: frame)
    assert "Traceback" not in err
    assert not ran and rc == 1, err[-2000:]
    assert "PRE002" in err and "a malformed verdict" in err, err[-2000:]


def test_named_ranks_that_are_not_a_rank_list_name_nobody(tmp_path: Path, port: int) -> None:
    """Well formed, but the ranks are no rank list (or far too many): the verdict stands (no
    secret: nothing to authenticate it with), and reading it raises nothing."""
    report = Report([], participants=2, hosts=["h"]).to_json()  # --output checks it against the schema
    frame = wire.encode({**PASS, "report": report, "named": {"ranks": "0-99999999999,x"}})
    rc, err, ran = rank1(tmp_path, port, lambda nonce, token: frame)
    assert "Traceback" not in err and rc == 0 and ran, err[-2000:]


FORGED = {
    "no seal": lambda nonce, token, v: v,
    "a seal without the secret": lambda nonce, token, v: v + seal("guessed", nonce, token, v),
    "a real seal for another participant": lambda nonce, token, v: v + seal(SECRET, nonce, "another-token", v),
    "a real seal for another verdict": lambda nonce, token, v: v + seal(SECRET, nonce, token, wire.encode(PASS | {"exit_code": 1})),
    "something else after the verdict": lambda nonce, token, v: v + wire.encode({"type": "ack"}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(FORGED))
def test_with_a_secret_a_verdict_without_its_seal_never_runs_the_command(tmp_path: Path, port: int, case: str) -> None:
    verdict = wire.encode(PASS)
    rc, err, ran = rank1(
        tmp_path, port, lambda nonce, token: FORGED[case](nonce, token, verdict), VALIDATOR_SECRET=SECRET
    )
    assert "Traceback" not in err
    assert not ran and rc == 1, err[-2000:]


REQUESTS = {
    "probe": {"type": "probe", "targets": [{"label": "x", "addr": "127.0.0.1", "port": 9, "token": "t"}]},
    "resolve": {"type": "resolve", "names": ["localhost"]},
}


@pytest.mark.parametrize("kind", list(REQUESTS))
@pytest.mark.parametrize("secret", [None, SECRET])
def test_with_a_secret_an_unsealed_probe_or_resolve_request_is_not_acted_on(
    tmp_path: Path, port: int, kind: str, secret: str | None
) -> None:
    """Without a secret the rank answers the request (nothing can tell it from its coordinator);
    with one, a request without its seal ends the session: no probe, no lookup, no answer."""
    frame = wire.encode(REQUESTS[kind])
    replies: list[str] = []
    env = {"VALIDATOR_SECRET": secret} if secret else {}
    rc, err, ran = rank1(tmp_path, port, lambda nonce, token: frame, replies, **env)
    assert "Traceback" not in err and not ran and rc == 1, err[-2000:]
    answer = {"probe": "netcheck", "resolve": "resolved"}[kind]
    if secret:
        assert answer not in replies, replies
    else:
        assert answer in replies, replies


def test_with_a_secret_the_coordinators_sealed_verdict_runs_the_command(tmp_path: Path, port: int) -> None:
    """The same rank, its real coordinator beside it (rank 0), both with the secret: sealed, it runs."""
    marker = tmp_path / "ran"
    runs = preflight(tmp_path, ranks(2, port, VALIDATOR_SECRET=SECRET), "--timeout", "30", "--job-id", "job",
                     command=["touch", str(marker)])  # fmt: skip
    assert [r.rc for r in runs] == [0, 0], [r.err[-1500:] for r in runs]
    assert marker.exists() and all("Traceback" not in r.err for r in runs)


def test_an_impostor_seal_cannot_be_made_from_a_real_one() -> None:
    """The seal binds the secret, the verdict's bytes and the participant's token."""
    v = wire.encode(PASS)
    real = json.loads(seal(SECRET, "n", "t", v)[wire.LEN.size :])["mac"]
    signed = wire.sealed(v[wire.LEN.size :])
    assert wire.verify(SECRET.encode(), "n", "job", signed, real, "t")
    assert not wire.verify(SECRET.encode(), "n", "job", signed, real, "t2")
    assert not wire.verify(b"other", "n", "job", signed, real, "t")
    other = wire.sealed(wire.encode(PASS | {"exit_code": 1})[wire.LEN.size :])
    assert not wire.verify(SECRET.encode(), "n", "job", other, real, "t")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
FIELDS = st.sampled_from(["type", "exit_code", "text", "report", "named", "port", "hosts", "ranks"])


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(FIELDS, JSON, max_size=7), st.dictionaries(FIELDS, JSON, max_size=3))
def test_any_verdict_is_judged_without_raising_and_a_well_formed_one_can_be_read(
    verdict: dict[str, Any], named: dict[str, Any]
) -> None:
    from validator.preflight.finish import named as is_named

    verdict = {**verdict, "type": "verdict"}
    if named:
        verdict["named"] = named
    if well_formed(verdict):
        code = int(verdict["exit_code"])
        assert 0 <= code <= 255 and isinstance(verdict["text"], str)
        facts: Any = {"host": "h", "launch": {"rank": 1}}
        assert is_named(verdict, facts) in (True, False)


class Squatter(Impostor):
    """An Impostor that says a valid hello claiming a deadline an hour away, takes the facts, then ``mode``:
    "silent" (says nothing more), "acks" (an unsealed keepalive every second), "close" (closes the connection).
    Bounded: at most 60 s, every connection closed on close()."""

    def __init__(self, port: int, mode: str) -> None:
        self.mode = mode  # before the thread starts
        super().__init__(port, None, limit=1000)

    def serve(self) -> None:
        until = time.monotonic() + 60
        while not self.stop.is_set() and time.monotonic() < until:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            with c:
                self.served += 1
                c.settimeout(5)
                try:
                    c.sendall(wire.hello("job", wire.new_nonce(), 3600.0))
                    header = wire.recv_msg(c, wire.MAX_FACTS_HEADER)
                    wire.recv_exact(c, wire.LEN.size + int(header["size"]))
                    while self.mode != "close" and not self.stop.wait(1.0) and time.monotonic() < until:
                        if self.mode == "acks":
                            c.sendall(wire.encode({"type": "ack"}))
                except (OSError, wire.ProtocolError, KeyError, ValueError):
                    pass


@pytest.mark.parametrize("mode", ["silent", "acks", "close"])
def test_a_squatter_that_claims_an_hour_holds_a_rank_no_longer_than_its_timeout(
    tmp_path: Path, port: int, mode: str
) -> None:
    """Something on the job's port (a stalled coordinator of an earlier run, a squatter) says a valid hello with a
    deadline an hour away: the rank waited that hour (each keepalive restarted the wait, with a secret too). It
    gives up at its own --timeout and the coordinator's grace for its checks (30 s), and says what it met."""
    squatter = Squatter(port, mode)
    t0 = time.monotonic()
    try:
        (run,) = preflight(tmp_path, ranks(2, port, VALIDATOR_SECRET=SECRET)[1:], "--timeout", "3", "--job-id", "job",
                           command=["true"], limit=90)  # fmt: skip
    finally:
        squatter.close()
    took = time.monotonic() - t0
    assert squatter.served >= 1 and run.rc == 1 and "Traceback" not in run.err, run.err[-2000:]
    assert took < 3 + 30 + 15, took  # its --timeout and the grace, not the squatter's hour
    said = "closed the connection before any verdict" if mode == "close" else "stopped answering"
    assert "PRE001" in run.err and said in run.err, run.err[-2000:]
