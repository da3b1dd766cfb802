"""The one place where the stages meet: targets -> transport -> agent -> facts -> checks -> report.

The CLI parses options and calls these functions; transports move bytes and know no checks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from validator.agent import probe as agent
from validator.documents import ScanDoc, ScanReportDoc
from validator.errors import UserError
from validator.facts import load_facts, parse
from validator.facts.command import parse_command
from validator.facts.files import load_file
from validator.facts.launch import parse_launch
from validator.facts.share import Shared
from validator.model import Facts, Finding, Outcome, Report, Severity
from validator.profiles import Profile, load_profile

# validator.checks is imported where it is used: preflight participants only probe and never check.


def probe_local(argv: list[str] | None = None, environ: dict[str, str] | None = None, port_check: bool = True) -> Facts:
    """Facts of this process on this node, for the launch command ``argv`` if one is given."""
    env = dict(os.environ if environ is None else environ)
    launch = parse_launch(agent.filtered_env(env), parse_command(argv) if argv else None)
    names = tuple(n for n in (launch["master_addr"],) if n)
    raw = agent.collect(argv, names, environ=env, port_check=port_check, port=launch["master_port"])
    return parse(raw)


def load_inputs(paths: Iterable[str]) -> tuple[list[Facts], list[str]]:
    """Every readable facts document, and one error line per unreadable one (nothing is lost:
    the good documents are still checked)."""
    facts: list[Facts] = []
    errors: list[str] = []
    shared = Shared()  # a node's ranks, in one file or one file each: their common parts held once
    for path in paths:
        loaded, bad = load_file(path, shared)
        facts += loaded
        errors += bad
    return facts, errors


def resolve_codes(select_: list[str], ignore: list[str]) -> list[str]:
    """Every known code (checks, and the findings of preflight, scan and diagnose) kept by
    --select/--ignore; the checks not kept are not run, other findings not kept are dropped."""
    from validator.checks import select
    from validator.docs import all_checks

    known = list(all_checks())
    return select(known, select_, ignore, known)


def keep(findings: list[Finding], codes: list[str] | None) -> list[Finding]:
    """Findings that are not check results (net checks, rendezvous), filtered like the checks."""
    return findings if codes is None else [f for f in findings if f.code in set(codes)]


def check(
    facts: list[Facts],
    profile: Profile | None = None,
    codes: list[str] | None = None,
    context: str = "check",
    outcomes: list[Outcome] | None = None,
    input_errors: list[str] | None = None,
    title: str = "cluster-validator check",
) -> Report:
    from validator.checks import run_checks

    findings = run_checks(facts, profile, codes, context)
    return Report(
        findings=findings,
        participants=len(facts),
        hosts=list(dict.fromkeys(f["host"] for f in facts)),
        outcomes=outcomes or [],
        input_errors=input_errors or [],
        title=title,
    )


def check_files(paths: list[str], profile_path: str | None, codes: list[str]) -> Report:
    """Check every readable facts document; a bad profile is reported like a bad facts file
    (exit 2) while the facts are still checked without it."""
    errors: list[str] = []
    try:
        profile = load_profile(profile_path) if profile_path else None
    except UserError as e:
        profile = None
        errors.append(str(e))
    facts, fact_errors = load_inputs(paths)
    errors += fact_errors
    if not facts and not errors:
        errors.append("no facts documents in the given files")
    return check(facts, profile, codes, input_errors=errors)


# =============================================================================================
# scan: `validator scan` -- targets -> SSH fan-out or one srun step -> agent -> facts -> checks
# -> report (+ the optional net check). Everything below belongs to the scan; the functions
# above are shared by every command.
# =============================================================================================


@dataclass
class ScanOptions:
    targets: list[str] = field(default_factory=list)  # hostlists and @files
    slurm: bool = False  # gather through one srun step of the current allocation
    slurm_nodes: str | None = None  # with --slurm: only these nodes of the allocation
    partition: str | None = None  # targets: every node of this partition (sinfo), over SSH
    profile: str | None = None
    codes: list[str] | None = None
    fail_on: Severity | None = Severity.ERROR  # findings at this level put a node on the drain list
    fanout: int = 64
    connect_timeout: float = 10.0
    timeout: float = 60.0
    ssh_config: list[str] | None = None  # None: ~/.ssh/config and /etc/ssh/ssh_config
    user: str | None = None
    accept_new_host_keys: bool = False
    env: dict[str, str] = field(default_factory=dict)  # the job's settings, as the agent sees them
    python: str = "python3"
    net_check: bool = False
    net_timeout: float = 3.0
    progress: bool = False  # a progress bar on stderr
    verbose: bool = False  # one stderr line per host


@dataclass
class ScanResult:
    report: Report
    drain: list[str]
    transport: str
    targets: list[str]
    interrupted: bool
    elapsed_s: float
    net_check: dict[str, int] | None = None  # nodes listened on, probes made, probes failed
    warnings: list[str] = field(default_factory=list)
    failed: str | None = None  # the scan itself failed (scanner-side): exit 2, nothing to drain

    def scan_json(self) -> ScanDoc:
        return {
            "transport": self.transport,
            "targets": len(self.targets),
            "reached": len(self.report.hosts),
            "interrupted": self.interrupted,
            "elapsed_s": round(self.elapsed_s, 2),
            "net_check": self.net_check,
            "warnings": self.warnings,
            "failed": self.failed,
        }

    def to_json(self) -> ScanReportDoc:
        """The report's JSON (docs/scan.md), with the scan's own ``scan`` and ``drain``."""
        return {**self.report.document(), "scan": self.scan_json(), "drain": self.drain}


OnResult = Callable[[str, Any], None]  # a host's raw document or Outcome, as soon as it is known
Note = Callable[[str], None]  # a phase line for the progress display
NetOutcome = tuple["dict[str, int] | None", "list[Finding]"]


def scan_targets(opts: ScanOptions) -> tuple[list[str], str]:
    """(hosts, transport): hostlists/@files/a partition over SSH, or the allocation over srun."""
    from validator.targets import expand, expand_targets
    from validator.transports import slurm

    if opts.slurm:
        if opts.targets or opts.partition:
            raise UserError("--slurm scans the current allocation; give no TARGETS or --partition with it")
        nodes = slurm.allocation_nodes()
        if opts.slurm_nodes:
            wanted = expand(opts.slurm_nodes)
            outside = [n for n in wanted if n not in nodes]
            if outside:
                raise UserError(f"not in this allocation: {', '.join(outside[:5])}", "--slurm-nodes")
            nodes = wanted
        return nodes, "slurm"
    if opts.slurm_nodes:
        raise UserError("--slurm-nodes needs --slurm (it selects nodes of the current allocation)")
    hosts = expand_targets(opts.targets)
    if opts.partition:
        hosts = list(dict.fromkeys(hosts + slurm.partition_nodes(opts.partition)))
    if not hosts:
        raise UserError("nothing to scan: give a hostlist, @file, --partition or --slurm")
    return hosts, "ssh"


def _agent_args() -> list[str]:
    return ["--no-port-probe"]


async def _scan_ssh(
    opts: ScanOptions, profile: Profile | None, hosts: list[str], on_done: OnResult, note: Note
) -> tuple[dict[str, int] | None, list[Finding], list[str]]:
    """SSH fan-out of the agent, then (optionally) the net check over the same connections.
    Returns (net-check summary, net-check findings, warnings)."""
    from validator.transports import agent_source, bootstrap, remote_command, stdin_payload
    from validator.transports.ssh import Fleet, SshOptions, default_config_paths

    ssh = SshOptions(
        fanout=opts.fanout,
        connect_timeout=opts.connect_timeout,
        command_timeout=opts.timeout,
        config=default_config_paths() if opts.ssh_config is None else list(opts.ssh_config),
        username=opts.user,
        accept_new_host_keys=opts.accept_new_host_keys,
    )
    ssh.check()
    command = remote_command(opts.python, bootstrap(opts.timeout), _agent_args())
    stdin = stdin_payload(opts.env, agent_source())  # --env values travel here, never on the command line
    async with Fleet(ssh) as fleet:
        gathered = await fleet.gather(hosts, command, stdin, on_done, opts.python, keep=opts.net_check)
        if not opts.net_check:
            return None, [], fleet.warnings

        async def listen(addrs: dict[str, str], lifetime: float) -> dict[str, dict[str, Any]]:
            return await fleet.listen_all(addrs, opts.python, lifetime)

        async def probe(plans: dict[str, list[list[Any]]]) -> dict[str, Any]:
            try:
                return dict(await fleet.probe_all(plans, opts.python, opts.net_timeout))
            finally:
                await fleet.stop_listeners()

        return (*await _net_check(hosts, gathered, opts, profile, note, listen, probe), fleet.warnings)


async def _scan_slurm(
    opts: ScanOptions, profile: Profile | None, hosts: list[str], on_done: OnResult, note: Note
) -> tuple[dict[str, int] | None, list[Finding], list[str]]:
    """One srun step of the agent, then (optionally) the net check as two overlapping steps."""
    from validator.transports import slurm

    gathered = await slurm.gather(hosts, _agent_args(), opts.env, opts.timeout, on_done, opts.python)
    if not opts.net_check:
        return None, [], []
    step: list[Any] = []

    async def listen(addrs: dict[str, str], lifetime: float) -> dict[str, dict[str, Any]]:
        proc, listening = await slurm.listen_all(addrs, opts.python, lifetime, opts.timeout + slurm.START_SLACK_S)
        step.append(proc)
        return listening

    async def probe(plans: dict[str, list[list[Any]]]) -> dict[str, Any]:
        try:
            return dict(await slurm.probe_all(plans, opts.python, opts.net_timeout))
        finally:
            await slurm.stop(step[0])

    return (*await _net_check(hosts, gathered, opts, profile, note, listen, probe), [])


async def _net_check(
    hosts: list[str],
    gathered: dict[str, Any],
    opts: ScanOptions,
    profile: Profile | None,
    note: Note,
    listen: Callable[[dict[str, str], float], Awaitable[dict[str, dict[str, Any]]]],
    probe: Callable[[dict[str, list[list[Any]]]], Awaitable[dict[str, Any]]],
) -> NetOutcome:
    """Listen on every node's chosen address, probe along the ring and from the first node:
    (summary, NET1xx findings). The ring follows the target order (node rank order)."""
    from validator.checks import netcheck

    loaded = [_to_facts(h, r) for h in hosts if isinstance(r := gathered.get(h), dict)]
    addrs = _net_addrs([f for f in loaded if not isinstance(f, str)], profile)
    if len(addrs) < 2:
        note("net check skipped: fewer than two nodes with an address to probe")
        return None, []
    note(f"net check: listening on {len(addrs)} nodes")
    lifetime = opts.net_timeout * (len(addrs) // 64 + 4) + opts.timeout + 60
    listening = await listen(addrs, lifetime)
    plans = _net_plans([h for h in addrs if "port" in listening[h]], addrs, listening)
    results = await probe(plans)
    made = [r for res in results.values() if isinstance(res, list) for r in res]
    summary = {"nodes": len(addrs), "probes": len(made), "failed": sum(1 for r in made if not r.get("ok"))}
    return summary, netcheck.findings(addrs, listening, plans, results)


def _to_facts(host: str, raw: dict[str, Any]) -> Facts | str:
    """The node's facts, labelled with the name it was scanned as; or why they do not load."""
    try:
        facts = load_facts(raw, host)
    except UserError as e:
        return str(e)
    facts["host"] = host
    return facts


def _net_addrs(facts: list[Facts], profile: Profile | None) -> dict[str, str]:
    """host -> the address NCCL (GPU jobs) or Gloo (CPU jobs) would use there."""
    from validator.checks.base import Job

    lib = "nccl" if Job(facts, profile, "scan").uses_gpus else "gloo"
    return {f["host"]: str(f["network"][lib]["addr"]) for f in facts if f["network"][lib]["addr"]}  # type: ignore[literal-required]


def _net_plans(
    order: list[str], addrs: dict[str, str], listening: dict[str, dict[str, Any]]
) -> dict[str, list[list[Any]]]:
    """Each node is probed by its ring predecessor, and every node by the first one."""
    plans: dict[str, list[list[Any]]] = {h: [] for h in order}
    for i, src in enumerate(order):
        dests = [order[(i + 1) % len(order)]] if i else [d for d in order if d != src]
        for dest in dests:
            if dest != src:
                plans[src].append([dest, addrs[dest], listening[dest]["port"], listening[dest]["token"]])
    return plans


def scan(opts: ScanOptions) -> ScanResult:
    """Scan the targets; Ctrl-C stops the fan-out and returns what was gathered so far."""
    import asyncio
    import time

    from validator.report.html import drain_hosts, scan_failure
    from validator.transports.progress import Progress

    started = time.monotonic()
    profile = load_profile(opts.profile) if opts.profile else None  # bad profile: exit 2 before connecting
    hosts, transport = scan_targets(opts)
    gathered: dict[str, Any] = {}
    net_check: dict[str, int] | None = None
    net_findings, warnings = list[Finding](), list[str]()
    interrupted = False
    with Progress(len(hosts), bar=opts.progress, verbose=opts.verbose) as progress:

        def done(target: str, result: Any) -> None:
            gathered[target] = result
            progress(target, result)

        try:
            if transport == "slurm":
                net_check, net_findings, warnings = asyncio.run(_scan_slurm(opts, profile, hosts, done, progress.note))
            else:
                net_check, net_findings, warnings = asyncio.run(_scan_ssh(opts, profile, hosts, done, progress.note))
        except KeyboardInterrupt:
            interrupted = True
    facts: list[Facts] = []
    outcomes: list[Outcome] = []
    for host in [*hosts, *(h for h in gathered if h not in hosts)]:
        result = gathered.get(host)
        if result is None:
            outcomes.append(Outcome(host, "interrupted", "the scan was interrupted before this host answered"))
        elif isinstance(result, Outcome):
            outcomes.append(result)
        elif isinstance(f := _to_facts(host, result), str):
            outcomes.append(Outcome(host, "unparsed", f))
        else:
            facts.append(f)
    from validator.targets import fold_hosts

    report = check(facts, profile, opts.codes, context="scan", outcomes=outcomes, title=f"scan of {fold_hosts(hosts)}")
    if net_findings:
        report.findings = sorted(report.findings + keep(net_findings, opts.codes), key=lambda f: (-f.severity, f.code))
    failed = scan_failure(report, len(hosts)) if not interrupted else None
    return ScanResult(
        report,
        [] if failed else drain_hosts(report, opts.fail_on),
        transport,
        hosts,
        interrupted,
        time.monotonic() - started,
        net_check,
        warnings,
        failed,
    )


def render_scan(result: ScanResult, fmt: str, **options: Any) -> str:
    """The report in ``fmt``; JSON carries the scan's own fields (``scan``, ``drain``)."""
    from validator.report import render

    if fmt == "json":
        from validator.schema import self_check

        doc = result.to_json()
        self_check(doc, "report")
        return json.dumps(doc, indent=2) + "\n"
    if fmt == "table" and result.drain:
        from validator.targets import fold_hosts

        n = len(result.drain)
        options.setdefault("verdict", f"drain: {fold_hosts(result.drain)} ({n} host{'s' if n != 1 else ''})")
    return render(result.report, fmt, drain=result.drain, scan=result.scan_json(), **options)


def write_drain_list(result: ScanResult, path: str) -> None:
    """One host per line (for `scontrol update nodename=... state=drain`); empty when none."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(f"{h}\n" for h in result.drain))
    except OSError as e:
        raise UserError(f"cannot write the drain list: {e.strerror}", path) from None
