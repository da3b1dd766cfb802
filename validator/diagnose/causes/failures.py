"""Rules over ranks that failed on their own (an exception, a CUDA error, OOM, a crash) and runs
stopped from outside."""

from __future__ import annotations

from collections import defaultdict

from validator.diagnose import strength as S
from validator.diagnose.causes.base import Evidence, by_kind, quote, who
from validator.diagnose.events import Cause, Confidence, Event, Role
from validator.targets import fold_ranks

ORIGIN_CODE = {
    "py.exception": "DGN010",
    "cuda.error": "DGN008",
    "cuda.oom": "DGN009",
    "host.oom": "DGN009",
    "proc.crash": "DGN011",
}


_NOT_A_FAILURE = ("slurm.", "agent.", "misc.", "summary.")


def stopped(ev: Evidence) -> list[Cause]:
    """The scheduler or an outer timeout ended the job (maybe while it hung)."""
    events = ev.events
    seen = by_kind(events, "agent.death_signal", "slurm.cancelled")
    # Slurm cancels a step whose cgroup OOM-killed a task (slurmstepd's oom-kill event, srun's "Out Of Memory"): the
    # stop is the consequence of that task's failure, not a stop from outside
    if not seen or (by_kind(events, "host.oom") and all(e.kind == "slurm.cancelled" for e in seen)):
        return []
    # slurmstepd's "*** STEP %s ON %s CANCELLED AT %s ***" without a reason ("DUE TO TIME LIMIT", "DUE TO PREEMPTION") is
    # srun ending the step after a task failed (or a user's scancel): where ranks already reported failures of their own
    # (a collective timeout, an error), the cancel is their consequence, not a stop from outside
    failed = [e for e in events if e.role in (Role.ORIGIN, Role.SYMPTOM) and not e.kind.startswith(_NOT_A_FAILURE)]
    if failed and all(e.kind == "slurm.cancelled" and not e.data.get("why") for e in seen):
        return []
    why = next((e.data["why"].strip().lower() for e in seen if e.data.get("why")), None)
    return [
        Cause(
            code="DGN014",
            summary=f"the job was stopped from outside{' (' + why + ')' if why else ''}: {seen[0].text[:160]}",
            culprits=[],
            confidence="medium",
            reason="the launcher or scheduler received a stop signal; no rank reported an error before it",
            evidence=[quote(e) for e in seen[:3]],
            strength=S.STOPPED_OUTSIDE,
        )
    ]


def signalled(ev: Evidence) -> list[Cause]:
    """A process's banner for a fatal signal of its own (Open MPI's "*** Process received signal ***") where its
    "Signal: %s" line is not in the lines: a crash, but the abort() after an error is one too, so it ranks below
    every error found (an NCCL error's echo included) and stands only where nothing else failed."""
    seen = by_kind(ev.events, "proc.signal")
    if not seen or any(e.kind in ORIGIN_CODE for e in ev.events):
        return []
    return [
        Cause(
            code="DGN011",
            summary=f"a process died of a signal: {seen[0].text[:200]}",
            culprits=[],
            confidence="low",
            reason="a process reported a fatal signal of its own; no error of its own or of another is in the lines",
            evidence=[quote(e) for e in seen[:3]],
            strength=S.EXIT_CODE_ONLY,
        )
    ]


def origins(ev: Evidence) -> list[Cause]:
    """Ranks that failed on their own (exception, CUDA error, OOM) before the others timed out."""
    events = ev.events
    seen = [e for e in events if e.kind in ORIGIN_CODE]
    if not seen:
        return []
    ranked = [e for e in seen if e.rank is not None]
    per: dict[int, list[Event]] = defaultdict(list)
    for e in ranked:
        per[int(e.rank)].append(e)  # type: ignore[arg-type]
    pool = ranked or seen
    first = min(pool, key=lambda e: (e.time is None, e.time or 0.0))
    code = ORIGIN_CODE[first.kind]
    msg = first.text[:200]
    stack = first.stack
    conf: Confidence
    if len(per) <= 1:
        culprits = sorted(per) or _first_exit(events, seen)
        if per and (launcher := _launcher_first(events)) is not None and launcher not in per:
            # mpirun saw another rank exit first: this rank's error is the only one shown, not shown to be the first
            msg = f"{msg} (on rank {culprits[0]})"
            culprits = [launcher]
        # victims: ranks that only timed out or lost a peer, or that torchrun stopped (SIGTERM) after it
        stopped = [e.data.get("rank") for e in by_kind(events, "summary.failure") if e.data.get("signal") == "SIGTERM"]
        others = [r for r in [*ev.symptoms, *stopped] if isinstance(r, int) and r not in per and r not in culprits]
        # alone in the log, it is only the first visible failure: nothing shows the others waited for it
        conf = "high" if per and others and culprits == sorted(per) else "low"
        reason = (
            "the only process with an error of its own, and the one mpirun saw exit first"
            if culprits and not per
            else f"mpirun saw rank {culprits[0]} exit first, before the only rank whose error these lines show"
            if culprits != sorted(per)
            else "the only rank that failed on its own; the others only report timeouts or lost peers, or were stopped"
            if others
            else "the only rank with an error of its own in these lines; no other rank shows it waited for this one"
        )
    else:
        texts = {e.data.get("msg") or e.text for e in ranked}
        timed = [e for e in ranked if e.time is not None]
        if len(texts) == 1 and len(per) > 2:
            # a bug (or a shortage) on every rank, not a divergence: no rank is the one that started it
            culprits, conf, reason = [], "unknown", f"ranks {fold_ranks(sorted(per))} all raised the same error"
        elif timed:
            first = min(timed, key=lambda e: e.time or 0.0)
            code, msg, stack = ORIGIN_CODE[first.kind], first.text[:200], first.stack
            tied = sorted({int(e.rank) for e in timed if e.time == first.time})  # type: ignore[arg-type]
            if len(tied) > 1:  # same stamp (often whole seconds): the log does not say which came first: nobody
                culprits, conf = [], "unknown"
                reason = (
                    f"ranks {fold_ranks(tied)} raised errors of their own at the same time stamp: a tie names nobody"
                )
            else:
                culprits, conf = [int(first.rank)], "medium"  # type: ignore[arg-type]
                reason = f"the earliest of {len(per)} ranks with errors of their own (by timestamp)"
        else:
            culprits, conf, reason = (
                sorted(per),
                "low",
                "several ranks failed on their own and nothing orders them in time",
            )
    site = f" at {stack[-1].split(' in ')[0]}" if stack else ""
    head = (
        f"{who(culprits)} each failed on their own (nothing in the lines orders them)"
        if len(culprits) > 1
        else f"{who(culprits)} failed first"
        if culprits or len(per) <= 1
        else f"ranks {fold_ranks(sorted(per))} all failed"
    )
    return [
        Cause(
            code=code,
            summary=f"{head}: {msg}{site}",
            culprits=culprits,
            confidence=conf,
            reason=reason,
            evidence=[quote(e) for e in sorted(pool, key=lambda e: e.rank not in culprits)[:3]],
            stack=stack,
            time=first.time,
            strength=S.EXCEPTION[conf],
        )
    ]


def _launcher_first(events: list[Event]) -> int | None:
    """The one rank mpirun names as the first process to exit ("The first process to do so was: [[J,1],R]",
    "noticed that process rank R ... exited on signal"), where it names exactly one."""
    first = {str(e.data["reporter"]) for e in _mpirun_exits(events)}
    return int(first.pop()) if len(first) == 1 and next(iter(first)).isdecimal() else None


def _mpirun_exits(events: list[Event]) -> list[Event]:
    return [
        e for e in by_kind(events, "agent.child_failed") if e.data.get("launcher") == "mpirun" and "reporter" in e.data
    ]


def _first_exit(events: list[Event], seen: list[Event]) -> list[int]:
    """mpirun's "The first process to do so was: [[job,1],R]" where the errors of one's own in the log carry no rank
    and all come from one process (one host and pid, or one line): that process is the one mpirun saw exit first."""
    procs = {(e.ident.host, e.ident.pid) for e in seen}
    one = len(seen) == 1 or (len(procs) == 1 and None not in next(iter(procs)))
    if (rank := _launcher_first(events)) is None or not one:
        return []
    (host, pid), said = next(iter(procs)), _mpirun_exits(events)[0].data  # where mpirun names it, it is this one
    if (pid is not None and "pid" in said and str(said["pid"]) != str(pid)) or (
        host and "node" in said and str(said["node"]) != host
    ):
        return []
    return [rank]
