"""A participant: reach the coordinator before the deadline, send our facts, wait for the verdict.

Plain blocking sockets and the standard library: this runs once per rank on the launch path.
Every attempt is recorded, so a participant that never gets through can say what it tried and
what each name resolved to.
"""

from __future__ import annotations

import errno
import re
import socket
import struct
import time

from validator.agent.probe import resolve, route_src
from validator.facts.network import master_facts
from validator.preflight import protocol as wire
from validator.preflight import sections
from validator.preflight.sections import Pieces

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import Facts
    from validator.preflight.local import Group

VERDICT_GRACE_S = 30.0  # the coordinator's checks run after its deadline; allow for them at scale
ACTED_ON = (
    "verdict",
    "go",
    "probe",
    "nodeprobe",
    "allreduce",
    "resolve",
)  # what a rank does something with: sealed, with a secret (protocol.py)
GO_S = 15.0  # after confirming a proposed pass, the go (or the failure) comes within the coordinator's CONFIRM_S
LOST = "LOST: "  # the coordinator proposed a pass, then stopped answering: no retry can make it a pass
HELLO_S = 1.0  # our coordinator says hello as it accepts; silence this long is something else
FOREIGN_TRIES = 3  # something else answers on the port this many times in a row: it is not going away
# ... each time waiting twice as long for the hello (1, 2, 4 s): a coordinator on a loaded node (CI with
# 40 torch processes on 2 cores) was silent for over a second three times and taken for a stranger
HELLO_MAX_S = 8.0
ALLREDUCES_MAX = 32  # --net-check: all_reduce requests, two for each of netcheck/collective.py's MAX_PAIRS
PROBES_MAX = 8  # --net-check: targets a participant probes in one round (the planner gives it at most 3)
UNRESOLVED_S = 5.0  # outside Kubernetes a name that does not resolve for this long will not
SAMPLE_MAX = 16  # peer hostnames the coordinator asks one node to resolve (peers.py)
RESOLVE_S = 1.0  # all of those lookups together (an unanswered DNS query stalls 5 s)
ADDRS_MAX = 8  # addresses reported per name
NAME = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}"  # what a participant agrees to look up (compiled on first use)


class Attempts:
    """What a participant tried, for the message it prints when it never got through."""

    def __init__(self) -> None:
        self.resolved: dict[str, list[str]] = {}
        self.errors: dict[str, int] = {}  # "addr:port: what happened" -> count
        self.tries = 0
        self.resolved_once = False  # the coordinator's name resolved at least once
        self.foreign: str | None = None  # something that is not our coordinator answers on the port
        self.rejected: str | None = None
        self.gave_up: str | None = None  # why we stopped before the deadline
        self.refused = 0  # connections refused: nothing listens there (yet)
        self.silent = 0  # connections accepted without a hello: our coordinator stalled, or another program
        self.stalled = False  # the coordinator took our facts, then went silent until the deadline
        self.gone = False  # the coordinator took our facts, then closed the connection before any verdict

    def note(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1

    def summary(self) -> str:
        res = "; ".join(f"{n} -> {', '.join(a) or 'no address'}" for n, a in self.resolved.items())
        errs = "; ".join(f"{e} (x{c})" for e, c in list(self.errors.items())[-4:])
        return f"{self.tries} attempts; resolved {res or 'nothing'}; {errs or 'no error recorded'}"


class Result:
    __slots__ = ("attempts", "verdict")

    def __init__(self, verdict: dict[str, Any] | None, attempts: Attempts) -> None:
        self.verdict, self.attempts = verdict, attempts


def _connect(addr: str, port: int, timeout: float) -> socket.socket:
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((addr, port))
        if s.getsockname()[:2] == s.getpeername()[:2]:  # nobody listens, and the kernel picked the
            # port itself as our source port (a port in the ephemeral range): TCP's simultaneous
            # open connects the socket to itself, holding the port that rank 0 is about to bind.
            # Closed with a reset: a plain close would block the port for a minute (TIME_WAIT).
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            raise ConnectionRefusedError(errno.ECONNREFUSED, "connected to itself: nobody listens")
    except OSError:
        s.close()
        raise
    return s


def _rejected(msg: dict[str, Any]) -> str:
    """BUSY (at capacity, budget spent, too slow: worth a retry) or REJECTED, with the reason cut short."""
    reason = msg.get("reason")
    text = wire.printable(reason, 240) if isinstance(reason, str) else "no reason given"
    if msg.get("final") and not msg.get("retry"):  # a full job's door: no retry can seat this node
        return f"FINAL: {text}"
    return f"{'BUSY' if msg.get('retry') else 'REJECTED'}: {text}"


def _exchange(
    s: socket.socket,
    parts: Pieces,
    job_id: str,
    secret: bytes | None,
    fields: dict[str, Any],
    deadline: float,
    token: str,
    group: Group | None = None,
    hello_s: float = HELLO_S,
    sealed: bool = True,
) -> dict[str, Any] | str:
    """One session on a connected socket: verdict dict, or why it failed (str). A node leader
    (``group``) carries its members' facts in the same frame, each signed by its member. With a
    secret, a verdict counts only with its seal (``sealed``: from the coordinator; a node leader,
    our own user's process, hands its ranks the verdict it checked)."""
    s.settimeout(max(0.2, min(hello_s, deadline - time.monotonic())))
    try:
        hello = wire.recv_msg(s)
    except (ConnectionError, wire.ProtocolError) as e:
        if isinstance(e, ConnectionError) or str(e) == "connection closed":
            return f"closed before the hello ({e})"  # a coordinator at capacity, or closing: retry
        return f"FOREIGN: no preflight hello ({e})"
    except OSError as e:  # silence: another program, or our coordinator stalled (stopped, overloaded)
        return f"SILENT: no hello within {s.gettimeout() or 0:.0f} s ({e})"
    if hello.get("type") == "reject":  # e.g. at its connection limit: it is our coordinator, busy
        return _rejected(hello)
    if hello.get("type") != "hello" or hello.get("proto") != wire.PROTO:
        return "FOREIGN: not a preflight coordinator"
    _send_facts(s, hello, parts, job_id, secret, fields, token, group)
    nonce = str(hello.get("nonce", ""))
    deadline_in = hello.get("deadline_in")
    claim = min(3600.0, max(0.0, deadline_in if isinstance(deadline_in, (int, float)) else 0.0))
    # the gather: until the coordinator's deadline (it decides then), but never past our own --timeout, whatever
    # a listener on the port claims or however many keepalives it sends; once it acts (a probe, a verdict),
    # each frame gets the coordinator's time again
    gather_until = time.monotonic() + min(claim, max(0.0, deadline - time.monotonic())) + VERDICT_GRACE_S
    gathering = True
    pending: dict[str, Any] | None = None  # a pass proposed: it counts only with the go (two phases)
    # ack (a coordinator that ignores "quiet"), probe rounds (the first, then at most 3 alone in each of
    # the net check's 2 confirmations: netcheck/rounds.py), node probes (--probes: 3 rounds of each of
    # 2 kinds: probes/rounds.py), resolve, a leader's re-hellos, verdict, go; with --net-check-pairs
    # all, one probe round more at most per round of every pair (netcheck/sweep.py: below 128); the
    # all_reduce of what the net check named (two requests a pair: netcheck/collective.py); the
    # coordinator's keepalives while it measures (protocol.KEEPALIVES)
    for _ in range(32 + 128 + ALLREDUCES_MAX + wire.KEEPALIVES):
        if gathering:
            s.settimeout(max(0.05, gather_until - time.monotonic()))
        try:
            body = wire.recv_frame(s, wire.MAX_VERDICT)
        except (OSError, wire.ProtocolError) as e:
            if pending is not None:
                return f"{LOST}proposed a pass, then stopped answering before the go ({e})"
            if isinstance(e, TimeoutError):
                return f"STALLED: the coordinator took our facts, then stopped answering ({e})"
            if isinstance(e, ConnectionError) or str(e) == "connection closed":
                return f"GONE: the coordinator took our facts, then closed the connection ({e})"
            raise
        msg = wire.decode(body)
        kind = msg.get("type")
        if gathering and kind != "ack":
            gathering = False
            s.settimeout(claim + VERDICT_GRACE_S)
        if kind == "reject":
            return _rejected(msg)
        if kind in ACTED_ON and sealed and secret:
            timeout = s.gettimeout()
            s.settimeout(HELLO_S)  # sent right behind what it seals
            seal = wire.recv_msg(s)
            s.settimeout(timeout)
            if seal.get("type") != "seal" or not wire.verify(
                secret, nonce, job_id, wire.sealed(body), seal.get("mac"), token
            ):
                return f"FOREIGN: a {kind} without a valid seal (a coordinator that does not know the secret)"
        if kind == "verdict":
            if not well_formed(msg):
                return "FOREIGN: a malformed verdict"
            if msg.get("pending") is not True or pending is not None:
                return msg  # final: a failure, or (after a proposal) the failure that replaced it
            pending = msg  # a pass proposed: say we are still here (a leader: all its ranks), wait for the go
            lost = group.propose(body) if group is not None else []
            s.sendall(wire.encode({"type": "ready", "lost": lost}))
            s.settimeout(GO_S)
            continue
        if kind == "go" and pending is not None:
            return {**pending, "pending": False}
        if kind == "hello" and msg.get("proto") == wire.PROTO:  # our node leader retries upstream
            _send_facts(s, msg, parts, job_id, secret, fields, token, None)
            continue
        if kind == "resolve":
            s.sendall(wire.encode(resolved(msg)))
            continue
        if kind == "ack" or kind == "seal":  # a seal we do not check: our node's coordinator, trusted as our leader
            if kind == "ack" and group is not None:
                group.tell(body)  # a keepalive: our ranks wait on us as we wait on the coordinator
            continue
        if kind == "nodeprobe":  # --probes: this node's compute or memory probe, in a child process
            from validator.probes.local import run as run_probe

            s.sendall(wire.encode({"type": "nodeprobed", "answer": run_probe(str(msg.get("kind")))}))
            continue
        if kind == "allreduce":  # --net-check: one rank of a named pair's all_reduce, in a child process
            from validator.netcheck.pairrun import run as run_pair

            s.sendall(wire.encode({"type": "allreduced", "answer": run_pair(msg.get("argv"))}))
            continue
        if kind != "probe" or not isinstance(msg.get("targets"), list):
            return f"unexpected {msg.get('type')!r}"
        from validator.netcheck.probe import TIMEOUT_S, probe

        s.sendall(wire.encode({"type": "netcheck", "results": probe(msg["targets"][:PROBES_MAX], TIMEOUT_S)}))
    return "no verdict"


def well_formed(verdict: dict[str, Any]) -> bool:
    """A verdict this rank can act on: an exit code, the text to print, and (where present) the
    report, who it names and the port, of the types they have; anything else came from something
    that is not a coordinator."""
    code, who, port = verdict.get("exit_code"), verdict.get("named", {}), verdict.get("port", 0)
    if type(code) is not int or not 0 <= code <= 255 or not isinstance(verdict.get("text"), str):
        return False
    if not isinstance(verdict.get("report", {}), dict) or type(port) is not int or not 0 <= port < 65536:
        return False
    hosts = who.get("hosts") if isinstance(who, dict) else 0
    return (
        isinstance(who, dict)
        and isinstance(who.get("ranks", ""), str)
        and (hosts is None or (isinstance(hosts, list) and all(isinstance(h, str) for h in hosts)))
    )


def _send_facts(
    s: socket.socket,
    hello: dict[str, Any],
    parts: Pieces,
    job_id: str,
    secret: bytes | None,
    fields: dict[str, Any],
    token: str,
    group: Group | None,
) -> None:
    """The facts header and body, signed under the hello's nonce, in sections where the
    coordinator reads them; a leader adds its members' (sections.py)."""
    split = hello.get("sections") == 1
    if not split:
        parts = [("", sections.document(parts))]
    mine = sections.signed(parts)
    tag = wire.mac(secret, str(hello.get("nonce", "")), job_id, mine, token)
    ranks = [(tag, token, parts)] + (group.sign(hello, len(mine)) if group is not None else [])
    layout, body = sections.frame(ranks, split, leader=len(ranks) > 1)
    header: dict[str, Any] = {"type": "facts", "proto": wire.PROTO, "job_id": job_id, "mac": tag, **fields,
                              "token": token, "clock": time.time(), "quiet": True,  # quiet: no ack, one send less
                              **layout}  # fmt: skip
    if group is not None and not group.brief:  # one of its ranks prints or writes the whole report
        header["brief"] = False
    s.sendall(wire.encode(header) + wire.frame(body))


def resolved(msg: dict[str, Any]) -> dict[str, Any]:
    """The answer to {"type": "resolve", "names": [...]} (peers.py): what each name resolves to
    here, within RESOLVE_S for all of them together. Only hostname-like names are looked up."""
    raw = msg.get("names")
    names = (
        [n for n in raw[:SAMPLE_MAX] if isinstance(n, str) and re.fullmatch(NAME, n)] if isinstance(raw, list) else []
    )
    got = resolve(list(dict.fromkeys(names)), timeout=RESOLVE_S) if names else {}
    return {"type": "resolved", "results": {n: {"addrs": r.get("addrs", [])[:ADDRS_MAX], "error": r.get("error")}
                                            for n, r in got.items()}}  # fmt: skip


def refresh_master(facts: Facts, host: str, addrs: list[str]) -> bool:
    """Record what the coordinator's name resolves to now, if that differs from the facts taken
    at start: a pod created before the master's DNS record existed resolves it later, and the
    job will see the later answer. True if the facts changed."""
    master = facts["network"]["master"]
    if master is None or master["addr"] != host or master["resolved"] == addrs:
        return False
    try:
        routes = {addrs[0]: route_src(addrs[0])}
    except OSError:
        routes = {}
    new = master_facts(host, master["port"], {host: {"addrs": addrs}}, routes, None, facts["network"]["interfaces"])
    if new is not None:
        new["port_free"], new["port_owner"] = master["port_free"], master["port_owner"]
        facts["network"]["master"] = new
    return new is not None


def participate(
    facts: Facts,
    host: str,
    ports: list[int],
    job_id: str,
    secret: bytes | None,
    timeout: float,
    fields: dict[str, Any] | None = None,
    patient: bool = False,
    token: str | None = None,
    group: Group | None = None,
) -> Result:
    """Retry until the deadline; return the verdict, or what was tried. Gives up early on what
    will not heal: a rejection, something else answering on every port, and (unless ``patient``,
    as in a pod whose master's DNS record may appear late) a name that does not resolve. A node
    leader passes its ``group``: its members' facts travel in its frame. ``fields``: what this
    participant adds to its header (its net-check listener, "brief": the verdict's line is enough)."""
    start = time.monotonic()
    deadline = start + timeout
    parts = sections.pieces(facts)
    token = token or wire.new_nonce()  # ours alone: only a connection presenting it may replace our registration
    att = Attempts()
    delay = 0.05
    foreign_streak = spoke_streak = 0
    while time.monotonic() < deadline or not att.tries:  # one attempt at least: the report says what it met
        att.tries += 1
        res = resolve([host], timeout=min(2.0, max(0.1, deadline - time.monotonic())))[host]
        addrs = list(res.get("addrs", []))
        att.resolved[host] = addrs
        att.resolved_once = att.resolved_once or bool(addrs)
        if addrs and refresh_master(facts, host, addrs):
            parts = sections.pieces(facts)
        if not addrs:
            att.note(f"{host}: {res.get('error', 'does not resolve')}")
            if not patient and not att.resolved_once and time.monotonic() - start >= UNRESOLVED_S:
                att.gave_up = f"{host} did not resolve for {UNRESOLVED_S:.0f} s"
                break
        foreign = silent = 0
        for addr in addrs[:2]:
            reached = False
            for port in ports:
                outcome = _attempt(addr, port, parts, job_id, secret, fields or {}, deadline, att, token, group,
                                   min(HELLO_S * 2**foreign_streak, HELLO_MAX_S))  # fmt: skip
                if isinstance(outcome, dict):
                    outcome.setdefault("port", port)
                    return Result(outcome, att)
                reached = reached or outcome != "refused"
                if outcome.startswith(LOST):
                    att.gave_up = f"the coordinator {outcome[len(LOST) :]}"
                    return Result(None, att)
                if outcome.startswith("FINAL: "):
                    att.gave_up = outcome[len("FINAL: ") :]
                    return Result(None, att)
                if outcome.startswith("FOREIGN") or (outcome.startswith("REJECTED") and len(ports) > 1):
                    foreign += 1  # inside torchrun: maybe another job's, try the next candidate
                elif outcome.startswith("SILENT"):
                    silent += 1  # never conclusive: our own coordinator, stopped or overloaded, is silent too
                elif outcome.startswith("REJECTED"):
                    att.gave_up = "rejected by the coordinator"
                    return Result(None, att)
            if reached:
                break
        strange = foreign + silent >= len(ports) and bool(addrs)
        foreign_streak = foreign_streak + 1 if strange else 0  # each time waiting longer for a hello
        spoke_streak = spoke_streak + 1 if strange and not silent else 0
        if spoke_streak >= FOREIGN_TRIES:
            att.gave_up = "something other than the preflight coordinator answers on the port"
            break
        import random  # only a participant that retries needs it

        time.sleep(min(delay, max(0.0, deadline - time.monotonic())) * random.uniform(0.5, 1.0))
        delay = min(delay * 2, 1.0)
    return Result(None, att)


def _attempt(
    addr: str,
    port: int,
    parts: Pieces,
    job_id: str,
    secret: bytes | None,
    fields: dict[str, Any],
    deadline: float,
    att: Attempts,
    token: str,
    group: Group | None = None,
    hello_s: float = HELLO_S,
) -> dict[str, Any] | str:
    """One connection: the verdict, or what happened (recorded in ``att``)."""
    where = f"{addr}:{port}"
    try:
        s = _connect(addr, port, min(2.0, max(0.1, deadline - time.monotonic())))
    except OSError as e:
        att.note(f"{where}: {e.strerror or e}")
        att.refused += isinstance(e, ConnectionRefusedError)
        return "refused"
    try:
        outcome = _exchange(s, parts, job_id, secret, fields, deadline, token, group, hello_s)
    except (OSError, wire.ProtocolError) as e:
        outcome = f"{type(e).__name__}: {e}"
    finally:
        s.close()  # we close first: TIME_WAIT stays on our side, not on the job's port
    if isinstance(outcome, dict):
        return outcome
    if outcome.startswith("FOREIGN"):
        att.foreign = f"{where}: {outcome.split(': ', 1)[1]}"
    elif outcome.startswith("SILENT"):
        att.silent += 1
    elif outcome.startswith("STALLED"):
        att.stalled = True
    elif outcome.startswith("GONE"):
        att.gone = True
    elif outcome.startswith(("REJECTED", "BUSY", "FINAL")):
        att.rejected = f"{where}: {outcome.split(': ', 1)[1]}"
    att.note(f"{where}: {outcome}")
    return outcome
