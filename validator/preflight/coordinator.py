"""The coordinator: an asyncio server on the job's own rendezvous port that gathers every
participant's facts, decides once, sends everyone the same verdict, and releases the port.

It runs on a production node in front of a real job, so: frames are bounded, nothing waits past
the deadline, strangers (another job, a bad MAC, garbage, oversized or slow clients) are refused
without changing the verdict of the legitimate participants, and nothing received is executed.
Each connection is a small state machine on an asyncio Protocol (no task, no stream per
connection): 12,500 participants cost the coordinator about a second of CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from validator.facts.share import Shared
from validator.model import Facts
from validator.preflight import protocol as wire
from validator.preflight import refusals as rf
from validator.preflight import sections
from validator.preflight.connection import Arrival, Connection, ident
from validator.preflight.ports import bind as bind  # where callers have always found them
from validator.preflight.ports import bind_first as bind_first

if TYPE_CHECKING:
    from validator.cliopts import NetPairs
    from validator.preflight.plan import Plan

CLOSE_WAIT_S = 3.0  # how long we let clients close first after the verdict (TIME_WAIT on their side)
NET_ROUND_S = 15.0  # --net-check: how long one round of probes may take in all
FACTS_BUDGET = 16 << 20  # accepted facts bytes kept, plus FACTS_EACH per expected participant
FACTS_EACH = 64 << 10
QUIET_S = 0.5  # after arrivals stop this long, look for a failure no late arrival can fix
WAIT_LINE_S = 10.0  # how often the coordinator says what it is waiting for
CONFIRM_S = 10.0  # a proposed pass: every participant confirms within this long (a node leader's ranks in 3 s)
LINGER_S = 10.0  # a failure: late arrivals get it this long after the decision, at most
GO = wire.encode({"type": "go"})
T = TypeVar("T")
CLOSED = object()  # Coordinator.ask: the participant's connection had closed


RESCANS = 16  # processes restarted in place that may take a dead one's rank (each look is over all arrivals)
LIVE = ("registered", "probing", "resolving", "proposed", "ready")  # a participant's connection, still open


@dataclass
class Expect:
    """Who must arrive. Keyed: every key in ``keys`` (ranks or node ranks). Counted (c10d, where
    node ranks are assigned at rendezvous): ``maximum`` distinct participants, or ``minimum`` once
    ``last_call`` seconds have passed with that many present, as torchrun's elastic range does."""

    keys: set[Any] | None
    maximum: int
    minimum: int
    last_call: float = 0.0
    settle: float = 0.0  # with a door for late nodes (door.py): decide once arrivals pause this long


def expectation(p: Plan) -> Expect:
    """Who must arrive, from the plan: every rank or node rank (keyed), or a count (c10d)."""
    return Expect(set(range(p.expected)) if p.keyed else None, p.expected, p.minimum, p.last_call)


class Policy(Protocol):
    """What the caller decides during the gather (run.py's Gate): whether the verdict can no
    longer become a pass, and what to say while waiting."""

    def decisive(self, facts: list[Facts]) -> bool: ...

    def waiting(self, coordinator: Coordinator) -> None: ...

    def flooded(self, coordinator: Coordinator) -> None: ...


@dataclass
class Gathered:
    """What the gather phase produced; the caller turns it into a report."""

    arrivals: list[Arrival]
    rejected: rf.Refusals = field(default_factory=rf.Refusals)
    seconds: float = 0.0
    complete: bool = False
    flooded: bool = False  # strangers' connections still came at a flood's rate when the verdict was due
    present: set[Any] = field(default_factory=set)  # the arrivals' keys, counted as they came (register)


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic GC while the coordinator works: with 12,500 facts documents alive, each
    collection walks millions of objects (measured: 5,000 nodes went from 3.2 s to 0.6 s of checks).
    What it allocates is freed by reference counting; the collector runs again afterwards."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def raise_nofile() -> None:
    """One socket per participant: lift the soft open-file limit to the hard one."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Coordinator:
    def __init__(
        self,
        own: Facts,
        expect: Expect,
        key: Callable[[Facts], Any],
        job_id: str,
        secret: bytes | None,
        timeout: float,
        max_connections: int | None = None,
        own_listen: dict[str, Any] | None = None,
        net_check: bool = False,
        rdzv_job: bool = False,
    ) -> None:
        self.expect = expect
        self.rdzv_job = rdzv_job  # our job id is our launcher's rendezvous id alone (plan.rdzv_job)
        self.key = key
        self.job_id = job_id
        self.secret = secret
        self.deadline = time.monotonic() + timeout
        self.net_check = net_check
        self.own_id = ident(own, "")  # the coordinator's own registration: it has no token
        self.arrivals: dict[Any, Arrival] = {}  # by ident: a token, or the (host, pid) of one without
        self.by_process: dict[tuple[str, int], Any] = {}  # (host, pid) -> the ident last registered with them
        self.rescans = RESCANS  # looks, over all arrivals, for a dead holder of a rank a new process claims
        self.present: dict[Any, int] = {}  # key -> participants holding it (duplicates count twice)
        self.waiting = set(expect.keys or ())  # expected keys nobody holds yet (keyed)
        self.rejected = rf.Refusals()
        self.open: set[Connection] = set()
        self.gate = rf.Gate()  # connections that are not participants yet, their bodies in flight
        self.accepted = 0  # bytes of the facts in self.arrivals
        self.shared = Shared(across_hosts=False)  # per-rank mode: a node's ranks hold its common facts once
        self.sections = sections.Parsed()  # each distinct section text parsed once
        self.max_connections = max_connections or max(1024, 4 * expect.maximum + 64)
        self.complete = asyncio.Event()
        self.wake = asyncio.Event()  # the gather loop's: completion, timers, an arrival while idle
        self.watch = False
        self.changed = asyncio.Event()  # a late arrival got the verdict: the lingering loop looks again
        self.last_arrival = time.monotonic()
        self.minimum_at: float | None = None  # when `minimum` participants were first present
        self.decided = False
        self.early = False  # decided before everyone arrived: a failure no late arrival can fix
        self.closing = False
        self.verdict: bytes | None = None  # once decided: what late arrivals get
        self.brief: bytes | None = None  # its line alone, for those that asked for no more
        self.named: Callable[[Facts], bool] = lambda _facts: True  # whom the verdict names: they get all of it
        self.signed: dict[bytes, bytes] = {}  # with a secret: what a seal signs (protocol.sealed), per verdict
        self.served: set[Any] = set()  # keys that have the verdict
        self.served_n = 0  # participants that have it (a duplicate rank counts twice)
        self.server: asyncio.AbstractServer | None = None
        self.local_server: asyncio.AbstractServer | None = None
        self.port = 0
        self.register(Arrival(self.shared.add(own), None, own_listen))

    def same_launch(self, job_id: object, rdzv_job: bool) -> bool:
        """A job id that differs only because one side's is its rendezvous id (torchrun --rdzv-id,
        c10d) and the other has none (a static node): one job whose launches drift, which the
        checks name (RNK009) at once, not a stranger to refuse."""
        return isinstance(job_id, str) and ((rdzv_job and not self.job_id) or (self.rdzv_job and not job_id))

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def admits(self, size: int, old: Arrival | None) -> bool:
        """Room for one more participant's facts (or a bigger copy of one): memory stays bounded
        even when strangers who know the job id (and there is no secret) keep registering."""
        budget = FACTS_BUDGET + FACTS_EACH * self.expect.maximum
        more = old is None and len(self.arrivals) > self.max_connections  # ours, and one per connection
        return not more and self.accepted + size - (old.size if old else 0) <= budget

    def held(self, a: Arrival) -> Any:
        """What ``a`` holds of the expected: its rank or node rank (keyed), else itself (its token)."""
        k = self.key(a.facts)
        return k if self.expect.keys is not None else (k, a.token)

    def impostor(self, facts: Facts, token: str) -> bool:
        """Another token for the host, pid and rank of a registered participant whose connection is open: a forged
        or replayed frame, never a rank (a process restarted in place finds its predecessor's connection closed;
        ranks each pid 1 in containers of their own differ in their rank)."""
        a = self.arrivals.get(self.by_process.get((facts["host"], facts["pid"])))
        return (a is not None and a.token != token and self.key(a.facts) == self.key(facts)
                and a.conn is not None and a.conn.state in LIVE)  # fmt: skip

    def unregister(self, who: Any) -> None:
        old = self.arrivals.pop(who)
        if self.by_process.get(process := (old.facts["host"], old.facts["pid"])) == who:
            del self.by_process[process]
        self.accepted -= old.size
        k = self.held(old)
        self.present[k] -= 1
        if not self.present[k]:
            del self.present[k]
            if self.expect.keys is not None and k in self.expect.keys:
                self.waiting.add(k)

    def register(self, arrival: Arrival) -> None:
        """Count an arrival in O(1); the same process (its token) reconnecting replaces itself, and a process
        restarted in place (a new token, the same rank on the same host) replaces one whose connection closed."""
        who = ident(arrival.facts, arrival.token)
        if who in self.arrivals:
            self.unregister(who)
        elif self.expect.keys is not None and self.present.get(k := self.key(arrival.facts), 0) == 1 and self.rescans:
            self.rescans -= 1  # a restart is rare; a job whose every rank says RANK=0 must not make this quadratic
            host = arrival.facts["host"]
            gone = [w for w, a in self.arrivals.items() if a.conn is not None and a.conn.state == "closed"
                    and a.facts["host"] == host and self.key(a.facts) == k]  # fmt: skip
            for w in gone:
                self.unregister(w)
        self.accepted += arrival.size
        self.arrivals[who] = arrival
        self.by_process[(arrival.facts["host"], arrival.facts["pid"])] = who
        k = self.held(arrival)
        self.present[k] = self.present.get(k, 0) + 1
        self.waiting.discard(k)
        self.last_arrival = time.monotonic()
        e = self.expect
        if e.keys is None:
            if len(self.present) >= e.minimum and self.minimum_at is None:
                self.minimum_at = self.last_arrival
            if len(self.present) >= e.maximum:
                self.complete.set()
        elif not self.waiting:
            self.complete.set()
        if self.watch or self.complete.is_set():
            self.wake.set()

    def missing_count(self) -> int:
        return len(self.waiting) if self.expect.keys is not None else max(0, self.expect.maximum - len(self.present))

    def last_call_over(self) -> bool:
        """Elastic range: the minimum is present and the last call has passed (torchrun completes
        its rendezvous then, with whoever has joined), or, with a door for late nodes, arrivals
        have paused for ``settle``: a node that comes later is checked at the door (door.py)."""
        return self.minimum_at is not None and time.monotonic() >= self.decide_at()

    def decide_at(self) -> float:
        """When an elastic range's gather ends (once the minimum is present)."""
        assert self.minimum_at is not None
        e = self.expect
        end = self.minimum_at + e.last_call
        return min(end, max(self.minimum_at, self.last_arrival) + e.settle) if e.settle else end

    def registered(self) -> list[Connection]:
        """Connections of participants whose facts count and that are still open."""
        conns = (a.conn for a in self.arrivals.values() if a.conn is not None)  # a node leader's ranks share one
        return [c for c in dict.fromkeys(conns) if c.state in LIVE]

    def links(self) -> tuple[int, int]:
        """Connections the arrivals came over: (TCP, node-local Unix socket). With node-local
        aggregation each other node is one TCP connection, whatever its ranks."""
        conns = {a.conn for a in self.arrivals.values() if a.conn is not None}
        unix = sum(1 for c in conns if c.unix)
        return len(conns) - unix, unix

    async def gather(self, sock: socket.socket, policy: Policy, node: socket.socket | None = None) -> Gathered:
        """Serve until every expected participant has arrived, the deadline passes, or the policy
        finds a failure no late arrival can fix (looked for whenever arrivals pause for QUIET_S).
        ``node``: the node-local socket (local.py) where our own node's ranks meet us."""
        loop = asyncio.get_running_loop()
        self.port = int(sock.getsockname()[1])
        self.server = await loop.create_server(lambda: Connection(self), sock=sock, backlog=65535)
        if node is not None:
            node.setblocking(False)
            self.local_server = await loop.create_unix_server(lambda: Connection(self), sock=node)
        t0 = time.monotonic()
        next_line = t0 + WAIT_LINE_S
        looked_at = -1  # the number of arrivals when the policy last looked
        quiet = QUIET_S
        while not self.complete.is_set() and self.remaining() > 0 and not self.last_call_over():
            now = time.monotonic()
            wake = [self.deadline, next_line]
            if len(self.arrivals) != looked_at:
                wake.append(self.last_arrival + quiet)
            if self.minimum_at is not None:
                wake.append(self.decide_at())
            # timers, completion, and while idle the next arrival: no wake-up per arrival in a burst
            self.watch = len(self.arrivals) == looked_at
            self.wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.wake.wait(), max(0.0, min(wake) - now))
            now = time.monotonic()
            if now >= next_line and not self.complete.is_set():
                policy.waiting(self)
                next_line = now + WAIT_LINE_S
            if len(self.arrivals) != looked_at and now - self.last_arrival >= quiet and not self.complete.is_set():
                looked_at = len(self.arrivals)
                started = time.monotonic()
                if policy.decisive([a.facts for a in self.arrivals.values()]):
                    self.early = True
                    break
                quiet = max(QUIET_S, 2 * (time.monotonic() - started))  # checks at scale: look less often
        flooded = await self.outlast_flood(policy)
        self.decided = True
        arrivals = list(self.arrivals.values())
        complete = self.complete.is_set() or self.last_call_over()
        return Gathered(arrivals, self.rejected, time.monotonic() - t0, complete, flooded, set(self.present))

    async def outlast_flood(self, policy: Policy) -> bool:
        """Wait, at most FLOOD_WAIT_S and within the deadline, for a flood of strangers'
        connections to stop: the job's own store would meet it the moment the verdict lets the
        job start, and torch's TCPStore never serves after one. True if it has not stopped."""
        if self.rejected.flooding() and not self.early:  # an early verdict fails anyway: no wait
            policy.flooded(self)
            until = min(self.deadline, time.monotonic() + rf.FLOOD_WAIT_S)
            for _ in range(int(rf.FLOOD_WAIT_S / 0.1) + 1):  # bounded; each turn 0.1 s
                if not self.rejected.flooding() or time.monotonic() >= until:
                    break
                await asyncio.sleep(0.1)
        return self.rejected.flooding()

    def stop_accepting(self) -> None:
        """Stop accepting and drop whoever has not finished sending (slow, half-open, garbage);
        the port is free once the last client has closed."""
        self.closing = True
        for server in (self.server, self.local_server):
            if server is not None:
                server.close()
        for conn in list(self.open):
            if conn.state in ("header", "body"):
                conn.refuse("still sending at the deadline", tell=False)

    async def working(self, work: Awaitable[T]) -> T:
        """``work`` (the net check, the probes: rounds that may leave a participant out, each bounded by
        its own timeout) while telling every participant, each KEEPALIVE_S, that we are at it: one
        that hears nothing for VERDICT_GRACE_S past our deadline takes us for stalled (participant.py),
        and a node 20x slow took 46 s for its first probe, torch's import (tests/preflight/test_probes_gate.py)."""

        async def beat() -> None:
            for _ in range(wire.KEEPALIVES):
                await asyncio.sleep(wire.KEEPALIVE_S)
                for conn in self.registered():
                    conn.send({"type": "ack"})  # unsealed: nothing is done on it

        task = asyncio.create_task(beat())
        try:
            return await work
        finally:
            task.cancel()

    async def check_network(
        self, order: Callable[[Facts], Any], gpus_per_node: int | None, pairs: NetPairs = "rings"
    ) -> Any:
        """--net-check over the arrivals (validator/netcheck/): one node per host in rank order (each
        participant when the whole job runs on one host), with ``pairs`` all every pair of them
        (--net-check-pairs); returns a ``rounds.NetVerdict``."""
        from validator.facts.network import uses_nccl
        from validator.netcheck import rounds

        ranked, per_host = self.per_host(order)
        chosen = per_host if len(per_host) > 1 else ranked
        by_label = {str(i): a for i, a in enumerate(chosen)}
        nccl = uses_nccl([a.facts for a in ranked], gpus_per_node)
        nodes = rounds.nodes([a.facts for a in chosen], nccl, list(by_label))
        for n in nodes:
            listen = by_label[n.label].listen
            if listen is None:
                n.error = "no listener (the participant could not open one)"
            elif n.addr not in listen["addrs"]:
                n.error, n.bind = f"{n.addr} could not be bound on the node", True
            else:
                n.port, n.token = listen["port"], listen["token"]

        return await rounds.run(nodes, lambda plans: self.net_round(plans, by_label), pairs,
                                lambda ends: self.allreduce(ends, {n.label: n for n in nodes}, by_label))  # fmt: skip

    async def allreduce(self, pairs: list[tuple[str, str]], nodes: dict[str, Any], who: dict[str, Arrival]) -> Any:
        """The named pairs' all_reduce (netcheck/collective.py): rank 0 on each pair's first node (a
        child of its participant, netcheck/pairrun.py) answers with its store's port, then rank 1 on
        the second joins and measures. (first label, second label) -> rank 1's answer or why none."""
        from validator.netcheck import collective
        from validator.netcheck.pairrun import START_S
        from validator.netcheck.pairrun import run as run_pair
        from validator.netcheck.probe import TIMEOUT_S

        limit = collective.timeout(TIMEOUT_S)

        def answer(msg: Any, label: str) -> Any:
            if who[label].conn is None:
                return msg  # ours: pairrun's answer itself
            if isinstance(msg, dict) and msg.get("type") == "allreduced" and isinstance(msg.get("answer"), dict):
                return msg["answer"]
            return "the participant's connection closed" if msg is CLOSED else "no answer"

        serve = {a: {"type": "allreduce", "argv": collective.serve_argv(nodes[a], limit)} for a, _ in pairs}
        served = await self.ask(who, serve, lambda m: run_pair(m["argv"]), START_S + 5)
        out: dict[tuple[str, str], Any] = {}
        joins: dict[str, dict[str, Any]] = {}
        for a, b in pairs:
            argv = collective.join_argv(nodes[a], answer(served.get(a), a), nodes[b], limit)
            if isinstance(argv, str):
                out[(a, b)] = argv
            else:
                joins[b] = {"type": "allreduce", "argv": argv}
        if joins:
            joined = await self.ask(who, joins, lambda m: run_pair(m["argv"]), limit * 3 + 35)
            for a, b in pairs:
                if b in joins:
                    out[(a, b)] = answer(joined.get(b), b)
        return out

    def per_host(self, order: Callable[[Facts], Any]) -> tuple[list[Arrival], list[Arrival]]:
        """The arrivals in rank order, and the first of each host among them."""

        def rank_order(a: Arrival) -> tuple[int, int, str]:
            k = order(a.facts)
            return (0, k, "") if isinstance(k, int) else (1, 0, str(k))

        ranked = sorted(self.arrivals.values(), key=rank_order)
        return ranked, list({a.facts["host"]: a for a in reversed(ranked)}.values())[::-1]

    async def check_nodes(self, order: Callable[[Facts], Any], baselines: Any = None) -> Any:
        """--probes over the arrivals (validator/probes/): the compute and memory probes on one
        participant per host, every host at once, then the suspects again beside controls
        (probes/rounds.py), against the peers and the profile's ``baselines`` for the host's
        hardware; returns a ``rounds.Probed``. Our own node's probe runs here."""
        from validator.probes import rounds
        from validator.probes.local import TIMEOUT_S
        from validator.probes.local import run as run_probe

        by_host = {a.facts["host"]: a for a in self.per_host(order)[1]}

        async def probe_round(kind: rounds.Kind, hosts: list[str]) -> rounds.Answers:
            asked = {h: {"type": "nodeprobe", "kind": kind} for h in hosts}
            got = await self.ask(by_host, asked, lambda _msg: run_probe(kind), TIMEOUT_S + NET_ROUND_S)
            answers: rounds.Answers = {}
            for host, msg in got.items():
                if msg is CLOSED:
                    answers[host] = "the participant's connection closed before the probes"
                elif by_host[host].conn is None:  # ours: the probe's answer itself
                    answers[host] = msg if isinstance(msg, dict) else str(msg)[:300]
                else:
                    a = msg.get("answer") if isinstance(msg, dict) and msg.get("type") == "nodeprobed" else None
                    answers[host] = a if isinstance(a, dict) else str(a)[:300] if a else f"no {kind} probe answer"
            return answers

        hardware = {h: hw for h, a in by_host.items() if (hw := rounds.gpu_model(a.facts))}
        return await rounds.run(list(by_host), probe_round, baselines=baselines, hardware=hardware)

    async def net_round(self, plans: dict[str, list[dict[str, Any]]], who: dict[str, Arrival]) -> dict[str, Any]:
        """Hand out the targets (label -> targets; ``who``: label -> arrival), probe our own, collect
        everyone's rows (bounded by NET_ROUND_S): label -> rows, or why there are none."""
        from validator.netcheck.probe import TIMEOUT_S, probe

        asked = {label: {"type": "probe", "targets": targets} for label, targets in plans.items()}
        got = await self.ask(who, asked, lambda msg: probe(msg["targets"], TIMEOUT_S), NET_ROUND_S)
        results: dict[str, Any] = {}
        for label, msg in got.items():
            if msg is CLOSED:
                results[label] = "the participant's connection closed before the net check"
            elif msg is None:
                results[label] = f"no probe results within {NET_ROUND_S:g} s"
            else:  # ours: the rows themselves; a participant's: its frame, read as hostile
                results[label] = msg if who[label].conn is None else rf.netcheck_rows(msg)
        return results

    async def ask(
        self,
        who: dict[str, Arrival],
        requests: dict[str, dict[str, Any]],
        ours: Callable[[dict[str, Any]], Any],
        timeout: float,
    ) -> dict[str, Any]:
        """One request to each label's participant (``who``: label -> arrival), sealed like a verdict,
        and its answer frame, within ``timeout``; our own is answered by ``ours`` in a thread (a probe
        or a child process: the loop keeps serving). label -> the decoded answer (ours as ``ours``
        returned it), CLOSED when the connection had closed, None when nothing came in time (a late
        answer is dropped; the verdict still reaches it)."""
        loop = asyncio.get_running_loop()
        waiting: dict[str, asyncio.Future[Any]] = {}
        answers: dict[str, Any] = {}
        own = None
        for label, msg in requests.items():
            conn = who[label].conn
            if conn is None:
                own = label
            elif conn.state == "registered":
                conn.results = waiting[label] = loop.create_future()
                conn.state = "probing"
                conn.tell(wire.encode(msg))
            else:
                answers[label] = CLOSED
        if own is not None:
            answers[own] = await asyncio.to_thread(ours, requests[own])
        if waiting:
            await asyncio.wait(list(waiting.values()), timeout=timeout)
        for label, fut in waiting.items():
            answers[label] = fut.result() if fut.done() else None
            conn = who[label].conn
            if conn is not None and conn.state == "probing":
                conn.state = "registered"
        return answers

    def decide(self, verdict: bytes, brief: bytes | None, named: Callable[[Facts], bool] | None) -> None:
        """What every participant gets from now on, late arrivals too (Connection.got_facts)."""
        self.verdict, self.brief, self.named = verdict, brief, named or (lambda _facts: True)
        if self.secret:
            self.signed = {v: wire.sealed(v[wire.LEN.size :]) for v in (verdict, brief) if v is not None}

    async def confirm(
        self, verdict: bytes, brief: bytes | None = None, named: Callable[[Facts], bool] | None = None
    ) -> list[Arrival]:
        """The first of two phases of a pass: propose it (``verdict`` says ``"pending": true``) to
        every participant and wait, at most CONFIRM_S, until each has confirmed that it is still
        there (a node leader for each of its ranks). Returns the arrivals that did not: a rank that
        died or stopped after sending its facts. Nobody acts on the proposal: ``go`` follows when
        this returns nothing, a failing verdict (``deliver``) otherwise. No participant is
        accepted after the proposal."""
        self.decide(verdict, brief, named)
        named_conns = {
            a.conn for a in self.arrivals.values() if a.conn is not None and a.conn.brief and self.named(a.facts)
        }
        for conn in self.registered():
            conn.state = "proposed"
            self.send_verdict(conn, conn in named_conns)
        self.stop_accepting()
        until = time.monotonic() + CONFIRM_S
        for _ in range(100_000):  # bounded: each turn waits for a confirmation, a close or the window's end
            unconfirmed = [a for a in self.arrivals.values() if not confirmed(a)]
            undecided = any(a.conn is not None and a.conn.state == "proposed" for a in unconfirmed)
            if not undecided or time.monotonic() >= until:  # the rest answered, or closed, or were lost
                return unconfirmed
            self.changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait(), until - time.monotonic())
        return [a for a in self.arrivals.values() if not confirmed(a)]

    async def go(self) -> None:
        """Every participant confirmed: the second phase, then let the port go (``deliver``)."""
        signed = wire.sealed(GO[wire.LEN.size :]) if self.secret else None
        for conn in self.registered():
            conn.tell(GO, signed)
        await self.deliver(None, linger=False)

    async def deliver(
        self,
        verdict: bytes | None,
        brief: bytes | None = None,
        named: Callable[[Facts], bool] | None = None,
        *,
        linger: bool,
    ) -> None:
        """Send the verdict to every participant still connected: ``brief`` (its line alone) to
        those that asked for no more and whose ranks ``named`` does not name, the whole of it to
        the others. With ``linger`` (a failure), keep answering late arrivals with the same verdict
        until the deadline or until every expected participant has it, so every node exits with
        the same code. Then wait (bounded) until the clients close their side first, so TIME_WAIT
        lands on them, not on the job's port."""
        if verdict is not None:
            self.decide(verdict, brief, named)
            arrivals = self.arrivals.values()
            named_conns = {a.conn for a in arrivals if a.conn is not None and a.conn.brief and self.named(a.facts)}
            for conn in self.registered():
                self.send_verdict(conn, conn in named_conns)
            self.served.update(self.key(a.facts) for a in self.arrivals.values())
            self.served_n = len(self.arrivals)
        if linger and not self.closing:
            until = min(self.deadline, time.monotonic() + LINGER_S)
            if not self.all_served() and until - time.monotonic() >= 1.0:  # at the deadline: nothing to announce
                missing = self.expect.maximum - min(self.served_n, self.expect.maximum)
                sys.stderr.write(f"validator: the verdict is decided; {missing} participant(s) do not have it yet: "
                                 f"answering late arrivals for {max(0.0, until - time.monotonic()):.0f} s\n")  # fmt: skip
                sys.stderr.flush()
            while time.monotonic() < until and not self.all_served():
                self.changed.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), max(0.0, until - time.monotonic()))
        self.stop_accepting()
        conns = [c for c in self.open if c.state in ("registered", "ready")]
        if conns:
            await asyncio.wait([c.closed for c in conns], timeout=CLOSE_WAIT_S)
        for conn in list(self.open):
            if conn.transport is not None:
                conn.transport.abort()

    def send_verdict(self, conn: Connection, named: bool) -> None:
        """The verdict, its line alone where that is enough (``deliver``), sealed (Connection.tell)."""
        if self.verdict is not None:
            verdict = self.brief if conn.brief and self.brief is not None and not named else self.verdict
            conn.tell(verdict, self.signed.get(verdict))

    def all_served(self) -> bool:
        """As many participants as expected have the verdict (whatever they claimed), or every
        expected key has it."""
        e = self.expect
        return self.served_n >= e.maximum or (e.keys is not None and e.keys <= self.served)


def confirmed(a: Arrival) -> bool:
    """Whether a participant confirmed a proposed pass: ours always; over a connection that said
    "ready", unless its node leader listed it as lost."""
    c = a.conn
    return c is None or (c.state == "ready" and a.token not in c.lost)
