"""The door: where the late nodes of an elastic range are checked after the pass.

An elastic torchrun (``--nnodes=MIN:MAX``, c10d) completes its rendezvous once MIN nodes have joined
and its last call (``last_call_timeout``, 30 s) has passed, admitting whoever joined meanwhile. A
coordinator that waited the same last call before its verdict made the job pay it twice. So the
coordinator decides once MIN nodes are present and arrivals pause for SETTLE_S, and the nodes pass
and exec torchrun, which opens its own last call. The job's port is then torchrun's store, so a node
that comes later meets, one port up (``Plan.door``), this door: a detached process started as the
coordinator execs the job, serving for the last call plus MARGIN_S (less if the job ends first:
it holds the job's stderr, which a pipeline may be reading). It checks each late node with
the same checks against the nodes that started (their facts, as the pass saw them) and the late
nodes before it, and gives it the same two-phase verdict: a pass lets it exec torchrun, which then
joins the last call; a failure keeps it out (it exits 1), and the job goes on without it.

Participants look for the coordinator on the job's port first, then on the door (``Plan.candidates``).
The door's socket is bound before the gather (so a busy port falls back to waiting the whole last call)
but listens only here: until then a participant trying it is refused at once, not left waiting.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time

from validator.preflight.plan import Options, Plan

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import Facts
    from validator.profiles import Profile

SETTLE_S = 1.0  # an elastic range with a door: decide once MIN are present and arrivals pause this long
MARGIN_S = 10.0  # the door stays open this much longer than the last call (torchrun's starts after ours)
FULL_S = 30.0  # a full job's door turns nodes away this long: torchrun has its store on the job's port by then


class Door:
    """The door's socket, bound (not listening) while the coordinator gathers."""

    def __init__(self, p: Plan) -> None:
        self.sock: socket.socket | None = None
        self.ranged = p.minimum < p.expected
        if p.door is not None:
            from validator.preflight.ports import bound

            self.sock = bound(p.door)
        self.admitted: list[Facts] = []  # the nodes the pass let start (coordinate sets them)

    @property
    def settle(self) -> float:
        return SETTLE_S if self.sock is not None and self.ranged else 0.0

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def open(self, opts: Options, p: Plan) -> None:
        """After a pass: start the door (detached: it outlives the exec). With room for more nodes, late ones are
        checked there; with all of them, a node that comes is turned away there (one too many: started twice, or
        listed in excess), instead of taking the job's port in the moment before torchrun binds it."""
        sock, self.sock = self.sock, None
        if sock is None:
            return
        try:
            if not self.admitted:
                return
            full = len(self.admitted) >= p.expected
            window = FULL_S if full else p.last_call + MARGIN_S
            state = {"opts": opts._asdict(), "plan": p._asdict(), "admitted": self.admitted, "window": window,
                     "job": os.getpid()}  # fmt: skip
            proc = subprocess.Popen([sys.executable, "-m", "validator.preflight.door", str(sock.fileno())],
                                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, pass_fds=(sock.fileno(),))  # fmt: skip
            proc.communicate(json.dumps(state).encode(), timeout=30)  # it forks and returns at once
            if not full:
                sys.stderr.write(f"validator: {len(self.admitted)} of {p.minimum}-{p.expected} nodes start now; a node "
                                 f"that comes within {window:.0f} s is checked against them on port {p.door} and joins "
                                 "torchrun's last call\n")  # fmt: skip
        except (OSError, subprocess.SubprocessError) as e:
            sys.stderr.write(f"validator: warning: no door for late nodes ({e}): they will not be checked\n")
        finally:
            sock.close()


def listening(port: int) -> bool:
    """Whether a door listens on ``port`` here: something listens (it cannot be bound; a door still bound
    without listening, during the gather, can) and says what a door says first (a preflight hello, or a
    rejection), within a second. Another program on the port is no door (red-teamed: a listener one port above
    the job's kept the master of an elastic job from ever coordinating)."""
    from validator.preflight import protocol as wire
    from validator.preflight.ports import bound

    sock = bound(port)
    if sock is not None:
        sock.close()
        return False
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.settimeout(1.0)
            first = wire.recv_msg(s)
    except (OSError, wire.ProtocolError, ValueError):
        return False
    return first.get("type") in ("hello", "reject") and first.get("proto", wire.PROTO) == wire.PROTO


def running(pid: int) -> bool:
    """Whether the job (this pid, which the coordinator exec'd into) still runs: a zombie does not.
    The door ends with it, so a pipeline reading the job's stderr is not held open by the door."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


async def guarded(work: Any, pid: int) -> None:
    """Run the door's rounds while the job runs (polled every 0.5 s, bounded by the window)."""
    import asyncio

    task = asyncio.ensure_future(work)
    while not task.done():
        await asyncio.wait([task], timeout=0.5)
        if not task.done() and not running(pid):
            task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def state_from(doc: dict[str, Any]) -> tuple[Options, Plan, list[Facts], float]:
    """What the coordinator handed over (our own parent: trusted, but checked for shape)."""
    from validator.severity import Severity

    o = dict(doc["opts"])
    o["fail_on"] = None if o["fail_on"] is None else Severity(int(o["fail_on"]))
    return Options(**o), Plan(**doc["plan"]), list(doc["admitted"]), float(doc["window"])


async def serve(sock: socket.socket, opts: Options, p: Plan, admitted: list[Facts], window: float) -> None:
    """Rounds until the window ends or MAX nodes are in: each gathers late nodes (deciding once
    they pause for SETTLE_S), checks them with those already in, and sends them the verdict."""
    from validator import pipeline
    from validator.preflight import coordinator as coord
    from validator.preflight.connection import Arrival
    from validator.preflight.finish import stages
    from validator.preflight.gate import Gate
    from validator.preflight.plan import key, rdzv_job
    from validator.preflight.protocol import load_secret
    from validator.preflight.verdict import codes, render, vanished, verdicts

    profile: Profile | None = None
    if opts.profile:
        from validator.profiles import load_profile

        profile = load_profile(opts.profile)
    secret = load_secret(opts.secret_file)
    end = time.monotonic() + window

    class Quiet(Gate):
        def waiting(self, c: coord.Coordinator) -> None:
            """Said once as the door opened: no "waiting for ..." line in the job's stderr every 10 s."""

    gate = Quiet(opts, p, profile)
    if len(admitted) >= p.expected:
        await turn_away(sock, p, admitted, end)
        return
    for _ in range(p.expected):  # bounded: every round admits or turns away a late node, or ends
        left = end - time.monotonic()
        if left <= 0 or len(admitted) >= p.expected:
            return
        expect = coord.Expect(None, p.expected, len(admitted) + 1, left, SETTLE_S)
        c = coord.Coordinator(admitted[0], expect, key(p), p.job_id, secret, left, rdzv_job=rdzv_job(opts, admitted[0]))
        for f in admitted[1:]:
            c.register(Arrival(c.shared.add(f), None, None))
        gathered = await c.gather(sock.dup(), gate)
        late = [a for a in gathered.arrivals if a.conn is not None]
        if not late:
            c.stop_accepting()
            return
        facts = [a.facts for a in gathered.arrivals]
        report = pipeline.check(facts, profile, codes(opts), context="preflight", found=gate.findings(facts),
                                title=f"cluster-validator preflight, late node(s) ({p.host}:{p.door}, job "
                                      f"{p.job_id or 'unnamed'})")  # fmt: skip
        code = report.exit_code(opts.fail_on, opts.allow_incomplete)
        note = [f"late: checked against the {len(admitted)} node(s) that started"]
        text = render(report, code, facts, p, gathered.seconds, note)
        doc = report.to_json()
        hosts = ", ".join(sorted({str(a.facts["host"]) for a in late}))
        if code == 0:
            lost = await c.confirm(*verdicts(report, doc, code, text, p.port, pending=True, stages=stages(opts)))
            if not lost:
                await c.go()
                admitted += [a.facts for a in late]
                sys.stderr.write(f"validator: late node(s) {hosts} checked and admitted ({len(admitted)} of "
                                 f"{p.minimum}-{p.expected})\n")  # fmt: skip
                continue
            report.findings = [vanished(lost, p), *report.findings]
            code = report.exit_code(opts.fail_on, opts.allow_incomplete)
            text, doc = render(report, code, facts, p, gathered.seconds, note), report.to_json()
        await c.deliver(*verdicts(report, doc, code, text, p.port), linger=False)
        sys.stderr.write(
            f"validator: late node(s) {hosts} turned away (exit {code}): {text.rstrip().rsplit(chr(10), 1)[-1]}\n"
        )


async def turn_away(sock: socket.socket, p: Plan, admitted: list[Facts], end: float) -> None:
    """The job has all its nodes: every connection until ``end`` hears, instead of a hello, a final rejection that
    says so (the node gives up at once, exit 1), and the job's stderr says it once."""
    import asyncio

    from validator.preflight import protocol as wire
    from validator.preflight.refusals import TOO_MANY
    from validator.targets import fold_hosts

    hosts = fold_hosts(sorted({str(f["host"]) for f in admitted}))
    reason = (f"the job already started with all its {p.expected} nodes ({wire.printable(hosts, 200)}): {TOO_MANY} "
              "(started twice, or more nodes than --nnodes)")  # fmt: skip
    frame = wire.encode({"type": "reject", "proto": wire.PROTO, "reason": reason, "retry": False, "final": True})
    said = False

    async def one(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal said
        writer.write(frame)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.drain(), 5)
        writer.close()
        if not said:
            said = True
            sys.stderr.write(f"validator: a node came to port {p.door} after the job started with all its "
                             f"{p.expected} nodes: turned away\n")  # fmt: skip

    server = await asyncio.start_server(one, sock=sock.dup())
    async with server:
        await asyncio.sleep(max(0.0, end - time.monotonic()))


def main(argv: list[str]) -> int:
    """``python -m validator.preflight.door FD`` with the state on stdin: detach, then serve."""
    import asyncio
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C on the job's terminal ends the door too, quietly
    state = json.loads(sys.stdin.buffer.read())
    sock = socket.socket(fileno=int(argv[0]))
    sock.listen(1024)  # before the coordinator lets the job's port go: a late node finds one or the other
    if os.fork():  # the coordinator waits for this one only: the door itself is nobody's child
        os._exit(0)
    opts, p, admitted, window = state_from(state)
    try:
        asyncio.run(guarded(serve(sock, opts, p, admitted, window), int(state["job"])))
    except Exception as e:  # noqa: BLE001 - a detached process: one line, never a traceback
        sys.stderr.write(f"validator: the door for late nodes stopped: {type(e).__name__}: {e}\n")
    finally:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
