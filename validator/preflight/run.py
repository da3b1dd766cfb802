"""The preflight flow on one participant: probe, elect, rendezvous, decide, print, exec.

Every participant runs this. The one whose node rank (or rank) is 0 and whose address is the
rendezvous endpoint becomes the coordinator: it binds the job's own port, so the rehearsal proves
what the job will use, and releases it before the job starts.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from validator import pipeline
from validator.agent.probe import port_owner
from validator.errors import UserError
from validator.model import Facts, Finding, Outcome, Report, Severity
from validator.preflight import k8s, netcheck
from validator.preflight import protocol as wire
from validator.preflight.participant import Result, participate
from validator.preflight.refusals import PEERS_MAX, Refusals
from validator.profiles import Profile, load_profile

# Only the coordinator needs asyncio and the checks: participants (every other rank, on the launch
# path) import them lazily, which keeps their start-up to the standard library and the agent.

# Missing participants are reported as outcomes (exit 3, worth a retry), not as RNK findings.
NOT_IN_PREFLIGHT = ("RNK002", "RNK007", "PRF008")


@dataclass
class Options:
    command: list[str] = field(default_factory=list)
    timeout: float = 60.0
    coordinator: str | None = None
    job_id: str | None = None
    secret_file: str | None = None
    expect: int | None = None
    hosts: str | None = None
    profile: str | None = None
    fmt: str = "table"
    output: str | None = None
    fail_on: Severity | None = Severity.ERROR
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    allow_incomplete: bool = False
    net_check: bool = False
    smoke: bool = False
    verbose: bool = False
    quiet: bool = False
    termination_log: str | None = None  # one-line summary for `kubectl describe pod`


@dataclass
class Plan:
    host: str
    port: int
    mode: str  # rank | node
    expected: int
    job_id: str
    names: list[str]  # expected hosts in node (or node-of-rank) order, when known


def endpoint(opts: Options, facts: Facts) -> tuple[str, int]:
    """--coordinator, else the launch contract's master (torchrun command, PET_*, MASTER_*)."""
    launch = facts["launch"]
    if opts.coordinator:
        text_host, _, text_port = opts.coordinator.rpartition(":")
        if not text_host or not text_port.isdigit():
            raise UserError(f"--coordinator must be HOST:PORT, got {opts.coordinator!r}")
        return text_host.strip("[]"), int(text_port)
    host, port = launch["master_addr"], launch["master_port"]
    if not host or port is None:
        raise UserError(
            "no rendezvous address: set MASTER_ADDR and MASTER_PORT, wrap a torchrun command, "
            "or pass --coordinator HOST:PORT"
        )
    if facts["env"].get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        port += 1  # inside torchrun the agent's store already holds MASTER_PORT
    if not 0 < port < 65536:
        raise UserError(f"rendezvous port {port} is out of range (1-65535)")
    return host, port


def plan(opts: Options, facts: Facts, profile: Profile | None) -> Plan:
    from validator.targets import expand

    launch = facts["launch"]
    host, port = endpoint(opts, facts)
    mode = launch["mode"]
    expected = opts.expect or (launch["world_size"] if mode == "rank" else launch["nnodes"])
    if not expected:
        raise UserError(f"cannot tell how many participants to expect ({mode} mode, no "
                        f"{'WORLD_SIZE' if mode == 'rank' else '--nnodes'}); pass --expect N")  # fmt: skip
    hostlist = opts.hosts or launch["nodelist"] or (profile.hosts if profile else None)
    names = expand(hostlist) if hostlist else []
    return Plan(host, port, mode, int(expected), opts.job_id or launch["job_id"] or "", names)


def key(mode: str) -> Any:
    def by(f: Facts) -> Any:
        launch = f["launch"]
        value = launch["rank"] if mode == "rank" else launch["node_rank"]
        return value if isinstance(value, int) else (f["host"], f["pid"])

    return by


def missing(p: Plan, present: set[Any], facts: Facts, waited: float) -> list[Outcome]:
    """Participants that never arrived, one outcome per expected host (or one in all when the
    hosts are unknown), ranks folded: 50,000 missing ranks stay a few lines."""
    from validator.targets import fold_ranks

    lws = facts["launch"]["local_world_size"] or 1
    by_host: dict[str, list[int]] = {}
    for k in range(p.expected):
        if k not in present:
            node = k if p.mode == "node" else k // lws
            by_host.setdefault(p.names[node] if node < len(p.names) else "", []).append(k)
    what = "rank" if p.mode == "rank" else "node rank"
    return [
        Outcome(f"{what} {fold_ranks(ks)}", "missing",
                f"{'expected on ' + host + '; ' if host else ''}never reached the coordinator in {waited:.0f} s")
        for host, ks in by_host.items()
    ]  # fmt: skip


def is_candidate(facts: Facts, p: Plan) -> bool:
    """Rank 0 / node rank 0 (or unknown, as with c10d) on the host the endpoint names."""
    launch = facts["launch"]
    mine = launch["rank"] if p.mode == "rank" else launch["node_rank"]
    if mine not in (0, None):
        return False
    from validator.agent.probe import resolve

    addrs = resolve([p.host])[p.host].get("addrs", [])
    ours = {a.split("/")[0] for i in facts["network"]["interfaces"] for a in i["addrs"]}
    return any(a in ours or a.startswith("127.") or a == "::1" for a in addrs)


def codes(opts: Options) -> list[str]:
    return [c for c in pipeline.resolve_codes(opts.select, opts.ignore) if c not in NOT_IN_PREFLIGHT]


def rejected_findings(rejected: Refusals) -> list[Finding]:
    """One PRE004 per reason: a count, at most a few peers and one short example, whatever
    strangers sent. Information only: PRE004 never changes the exit code (model.NEVER_FAILS)."""
    from validator.preflight.findings import finding

    out = []
    for reason, r in rejected.by_reason.items():
        peers = sorted(r.peers)
        more = "" if len(peers) < PEERS_MAX else " and maybe others"
        example = f"; e.g. {r.example}" if r.example else ""
        out.append(finding("PRE004", f"{r.count} connection(s) {reason}{example}", hosts=peers, expected="none",
                           actual=f"{r.count} from {', '.join(peers[:5])}{' ...' if len(peers) > 5 else ''}{more}"))  # fmt: skip
    return out


def coordinate(
    opts: Options, p: Plan, facts: Facts, sock: Any, profile: Profile | None, listen: list[Any] | None
) -> tuple[Report, int]:
    import asyncio

    from validator.preflight import coordinator as coord

    secret = wire.load_secret(opts.secret_file)

    async def main() -> tuple[Report, int]:
        c = coord.Coordinator(facts, set(range(p.expected)), key(p.mode), p.job_id, secret, opts.timeout,
                              own_listen=listen, net_check=opts.net_check)  # fmt: skip
        gathered, _ = await c.gather(sock)
        net = netcheck.findings(await c.net_round(key(p.mode))) if opts.net_check else []
        all_facts = [a.facts for a in gathered.arrivals]
        present = {key(p.mode)(f) for f in all_facts}
        report = pipeline.check(all_facts, profile, codes(opts), context="preflight",
                                outcomes=missing(p, present, facts, gathered.seconds),
                                title=f"cluster-validator preflight ({p.host}:{p.port}, job {p.job_id or 'unnamed'})")  # fmt: skip
        extra = pipeline.keep(net + rejected_findings(gathered.rejected), codes(opts))
        report.findings = sorted(report.findings + extra,
                                 key=lambda f: (-f.severity, f.code))  # fmt: skip
        exit_code = report.exit_code(opts.fail_on, opts.allow_incomplete)
        verdict = {"type": "verdict", "exit_code": exit_code, "report": report.to_json(), "named": culprits(report),
                   "text": render(report, exit_code, len(gathered.arrivals), p, gathered.seconds)}  # fmt: skip
        await c.deliver(wire.encode(verdict))
        return report, exit_code

    coord.raise_nofile()
    try:
        with coord.paused_gc():
            return asyncio.run(main())
    finally:
        sock.close()


def render(report: Report, exit_code: int, arrived: int, p: Plan, seconds: float) -> str:
    from validator.report.text import render_table

    state = "PASSED" if exit_code == 0 else f"FAILED (exit {exit_code})"
    line = f"preflight {state}: {arrived}/{p.expected} {'ranks' if p.mode == 'rank' else 'nodes'} in {seconds:.1f} s"
    return render_table(report, verdict=line)


def local_report(opts: Options, facts: Facts, p: Plan, result: Result | None, extra: list[Finding]) -> Report:
    """What a participant reports on its own: its local findings plus why it has no verdict."""
    from validator.preflight.findings import finding

    findings = list(extra)
    host = facts["host"]
    ranks = [r] if isinstance(r := facts["launch"]["rank"], int) else []
    if result is not None:
        att = result.attempts
        if att.foreign:
            findings.append(finding("PRE002", f"{att.foreign}; the real job's rank 0 cannot bind it", [p.host], []))
        elif att.rejected:
            findings.append(finding("PRE003", f"coordinator {att.rejected}", [host], ranks))
        else:
            launch = facts["launch"]
            me = launch["rank"] if p.mode == "rank" else launch["node_rank"]
            rank0 = att.resolved_once and me in (0, None)
            hint = " (this is rank 0, but the endpoint is not an address of this node)" if rank0 else ""
            dns = "" if att.resolved_once else k8s.unresolved_hint(p.host, facts)  # names the Service in a pod
            findings.append(finding("PRE001", f"no verdict from {p.host}:{p.port} within {opts.timeout:.0f} s{hint}: "
                                    f"{att.summary()}{dns}", [host], ranks))  # fmt: skip
    report = pipeline.check([facts], None, codes(opts), context="local", title=f"cluster-validator preflight ({host})")
    report.findings = sorted(findings + report.findings, key=lambda f: (-f.severity, f.code))
    return report


NAMED_HOSTS_MAX = 256  # beyond this many culprit hosts, only the coordinator prints the whole report


def culprits(report: Report) -> dict[str, Any]:
    """Who the findings name, for each participant to decide whether to print the whole report
    without parsing it (expanding hostlists costs start-up time on every rank)."""
    from validator.targets import fold_ranks

    hosts = sorted({h for f in report.findings for h in f.hosts})
    return {"ranks": fold_ranks(r for f in report.findings for r in f.ranks),
            "hosts": hosts if len(hosts) <= NAMED_HOSTS_MAX else None}  # fmt: skip


def named(verdict: dict[str, Any], facts: Facts) -> bool:
    from validator.targets import expand_ranks

    who = verdict.get("named") or {}
    rank = facts["launch"]["rank"]
    return facts["host"] in (who.get("hosts") or []) or (
        rank is not None and rank in expand_ranks(who.get("ranks") or "")
    )


def emit(opts: Options, doc: dict[str, Any], text: str, show_full: bool) -> None:
    """The report: JSON to --output and (--format json) stdout; the table or the verdict line to stderr."""
    if opts.output:
        try:
            with open(opts.output, "w") as f:
                json.dump(doc, f, indent=2)
        except OSError as e:
            print(f"validator: cannot write {opts.output}: {e.strerror}", file=sys.stderr)
    if opts.fmt == "json":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    if opts.quiet:
        show_full = False
    sys.stderr.write(text if show_full else text.rstrip("\n").rsplit("\n", 1)[-1] + "\n")
    sys.stdout.flush()
    sys.stderr.flush()


def execute(opts: Options) -> int:
    profile = load_profile(opts.profile) if opts.profile else None
    facts = pipeline.probe_local(opts.command or None, port_check=False)
    p = plan(opts, facts, profile)
    t0 = time.monotonic()
    listener = netcheck.open_listener(facts) if opts.net_check else None
    try:
        return rendezvous(opts, p, facts, profile, listener.describe() if listener else None, t0)
    finally:
        if listener:
            listener.close()


def rendezvous(
    opts: Options, p: Plan, facts: Facts, profile: Profile | None, listen: list[Any] | None, t0: float
) -> int:
    if is_candidate(facts, p):
        from validator.preflight import coordinator as coord

        try:
            sock = coord.bind(p.port)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                from validator.preflight.findings import finding

                report = local_report(opts, facts, p, None, [finding(
                    "PRE007", f"cannot listen on port {p.port}: {e.strerror}", [facts["host"]], actual=str(e.strerror))])  # fmt: skip
                return finish_local(opts, report)
            # Maybe the holder is this job's coordinator (a second rank 0): join it, and only if
            # something else answers there, report the port as busy with its owner.
        else:
            report, code = coordinate(opts, p, facts, sock, profile, listen)
            text = render(report, code, report.participants, p, time.monotonic() - t0)
            return finish(opts, report.to_json(), code, True, text, smoke_for(opts, p, facts))
    secret = wire.load_secret(opts.secret_file)
    result = participate(facts, p.host, p.port, p.job_id, secret, opts.timeout, listen)
    if result.verdict is not None:
        v = result.verdict
        full = opts.verbose or named(v, facts)
        return finish(opts, v["report"], int(v["exit_code"]), full, str(v["text"]), smoke_for(opts, p, facts))
    if result.attempts.foreign and is_candidate(facts, p):
        facts = mark_busy(facts, p.port)
    return finish_local(opts, local_report(opts, facts, p, result, []))


def smoke_for(opts: Options, p: Plan, facts: Facts) -> Callable[[], str | None] | None:
    launch = facts["launch"]
    rank = launch["rank"] if p.mode == "rank" else launch["node_rank"]
    if not opts.smoke or not isinstance(rank, int):
        return None
    from validator.preflight.smoke import smoke

    return lambda: smoke(facts, p.host, p.port, rank, p.expected)


def mark_busy(facts: Facts, port: int) -> Facts:
    master = facts["network"]["master"]
    if master is not None:
        master["port_free"] = False
        master["port_owner"] = port_owner(port)
    return facts


def finish_local(opts: Options, report: Report) -> int:
    """A participant without a verdict: its own report, always printed in full."""
    from validator.report.text import render_table

    code = report.exit_code(opts.fail_on)
    state = "PASSED" if code == 0 else f"FAILED (exit {code})"
    text = render_table(report, verdict=f"preflight {state} (no verdict from the coordinator)")
    return finish(opts, report.to_json(), code, True, text)


def finish(
    opts: Options,
    doc: dict[str, Any],
    code: int,
    full: bool,
    text: str,
    smoke_test: Callable[[], str | None] | None = None,
) -> int:
    emit(opts, doc, text, full)
    if opts.termination_log:
        k8s.write_termination_log(opts.termination_log, doc, code, text)
    if code == 0 and smoke_test is not None:
        err = smoke_test()
        if err:
            print(f"validator: PRE006 smoke all_reduce failed: {err}", file=sys.stderr)
            return 1
    if code == 0 and opts.command:
        try:
            os.execvp(opts.command[0], opts.command)  # the job replaces us: nothing lingers
        except OSError as e:
            raise UserError(f"cannot run {opts.command[0]}: {e.strerror}") from None
    return code
