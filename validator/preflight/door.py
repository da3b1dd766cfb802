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


class Door:
    """The door's socket, bound (not listening) while the coordinator gathers."""

    def __init__(self, p: Plan) -> None:
        self.sock: socket.socket | None = None
        if p.door is not None:
            from validator.preflight.ports import bound

            self.sock = bound(p.door)
        self.admitted: list[Facts] = []  # the nodes the pass let start (coordinate sets them)

    @property
    def settle(self) -> float:
        return SETTLE_S if self.sock is not None else 0.0

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def open(self, opts: Options, p: Plan) -> None:
        """After a pass with room for more nodes: start the door (detached: it outlives the exec)."""
        sock, self.sock = self.sock, None
        if sock is None:
            return
        try:
            if not self.admitted or len(self.admitted) >= p.expected:
                return
            window = p.last_call + MARGIN_S
            state = {"opts": opts._asdict(), "plan": p._asdict(), "admitted": self.admitted, "window": window,
                     "job": os.getpid()}  # fmt: skip
            proc = subprocess.Popen([sys.executable, "-m", "validator.preflight.door", str(sock.fileno())],
                                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, pass_fds=(sock.fileno(),))  # fmt: skip
            proc.communicate(json.dumps(state).encode(), timeout=30)  # it forks and returns at once
            sys.stderr.write(f"validator: {len(self.admitted)} of {p.minimum}-{p.expected} nodes start now; a node "
                             f"that comes within {window:.0f} s is checked against them on port {p.door} and joins "
                             "torchrun's last call\n")  # fmt: skip
        except (OSError, subprocess.SubprocessError) as e:
            sys.stderr.write(f"validator: warning: no door for late nodes ({e}): they will not be checked\n")
        finally:
            sock.close()


def listening(port: int) -> bool:
    """Whether a door listens on ``port`` here (it cannot be bound beside a listener; a door still
    bound without listening, during the gather, can)."""
    from validator.preflight.ports import bound

    sock = bound(port)
    if sock is None:
        return True
    sock.close()
    return False


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
