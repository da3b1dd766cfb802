"""Who is missing from a hang, from what every rank's log shows (issue 11, our launcher's runs).

* The silent rank: every other rank of the job times out or loses a peer; one rank known to the
  job (its own log file, torchrun's failure summary) reports neither. It never got to the
  collective (hung, stopped, exited cleanly): the prime suspect.
* Different waits: the Python stacks of the timeouts show which collective each rank waited in
  (``distributed_c10d.py ... in all_gather``); ranks waiting in different collectives mismatched,
  and the sides are named.
* The backend of the run (gloo or NCCL), so that fixes fit it.
"""

from __future__ import annotations

from collections import defaultdict

from validator.diagnose import strength as S
from validator.diagnose.causes.base import Evidence, quote, who
from validator.diagnose.events import Cause, Event, Role
from validator.diagnose.sequences import user_frame

# what ranks print when a collective they are in cannot complete (victims)
WAIT_KINDS = frozenset(
    {
        "coll.watchdog_timeout",
        "coll.gloo_timeout",
        "coll.blocking_wait",
        "coll.watchdog_status",
        "coll.watchdog_exception",
        "coll.async_error",
        "coll.aborted",
        "coll.watchdog_teardown",
        "gloo.peer_closed",
        "gloo.connect_refused",
        "net.conn_refused",
        "nccl.peer_closed",
        "nccl.peer_io",
        "nccl.error",
        "nccl.result",
        "nccl.ib_error",
        "py.comm_exception",
    }
)


_C10D = ("distributed_c10d.py", "/torch/distributed/")


def waiting_in(e: Event) -> str | None:
    """The torch.distributed function a rank was blocked in when it failed, from its stack."""
    for frame in reversed(e.stack):
        path, _, fn = frame.partition(" in ")
        if any(s in path for s in _C10D) and "c10d_logger" not in path and fn and not fn.startswith(("_", "wrapper")):
            return fn.strip()
    return None


def different_waits(ev: Evidence) -> list[Cause]:
    """Ranks blocked in different collectives when they timed out: a mismatch. The side that is
    clearly smaller (at most half the other) is named, medium confidence; otherwise both sides."""
    events = ev.events
    waits: dict[int, tuple[str, str | None, Event]] = {}
    for e in sorted(events, key=lambda e: (e.time is None, e.time or 0.0)):
        if e.kind in WAIT_KINDS and e.rank is not None and e.rank not in waits and (op := waiting_in(e)):
            waits[e.rank] = (op, user_frame(e.stack), e)
    sides: dict[str, list[int]] = defaultdict(list)
    for r, (op, _site, _e) in sorted(waits.items()):
        sides[op].append(r)
    if len(sides) < 2:
        return []
    ordered = sorted(sides.items(), key=lambda kv: -len(kv[1]))
    (top, major), rest = ordered[0], ordered[1:]
    minor = sorted(r for _, rs in rest for r in rs)

    def side(op: str, ranks: list[int]) -> str:
        sites = sorted({s for r in ranks if (s := waits[r][1])})
        return f"{who(ranks)} in {op}{' (' + ', '.join(sites[:2]) + ')' if sites else ''}"

    what = "; ".join(side(op, rs) for op, rs in ordered)
    evidence = [quote(waits[r][2]) for r in minor[:2]] + [quote(waits[major[0]][2])]
    named = len(major) >= 2 * len(minor)
    sure = named and len(major) >= 3 and len(minor) == 1
    # the op a rank waits in says where it is, not that it diverged there (a rank ahead by one collective
    # waits in the next op): named with low confidence unless the minority's call site is its own too
    by_signature = sure and {waits[r][1] for r in minor}.isdisjoint({waits[r][1] for r in major})
    odd = sorted({op for op, _ in rest})
    return [
        Cause(
            code="COL001",
            summary=f"ranks waited in different collectives when they timed out: {what}",
            culprits=minor if named else [],
            confidence="medium" if sure and by_signature else "low" if named else "unknown",
            reason="the timeouts' stacks show the collective each rank was in; "
            + (
                "the smaller side is the one that diverged (majority)"
                if named
                else "no clear majority, both sides shown"
            ),
            evidence=evidence,
            expected=top,
            actual=", ".join(odd),
            strength=S.DIFFERENT_WAITS,
        )
    ]


def silent_ranks(ev: Evidence) -> list[Cause]:
    """The ranks of the job that neither timed out nor lost a peer while all the others did."""
    events, file_ranks = ev.events, ev.file_ranks
    reporting = {e.rank for e in events if e.kind in WAIT_KINDS and e.rank is not None}
    own = {e.rank for e in events if e.role == Role.ORIGIN and e.rank is not None}
    summary = {
        int(e.data["rank"]): e for e in events if e.kind == "summary.failure" and isinstance(e.data.get("rank"), int)
    }
    world = set(file_ranks) | set(summary) | reporting
    silent = sorted(r for r in world - reporting - own if r is not None)
    # torchrun SIGTERMs the survivors; a silent rank that died of another signal is the one that died first
    killed = [r for r in silent if r in summary and summary[r].data.get("signal") not in (None, "SIGTERM", "SIGINT")]
    # torchrun lists every rank that did not exit 0: where its summary covers the ranks that reported, a
    # silent rank missing from it ended cleanly before them; a silent one it SIGTERMed was stopped waiting
    clean = [r for r in silent if summary and r not in summary and reporting <= set(summary)]
    silent = killed or clean or silent
    # (a rank that exited 0 under the others' failures is the suspect however few reported before torchrun's SIGTERM)
    if not reporting or not silent or (len(silent) >= len(reporting) and not clean) or own:
        return []
    how = {
        r: summary[r].data.get("signal") or f"exit code {summary[r].data.get('exit')}" for r in silent if r in summary
    } | {r: "exit code 0, absent from torchrun's failure summary" for r in clean}
    if killed:
        return [
            Cause(
                code="DGN011",
                summary=f"{who(silent)} died of {', '.join(sorted(set(how.values())))} while {who(sorted(reporting))} "
                "lost the connection to it",
                culprits=silent,
                confidence="high",
                reason="torchrun reports the signal that ended it, and every rank that printed an error only lost its peer",
                evidence=[quote(summary[r]) for r in silent[:2]],
                strength=S.SILENT_DIED,
            )
        ]
    ended = "; ".join(f"rank {r} ended by {h}" for r, h in how.items())
    first_wait = next(e for e in events if e.kind in WAIT_KINDS and e.rank is not None)
    evidence = [*[quote(summary[r]) for r in silent if r in summary][:2], quote(first_wait)]
    # its own log file without a timeout is evidence; known only from torchrun's summary, the rank's
    # lines may just be outside an excerpt
    own_file = all(r in file_ranks for r in silent)
    return [
        Cause(
            code="COL002",
            summary=f"{who(silent)} never reported the timeout or lost peer that {who(sorted(reporting))} hit: "
            f"it hung, stopped or exited before the collective{' (' + ended + ')' if ended else ''}",
            culprits=silent,
            confidence="medium" if own_file else "low",
            reason="every other rank of the job waited in a collective or lost its peer; the silent rank is the one they "
            "waited for" + ("" if own_file else " (its lines may also be outside these logs)"),
            evidence=evidence,
            strength=S.SILENT_NEVER_REPORTED,
        )
    ]


def backend(events: list[Event]) -> str | None:
    """gloo | nccl, from what the ranks printed."""
    gloo = any(e.kind.startswith("gloo.") or e.kind == "coll.gloo_timeout" or "gloo" in e.text.lower() for e in events)
    nccl = any(e.kind.startswith("nccl.") or "NCCL" in e.text for e in events if e.kind not in ("misc.nccl_version",))
    return "nccl" if nccl and not gloo else "gloo" if gloo and not nccl else None


# fixes that differ with the backend: no TORCH_NCCL_* advice for a gloo run
GLOO_FIX = {
    "COL003": "rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL (gloo checks each collective's type and shape across ranks) "
    "or rehearse: validator rehearse --backend gloo -- YOUR_LAUNCH_COMMAND",
    "DGN007": "check the peer named in the error: its log shows why it exited (gloo reports only the closed connection)",
}
