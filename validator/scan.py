"""`validator scan`: targets -> a transport (ssh, slurm, kubectl, local, openssh) -> agent -> facts ->
checks -> report (+ the optional net check through the same transport). The stages meet in
validator.pipeline; this module only chooses the transport and runs the scan's phases."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from validator import cliopts
from validator.documents import ExcludeDoc, NetCheckDoc, ProbesDoc, ScanDoc
from validator.errors import UserError
from validator.model import Facts, Finding, Outcome, Report, Severity
from validator.pipeline import check, keep, to_facts
from validator.probes.exclude import exclusion
from validator.profiles import Profile, load_profile
from validator.transports import Gathered, OnDone, Program, Transport

if TYPE_CHECKING:
    from collections.abc import Callable

    from validator.probes.rounds import Probed
    from validator.report.options import RenderOptions


@dataclass
class ScanOptions:
    """The scan's options. A transport reads its own (its ``Flags``); the fields only one
    transport reads are that transport's ``owns`` in ``validator/transports/table.py``."""

    targets: list[str] = field(default_factory=list)  # hostlists and @files
    slurm: bool = False  # gather through one srun step of the current allocation
    slurm_nodes: str | None = None  # with --slurm: only these nodes of the allocation
    partition: str | None = None  # targets: every node of this partition (sinfo), over SSH
    k8s: bool = False  # the pods ``selector`` matches, through kubectl exec
    selector: str | None = None  # with --k8s: kubectl's -l
    namespace: str | None = None  # with --k8s: kubectl's -n (default: the context's)
    context: str | None = None  # with --k8s: a kubeconfig context other than the current one
    local: bool = False  # this machine, through a local python3
    openssh: bool = False  # the targets through the system ssh client (its whole config)
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
    net_check_pairs: cliopts.NetPairs = "rings"  # the rings' links, or every pair (netcheck/sweep.py)
    probes: bool = False  # the node probes (compute, memory), judged against the peers
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
    net_check: NetCheckDoc | None = None  # counts, the links' figures, suspects measured alone
    probes: ProbesDoc | None = None  # --probes: each node's figures, the statistics, the rounds
    exclude: ExcludeDoc | None = None  # the drain list and the slow nodes, in each launcher's form
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
            "probes": self.probes,
            "exclude": self.exclude or exclusion(self.targets, self.drain, {}),
            "warnings": self.warnings,
            "failed": self.failed,
        }


def open_transport(opts: ScanOptions) -> tuple[Transport, list[str]]:
    """The transport the options choose (its entry in ``TRANSPORTS``) and its targets, from its
    own options; a usage error before anything runs."""
    import importlib

    from validator.transports.table import TRANSPORTS

    flagged = [e for e in TRANSPORTS.values() if e.flag and getattr(opts, e.chosen_by)]
    if len(flagged) > 1:
        raise UserError(f"{' and '.join(str(e.flag) for e in flagged)} exclude each other: choose one transport")
    chosen = flagged[0] if flagged else next(e for e in TRANSPORTS.values() if e.flag is None)
    module = importlib.import_module(chosen.module)
    reads = set(module.Flags.__annotations__)  # an option another transport owns and this one reads is fine
    for e in TRANSPORTS.values():
        if e is not chosen and any(getattr(opts, name) for name in e.owns if name not in reads):
            raise UserError(e.misplaced.format(chosen=chosen.flag))
    opener: Callable[[ScanOptions], tuple[Transport, list[str]]] = module.from_options
    return opener(opts)


async def _gather(
    transport: Transport, opts: ScanOptions, profile: Profile | None, hosts: list[str], on_done: OnDone, note: Any
) -> tuple[NetCheckDoc | None, list[Finding], Probed | None]:
    """The agent on every target, then (optionally) the node probes and the net check through the
    same transport, one after the other. Returns (net-check summary, net-check findings, probes)."""
    from validator.transports import agent_source

    # --env values travel on the agent's stdin, never on the command line
    job = Program(agent_source(), ["--no-port-probe"], env=opts.env, timeout=opts.timeout)
    async with transport:
        gathered = await transport.run(job, hosts, on_done)
        probed = await _probes(transport, hosts, gathered, opts, profile, note) if opts.probes else None
        if not opts.net_check:
            return None, [], probed
        return (*await _net_check(transport, hosts, gathered, opts, profile, note), probed)


async def _probes(
    transport: Transport, hosts: list[str], gathered: Gathered, opts: ScanOptions, profile: Profile | None, note: Any
) -> Probed | None:
    """The node probes (validator/probes/) on every node that answered, through the transport:
    each probe everywhere at once, then suspects and controls alone (probes/rounds.py), against the
    peers and the profile's baseline for each node's hardware (its GPU model from the facts)."""
    from pathlib import Path

    from validator.probes import compute, memory, rounds

    reached = [h for h in hosts if isinstance(gathered.get(h), dict)]
    if not reached:
        return None
    note(f"probes: compute and memory on {len(reached)} nodes")
    sources = {"compute": Path(compute.__file__).read_text(), "memory": Path(memory.__file__).read_text()}

    async def probe_round(kind: rounds.Kind, nodes: list[str]) -> rounds.Answers:
        job = Program(sources[kind], [], timeout=opts.timeout, answer=lambda d: d.get("probe") == kind)
        ran = await transport.run(job, nodes)
        return {h: r if isinstance(r, dict) else f"{r.status}: {r.detail}"[:300] for h, r in ran.items()}

    facts = {h: to_facts(h, r) if isinstance(r := gathered.get(h), dict) else None for h in reached}
    hardware = {h: hw for h, f in facts.items() if (hw := rounds.gpu_model(f))}
    return await rounds.run(reached, probe_round, baselines=profile.baselines if profile else None, hardware=hardware)


async def _net_check(
    transport: Transport, hosts: list[str], gathered: Gathered, opts: ScanOptions, profile: Profile | None, note: Any
) -> tuple[NetCheckDoc | None, list[Finding]]:
    """Listen on every node's chosen address, probe and measure along the rings (validator/
    netcheck/) through the same transport: (summary, NET1xx findings). The rings follow the
    target order (node rank order)."""
    import json
    from pathlib import Path

    from validator.facts.network import uses_nccl
    from validator.netcheck import allreduce as collective_probe
    from validator.netcheck import collective, rounds
    from validator.netcheck import probe as netprobe
    from validator.netcheck.ring import Plans, Results, scoped

    loaded = [f for h in hosts if isinstance(r := gathered.get(h), dict) and not isinstance(f := to_facts(h, r), str)]
    nodes = rounds.nodes(loaded, uses_nccl(loaded, profile.gpus_per_node if profile else None))
    if len(nodes) < 2:
        note("net check skipped: fewer than two nodes with an address to probe")
        return None, []
    note(f"net check: listening on {len(nodes)} nodes")
    source = Path(netprobe.__file__).read_text()
    lifetime = opts.net_timeout * (len(nodes) // 64 + 4) + opts.timeout + 60
    if opts.net_check_pairs == "all":  # and a round of one pair per node for each round of every pair
        lifetime += len(nodes) * (opts.net_timeout * 2 + 10)
    listen = Program(source, {n.label: ["listen", scoped(str(n.addr), n.iface)] for n in nodes}, timeout=lifetime,
                 answer=lambda d: "port" in d or "error" in d)  # fmt: skip
    started = await transport.start(listen, [n.label for n in nodes])
    for n in nodes:
        got = started.get(n.label)
        if isinstance(got, Outcome) or got is None:
            n.error = f"the listener did not start: {got.detail if got else 'no answer'}"
        elif isinstance(got.get("port"), int) and isinstance(got.get("token"), str):
            n.port, n.token = int(got["port"]), str(got["token"])
        else:
            n.error, n.bind = str(got.get("error"))[:300], True

    async def probe_round(plans: Plans) -> Results:
        busy = {h: p for h, p in plans.items() if p}
        if not busy:
            return {}
        per = max(len(p) for p in busy.values())
        budget = opts.net_timeout * (per // netprobe.PROBE_THREADS + 2) + 10
        job = Program(source, ["probe", str(opts.net_timeout)], {h: json.dumps(p) for h, p in busy.items()},
                  timeout=budget, answer=lambda d: isinstance(d.get("results"), list))  # fmt: skip
        ran = await transport.run(job, list(busy))
        return {
            h: list(r["results"]) if isinstance(r, dict) else f"the prober failed: {r.detail}" for h, r in ran.items()
        }

    by_label = {n.label: n for n in nodes}
    ar_source = Path(collective_probe.__file__).read_text()
    limit = collective.timeout(opts.net_timeout)

    async def allreduce(pairs: list[collective.Pair]) -> dict[collective.Pair, Any]:
        """Rank 0 of each pair started (its store's port), rank 1 run; rank 0 ends with the stop."""
        note(f"net check: all_reduce on {len(pairs)} pairs")
        serve = Program(ar_source, {a: collective.serve_argv(by_label[a], limit) for a, _ in pairs},
                        timeout=limit * 3 + 30, answer=lambda d: "port" in d or "error" in d)  # fmt: skip
        started = await transport.start(serve, [a for a, _ in pairs])
        out: dict[collective.Pair, Any] = {}
        joins: dict[str, list[str]] = {}
        for a, b in pairs:
            got = started.get(a)
            argv = collective.join_argv(
                by_label[a], got.detail if isinstance(got, Outcome) else got, by_label[b], limit
            )
            if isinstance(argv, str):
                out[(a, b)] = argv
            else:
                joins[b] = argv
        try:
            if joins:
                job = Program(
                    ar_source, joins, timeout=limit * 3 + 30, answer=lambda d: "allreduce" in d or "error" in d
                )
                ran = await transport.run(job, list(joins))
                for a, b in pairs:
                    if b in joins:
                        r = ran.get(b)
                        out[(a, b)] = r if isinstance(r, dict) else (r.detail if r else "no answer")
        finally:
            await transport.stop()
        return out

    try:
        outcome = await rounds.run(nodes, probe_round, opts.net_check_pairs, allreduce)
    finally:
        await transport.stop()
    return outcome.doc, outcome.findings


def scan(opts: ScanOptions) -> ScanResult:
    """Scan the targets; Ctrl-C stops the fan-out and returns what was gathered so far."""
    import asyncio

    from validator.drain import drain_hosts, scan_failure
    from validator.targets import fold_hosts
    from validator.transports.progress import Progress

    started = time.monotonic()
    profile = load_profile(opts.profile) if opts.profile else None  # bad profile: exit 2 before connecting
    transport, hosts = open_transport(opts)
    cliopts.net_pairs(opts.net_check_pairs, opts.net_check, len(hosts))  # above the cap: exit 2 before connecting
    gathered: dict[str, Any] = {}
    net_check: NetCheckDoc | None = None
    net_findings: list[Finding] = []
    probed: Probed | None = None
    interrupted = False
    with Progress(len(hosts), bar=opts.progress, verbose=opts.verbose) as progress:

        def done(target: str, result: Any) -> None:
            gathered[target] = result
            progress(target, result)

        try:
            net_check, net_findings, probed = asyncio.run(_gather(transport, opts, profile, hosts, done, progress.note))
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
        elif isinstance(f := to_facts(host, result), str):
            outcomes.append(Outcome(host, "unparsed", f))
        else:
            facts.append(f)
    report = check(facts, profile, opts.codes, context="scan", outcomes=outcomes, title=f"scan of {fold_hosts(hosts)}")
    measured = net_findings + (probed.findings if probed else [])
    if measured:
        report.findings = sorted(report.findings + keep(measured, opts.codes), key=lambda f: (-f.severity, f.code))
    failed = scan_failure(report, len(hosts), transport.name) if not interrupted else None
    drain = [] if failed else drain_hosts(report, opts.fail_on)
    return ScanResult(
        report,
        drain,
        transport.name,
        hosts,
        interrupted,
        time.monotonic() - started,
        net_check,
        probed.doc if probed else None,
        taken_out(hosts, drain, report.findings, facts, transport.name),
        transport.warnings,
        failed,
    )


def taken_out(
    hosts: list[str], drain: list[str], findings: list[Finding], facts: list[Facts], transport: str
) -> ExcludeDoc:
    """The drain list and the slow nodes (NET105, PRB001, PRB002), out of the allocation
    (SLURM_JOB_NODELIST, when it holds them) or the scanned hosts."""
    import os

    from validator.probes.exclude import slow_hosts
    from validator.targets import expand

    slow = slow_hosts(findings)
    base = hosts
    if os.environ.get("SLURM_JOB_NODELIST"):
        with contextlib.suppress(UserError):
            alloc = expand(os.environ["SLURM_JOB_NODELIST"])
            base = alloc if set(hosts) <= set(alloc) else hosts
    out = [h for h in base if h in drain or h in slow] + sorted((set(drain) | slow) - set(base))
    slots = {f["host"]: len(f["gpus"]["devices"]) for f in facts if isinstance(f.get("gpus"), dict)}
    return exclusion(base, out, slots, pods=transport == "kubectl")


def write_drain_list(result: ScanResult, path: str) -> None:
    """One host per line (for `scontrol update nodename=... state=drain`); empty when none."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(f"{h}\n" for h in result.drain))
    except OSError as e:
        raise UserError(f"cannot write the drain list: {e.strerror}", path) from None


def render_scan(result: ScanResult, fmt: str, options: RenderOptions) -> str:
    """The report in ``fmt``, with the scan's own sections (``scan``, ``drain``)."""
    from dataclasses import replace

    from validator.report import render

    if fmt == "table" and result.drain and options.verdict is None:
        from validator.targets import fold_hosts

        n = len(result.drain)
        options = replace(options, verdict=f"drain: {fold_hosts(result.drain)} ({n} host{'s' if n != 1 else ''})")
    return render(replace(result.report, scan=result.scan_json(), drain=result.drain), fmt, options)
