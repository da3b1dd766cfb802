"""What a verdict says, apart from the flow that reaches it (run.py): the codes a preflight runs,
the report the coordinator renders with its verdict line, the findings only the rendezvous itself
can make (PRE001-004, 009, 010), a participant's own report when no verdict came, and the frames
every participant gets (coordinator.deliver)."""

from __future__ import annotations

from collections.abc import Callable

from validator import pipeline
from validator.preflight import k8s
from validator.preflight import protocol as wire
from validator.preflight.plan import NOT_IN_PREFLIGHT, Options, Plan, key

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import Facts, Finding, Report
    from validator.preflight.connection import Arrival
    from validator.preflight.coordinator import Gathered
    from validator.preflight.participant import Result


def codes(opts: Options) -> list[str]:
    return [c for c in pipeline.resolve_codes(opts.select, opts.ignore) if c not in NOT_IN_PREFLIGHT]


def rejected_findings(gathered: Gathered) -> list[Finding]:
    """One PRE004 per reason: a count, at most a few peers and one short example, whatever
    strangers sent. Information only: PRE004 never changes the exit code (model.NEVER_FAILS).
    A flood that outlasted the wait for it is PRE009, an error: the job would start into it."""
    from validator.preflight import findings as pre
    from validator.preflight.refusals import FLOOD_N, FLOOD_WAIT_S, PEERS_MAX

    rejected = gathered.rejected
    out = []
    if gathered.flooded:
        out.append(pre.flood.finding(f"the rendezvous port was still flooded after {FLOOD_WAIT_S:g} s of waiting: "
                           f"{rejected.flood_text()}; the job's store would meet the same flood",
                           hosts=rejected.sources(), expected="no flood when the job starts",
                           actual=f"{FLOOD_N}+ a second"))  # fmt: skip
    for reason, r in rejected.by_reason.items():
        peers = sorted(r.peers)
        more = "" if len(peers) < PEERS_MAX else " and maybe others"
        example = f"; e.g. {r.example}" if r.example else ""
        out.append(pre.strangers.finding(f"{r.count} connection(s) {reason}{example}", hosts=peers, expected="none",
                           actual=f"{r.count} from {', '.join(peers[:5])}{' ...' if len(peers) > 5 else ''}{more}"))  # fmt: skip
    return out


def render(
    report: Report,
    exit_code: int,
    arrived: list[Facts],
    p: Plan,
    seconds: float,
    notes: list[str],
    present: set[Any] | None = None,
) -> str:
    """The report with its verdict line: the expected participants present (a rank or node rank
    claimed twice fills one place: "1/2 nodes (2 participants)" beside the one missing).
    ``present``: the keys of ``arrived``, counted as they came (coordinator.Gathered)."""
    from validator.report.options import RenderOptions
    from validator.report.text import render_table

    state = "PASSED" if exit_code == 0 else f"FAILED (exit {exit_code})"
    if not p.keyed:
        places = len(arrived)
    else:
        keys = set(map(key(p), arrived)) if present is None else present
        places = len(keys.intersection(range(p.expected)))  # the expected places held
    extra = f" ({len(arrived)} participants)" if places != len(arrived) else ""
    unit = "ranks" if p.mode == "rank" else "nodes"
    line = f"preflight {state}: {places}/{p.expected} {unit}{extra} in {seconds:.1f} s"
    return render_table(report, RenderOptions(verdict="; ".join([line, *notes])))


def local_report(opts: Options, facts: Facts, p: Plan, result: Result | None, extra: list[Finding]) -> Report:
    """What a participant reports on its own: its local findings plus why it has no verdict."""
    from validator.preflight import findings as pre

    findings = list(extra)
    host = facts["host"]
    ranks = [r] if isinstance(r := facts["launch"]["rank"], int) else []
    if result is not None:
        att = result.attempts
        if att.foreign:
            findings.append(pre.foreign.finding(f"{att.foreign}; the real job's rank 0 cannot bind it", hosts=[p.host]))
        elif att.rejected:
            # here only: a participant loads no dataclasses
            from validator.preflight.refusals import OTHER_JOB, TOO_MANY

            other = OTHER_JOB in att.rejected  # two jobs on one port, or one job's ranks with two ids
            fix = (
                (
                    "another job's preflight holds this port, or this job's ranks have different job ids: move one job "
                    "to another MASTER_PORT, or give every rank the same --job-id (SLURM_JOB_ID)"
                )
                if other
                else "this node is not part of the job as it started: stop it, or count it in --nnodes and start the "
                "job again"
                if TOO_MANY in att.rejected
                else ""
            )
            findings.append(pre.rejected.finding(f"coordinator {att.rejected}", hosts=[host], ranks=ranks, fix=fix))
        else:
            launch = facts["launch"]
            me = launch["rank"] if p.mode == "rank" else launch["node_rank"]
            rank0 = att.resolved_once and me in (0, None)
            hint = " (this is rank 0, but the endpoint is not an address of this node)" if rank0 else ""
            if att.stalled:
                hint += ": the coordinator took our facts, then stopped answering (stopped, stalled or overloaded)"
            elif att.gone:
                hint += (": the coordinator took our facts, then closed the connection before any verdict (it exited, "
                         "crashed or was killed: its own output says why)")  # fmt: skip
            elif att.refused and not att.silent and att.tries > 1:
                hint += (f": nothing listened on {p.host}:{p.port} for {opts.timeout:.0f} s: the master's preflight did "
                         "not start, or it waits on another port or address (--master-port, MASTER_PORT or "
                         "--rdzv-endpoint differ between the nodes: compare their launch lines), or a firewall "
                         "rejects the port")  # fmt: skip
            elif att.silent:
                hint += (f": the listener there accepted {att.silent} connection(s) but never said hello: the "
                         "coordinator stopped answering (stopped, stalled or overloaded), or another program "
                         "holds the port (a stale TCPStore: the master's own report names it)")  # fmt: skip
            dns = "" if att.resolved_once else k8s.unresolved_hint(p.host, facts)  # names the Service in a pod
            why = f"gave up: {att.gave_up}" if att.gave_up else f"within {opts.timeout:.0f} s"
            findings.append(pre.unreachable.finding(f"no verdict from {p.host}:{p.port} ({why}){hint}: "
                                                    f"{att.summary()}{dns}", hosts=[host], ranks=ranks))  # fmt: skip
    report = pipeline.check([facts], None, codes(opts), context="local", title=f"cluster-validator preflight ({host})")
    report.findings = sorted(findings + report.findings, key=lambda f: (-f.severity, f.code))
    return report


NAMED_HOSTS_MAX = 256  # beyond this many culprit hosts, only the coordinator prints the whole report


def vanished(lost: list[Arrival], p: Plan) -> Finding:
    """PRE010: participants that sent their facts but did not confirm the proposed pass."""
    from validator.preflight.findings import vanished as pre010
    from validator.targets import fold_hosts, fold_ranks

    what = "rank" if p.mode == "rank" else "node rank"

    hosts = sorted({a.facts["host"] for a in lost})

    def who(group: list[Arrival]) -> str:
        ks = [k for a in group if isinstance(k := key(p)(a.facts), int)]
        if ks:
            return f"{what} {fold_ranks(ks)}"
        agents = ", ".join(f"{a.facts['host']} pid {a.facts['pid']}" for a in group[:4])  # c10d: a node is its agent
        return f"the node{'s' if len(group) > 1 else ''} {agents}{' ...' if len(group) > 4 else ''}"

    closed = [a for a in lost if a.conn is not None and a.conn.state == "closed"]
    silent = [a for a in lost if a not in closed]
    how = [(closed, "connection closed"), (silent, "no confirmation within the window")]
    said = [f"{who(g)}: {why}" if g != lost else why for g, why in how if g]  # by name only when both happened
    where = f" on {fold_hosts(hosts)}" if any(isinstance(key(p)(a.facts), int) for a in lost) else ""
    ranks = [r for a in lost if isinstance(r := a.facts["launch"]["rank"], int)]
    return pre010.finding(f"{who(lost)}{where} sent facts, then vanished before the go "
                   f"({'; '.join(said)}): the job would wait in init_process_group", hosts=hosts, ranks=ranks,
                   expected="every participant confirms the pass", actual=f"{len(lost)} did not")  # fmt: skip


def verdicts(
    report: Report,
    doc: dict[str, Any],
    exit_code: int,
    text: str,
    port: int,
    pending: bool = False,
    placement: dict[str, Any] | None = None,
    stages: dict[str, Any] | None = None,
) -> tuple[bytes, bytes, Callable[[Facts], bool]]:
    """What the coordinator sends (coordinator.deliver): the verdict whole; its line alone, for a
    participant that prints or writes no more (finish.brief); and whether the report names a
    participant's host or rank, which then gets it whole. The whole verdict's "named" says the
    same to each participant (finish.named), without its parsing the report (expanding hostlists
    costs start-up time on every rank). ``placement``: with --groups under c10d, every node's
    predicted node rank (placement.wire_doc), in both: each node needs its own to rehearse.
    ``stages``: on a pass, the coordinator's --smoke, --groups and --fail-on (``stages``), in both:
    every participant runs the stages after a pass as the coordinator does (finish.adopt)."""
    from validator.targets import fold_ranks

    hosts = {h for f in report.findings for h in f.hosts}
    ranks = {r for f in report.findings for r in f.ranks}
    named = {"ranks": fold_ranks(ranks), "hosts": sorted(hosts) if len(hosts) <= NAMED_HOSTS_MAX else None}
    verdict = {"type": "verdict", "exit_code": exit_code, "report": doc, "named": named, "text": text, "port": port}
    line = text.rstrip("\n").rsplit("\n", 1)[-1] + "\n"
    brief = {"type": "verdict", "exit_code": exit_code, "named": {}, "text": line, "port": port}
    if placement is not None:
        verdict["placement"] = brief["placement"] = placement
    if pending:  # a proposed pass: acted on only after the go (coordinator.confirm)
        verdict["pending"] = brief["pending"] = True
    if stages is not None:
        verdict["stages"] = brief["stages"] = stages
    return (
        wire.encode(verdict),
        wire.encode(brief),
        lambda facts: facts["host"] in hosts or facts["launch"]["rank"] in ranks,
    )
