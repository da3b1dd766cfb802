"""Causes from what launchers report about their workers: torchrun's failure summary (one or
several agents), the agent's ``failed (exitcode: N)`` lines, launcher wrappers.
Second-hand evidence: it names the rank whose exit the launcher saw first, which is the initiator
only when that rank did not merely time out, and never when every rank was aborted at once."""

from __future__ import annotations

from validator.diagnose import strength as S
from validator.diagnose.causes.base import Evidence, by_kind, quote, ranks_of, who
from validator.diagnose.causes.failures import ORIGIN_CODE
from validator.diagnose.classify import classify
from validator.diagnose.events import Cause, Event, Role


def _aborted(e: Event) -> bool:
    return e.data.get("signal") == "SIGABRT" or e.data.get("exit") == -6


def _teardown(events: list[Event]) -> bool:
    """Collective timeouts or NCCL errors in the log: a SIGABRT is then the watchdog tearing
    ranks down (TORCH_NCCL_ASYNC_ERROR_HANDLING), a consequence."""
    return any(e.kind.startswith(("coll.", "nccl.")) and e.role != Role.FACT for e in events)


def summaries(ev: Evidence) -> list[Cause]:
    """torchrun's failure summary: the root cause per node; across nodes the earliest non-SIGTERM.
    A root cause whose own log shows only timeouts is a tie broken by dict order, not a cause;
    SIGABRT on every failing rank at the same second is the watchdog's teardown, not a first failure."""
    events = ev.events
    seen = [e for e in by_kind(events, "summary.failure") if e.data.get("signal") not in ("SIGTERM", "SIGINT")]
    if not seen:
        return _agent_signal(ev)
    if all(_aborted(e) for e in seen):
        if _teardown(events):
            return []
        times = {int(e.time) for e in seen if e.time is not None}
        if len(seen) > 1 and len(times) <= 1:
            return [
                Cause(
                    code="DGN011",
                    summary=f"{who(ranks_of(e.data.get('rank') for e in seen))} were all aborted (SIGABRT) at the "
                    "same second: the NCCL watchdog tearing every rank down, not a first failure",
                    culprits=[],
                    confidence="unknown",
                    reason="torchrun's Root Cause among simultaneous SIGABRTs is a tie broken by order, not by time",
                    evidence=[quote(e) for e in seen[:3]],
                    strength=S.ALL_ABORTED,
                )
            ]
    # without its Root Cause entry (cut), the failures torchrun listed under "Failures:" are the others (_format_failure
    # puts the first in a section of its own): none of them is the first
    roots = [e for e in seen if e.data.get("root")] or [e for e in seen if not e.data.get("other")]
    others_only = not roots
    roots = roots or seen
    first = min(roots, key=lambda e: (e.time is None, e.time or 0.0))
    tied = [e for e in seen if e.time is not None and first.time is not None and int(e.time) == int(first.time)]
    if not any(e.data.get("root") for e in seen) and len(tied) > 1:
        # no Root Cause entry (cut off) and several failures in the same second: nothing orders them. Exiting with a
        # code (no signal, no error file), they died of what their own tracebacks in the log say, where those say
        # one thing more specific than an exception (every worker's "CUDA error: invalid device ordinal")
        signalled = all(int(e.data.get("exit", 0)) < 0 for e in tied)
        said = {ORIGIN_CODE[e.kind] for e in events if e.kind in ORIGIN_CODE and e.role == Role.ORIGIN} - {"DGN010"}
        return [
            Cause(
                code="DGN011" if signalled else said.pop() if len(said) == 1 else "DGN010",
                summary=f"{who(ranks_of(e.data.get('rank') for e in tied))} failed in the same second "
                f"(exit code {first.data.get('exit')}); the summary's Root Cause entry is not in the log",
                culprits=[],
                confidence="unknown",
                reason="several failures at the same second and no Root Cause entry: no first failure",
                evidence=[quote(e) for e in tied[:3]],
                hosts=hosts
                if len(hosts := sorted({str(e.data["host"]) for e in seen if e.data.get("host")})) == 1
                else [],
                strength=S.TIED_FAILURES,
            )
        ]
    own = {e.rank for e in events if e.role == Role.ORIGIN}
    if ev.symptoms and first.data.get("rank") in ev.symptoms and first.data.get("rank") not in own:
        return []
    exit_code = first.data.get("exit")
    message = first.data.get("message", "")
    if message.startswith(("To enable traceback", "Signal ")):
        message = ""
    got = classify(message) if message else None
    code = "DGN010"
    if got and got[0] in ("coll.detail_mismatch", "coll.shape_verify"):
        return [
            Cause(
                code="COL001",
                summary=f"the summary's traceback reports mismatched collectives: {message[:200]}",
                culprits=[],
                confidence="low",
                reason="the failing rank reports a DETAIL mismatch between two ranks; two fingerprints give no majority",
                evidence=[quote(first)],
                strength=S.SUMMARY_MISMATCH,
            )
        ]
    if got and got[1] == Role.ORIGIN:
        code = ORIGIN_CODE.get(got[0], "DGN010")
    elif isinstance(exit_code, int) and exit_code < 0:
        code = "DGN011"
    rank = first.data.get("rank")
    what = message or f"exit code {exit_code}{' (' + first.data['signal'] + ')' if first.data.get('signal') else ''}"
    if len(tied) > 1:  # torchrun stamps whole seconds and its Root Cause is the first of equal stamps
        # in its own order (elastic/multiprocessing/errors: get_first_failure, min by timestamp): a tie
        return [
            Cause(
                code=code,
                summary=f"{who(ranks_of(e.data.get('rank') for e in tied))} failed in the same second; the "
                f"summary's Root Cause (rank {rank}) is the first of a tie, not a first failure: {what[:200]}",
                culprits=[],
                confidence="unknown",
                reason="several failures at the same second: torchrun's Root Cause among them is a tie broken by order",
                evidence=[quote(e) for e in tied[:3]],
                hosts=hosts
                if len(hosts := sorted({str(e.data["host"]) for e in tied if e.data.get("host")})) == 1
                else [],
                stack=first.stack,
                time=first.time,
                strength=S.TIED_FAILURES,
            )
        ]
    if others_only:
        return [
            Cause(
                code=code,
                summary=f"{who(ranks_of(e.data.get('rank') for e in seen))} failed (the summary's other failures; its "
                f"Root Cause entry is not in the log): {what[:200]}",
                culprits=[],
                confidence="unknown",
                reason="torchrun lists the first failure under Root Cause and the rest under Failures: only the rest "
                "is here",
                evidence=[quote(e) for e in seen[:3]],
                stack=first.stack,
                strength=S.TIED_FAILURES,
            )
        ]
    culprits = [rank] if isinstance(rank, int) else []
    return [
        Cause(
            code=code,
            summary=f"{who(culprits)} failed first: {what[:200]}",
            culprits=culprits,
            confidence="medium",
            reason="torchrun's Root Cause (first observed failure)"
            + (" across nodes, by time" if len(roots) > 1 else ""),
            evidence=[quote(first)],
            hosts=[first.data["host"]] if first.data.get("host") else [],
            stack=first.stack,
            time=first.time,
            strength=S.ROOT_CAUSE,
        )
    ]


_SIGNALS = {-9: "SIGKILL", -11: "SIGSEGV", -7: "SIGBUS", -6: "SIGABRT", -15: "SIGTERM", -2: "SIGINT"}


def _worker(e: Event) -> tuple[str, list[int], str]:
    """Who the launcher says failed: (words, culprits, why). mpirun names the process's rank (its
    first report, in the order it learned of them: low confidence); torchrun's agent a local rank."""
    if str(e.data.get("reporter", "")).isdecimal():
        rank = int(e.data["reporter"])
        if e.data.get("launcher") == "horovodrun":
            return f"rank {rank}", [rank], "horovodrun names the worker that exited first, by the time it exited"
        return f"rank {rank}", [rank], "mpirun reports this process first, in the order it learned of them"
    if "lightning" in e.data and e.rank is not None:  # the child's rank in Lightning's "[rank: N] " prefix
        return f"rank {e.rank}", [e.rank], "Lightning's main process names the first child it saw exit non-zero"
    if e.data.get("slot") is not None:
        return f"the worker on {e.data['node']} (slot {e.data['slot']})", [], ""
    if "local" in e.data:
        return f"local rank {e.data['local']} (pid {e.data.get('pid')})", [], ""
    return "a worker", [], ""


def _who(e: Event, seen: list[Event]) -> tuple[str, list[int], str]:
    """``_worker``, but horovodrun's per-process exit lines name a rank only when one process exited: several print in
    the order their threads saw them end, which does not order processes failing alike (all of them, one code)."""
    each = {str(x.data.get("reporter")) for x in seen if x.data.get("each")}
    if e.data.get("each") and len(each) > 1:
        return (
            f"each of {len(each)} workers",
            [],
            "horovodrun reports several workers exiting; its print order is no evidence",
        )
    return _worker(e)


def _first(seen: list[Event]) -> Event:
    """The earliest report; at equal times one that names its worker (mpirun's "Primary job ... non-zero exit code"
    line comes before the block that names the process; horovodrun's summary before its per-process exit lines)."""
    return min(
        seen,
        key=lambda e: (
            e.time is None,
            e.time or 0.0,
            "reporter" not in e.data and "local" not in e.data,
            bool(e.data.get("each")),  # horovodrun's "The first process to do so was:" over its per-process lines
        ),
    )


def _node(e: Event, seen: list[Event] | None = None) -> list[str]:
    """mpirun's "on node HOST", horovodrun's "HOST[slot]", mpiexec's "PID N RUNNING AT HOST": the host of the
    process it names. mpiexec's blocks come in rank order, not time: its host only when every block has it."""
    if e.data.get("launcher") == "mpiexec":
        nodes = {str(x.data.get("node")) for x in seen or [e] if x.data.get("launcher") == "mpiexec"}
        return sorted(nodes) if len(nodes) == 1 else []
    return [str(e.data["node"])] if e.data.get("node") and ("reporter" in e.data or "slot" in e.data) else []


def _agent_signal(ev: Evidence) -> list[Cause]:
    """Without a summary block: the agent's ``failed (exitcode: -9) local_rank: N`` line, mpirun's reports."""
    events = ev.events
    seen = [e for e in by_kind(events, "agent.child_failed") if int(e.data.get("exit", 0)) not in (0, -15, -2)]
    if not seen or (all(int(e.data["exit"]) == -6 for e in seen) and _teardown(events)):
        return []
    if all(int(e.data["exit"]) > 0 for e in seen):
        e = _first(seen)
        worker, culprits, why = _who(e, seen)
        code = "a non-zero code" if "nonzero" in e.data else f"code {e.data['exit']}"
        return [
            Cause(
                code="DGN010",
                summary=f"{worker} exited with {code}; its own error is not in these lines",
                culprits=culprits,
                confidence="low",
                reason=why
                or "the launcher reports the worker failed first; its global rank and its error are not in this log",
                evidence=[quote(x) for x in seen[:3]],
                hosts=_node(e, seen),
                time=e.time,
                strength=S.EXIT_CODE_ONLY,
            )
        ]
    e = _first(seen)
    sig = _SIGNALS.get(int(e.data["exit"]), f"signal {-int(e.data['exit'])}")
    hint = " (SIGKILL without an exception: often the OOM killer)" if sig == "SIGKILL" else ""
    worker, culprits, why = _who(e, seen)
    return [
        Cause(
            code="DGN011",
            summary=f"{worker} was killed by {sig}{hint}",
            culprits=culprits,
            confidence="low" if culprits else "medium",
            reason=why or "the launcher reports the worker died from a signal; its global rank is not in this log",
            evidence=[quote(e)],
            hosts=_node(e, seen),
            time=e.time,
            # mpirun's report of a signal is its echo of what the process did (an uncaught error's abort, the OOM
            # killer): as weak as an exit code, under any error the process printed itself
            strength=S.EXIT_CODE_ONLY if e.data.get("launcher") in ("mpirun", "mpiexec") else S.AGENT_SIGNAL,
        )
    ]
