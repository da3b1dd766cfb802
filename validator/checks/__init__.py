"""All checks, listed in one explicit table, and the runner that turns hits into findings."""

from __future__ import annotations

import gc
from collections.abc import Iterable

from validator.checks import gpu, ib, k8s, meta, net, profile, rank, rdzv, software, system
from validator.checks.base import Check, Hit, Job
from validator.errors import UserError
from validator.model import Facts, Finding, Severity
from validator.profiles import Profile

CHECKS: dict[str, Check] = {
    c.code: c
    for c in (
        rank.duplicate_rank,
        rank.missing_ranks,
        rank.rank_out_of_range,
        rank.world_size_mismatch,
        rank.local_ranks,
        rank.duplicate_node_rank,
        rank.missing_node_ranks,
        rank.world_size_product,
        rank.launch_options,
        k8s.node_count,
        k8s.node_rank_range,
        rdzv.master_addr,
        rdzv.master_port,
        rdzv.split_resolution,
        rdzv.loopback_master,
        rdzv.unresolvable_master,
        rdzv.port_busy,
        rdzv.port_range,
        rdzv.missing_rendezvous,
        gpu.too_few_gpus,
        gpu.shared_gpu,
        gpu.gpu_count,
        gpu.gpu_model,
        gpu.gpu_driver,
        gpu.bad_visible_devices,
        net.nccl_ifname,
        net.gloo_ifname,
        net.loopback_iface,
        net.virtual_iface,
        net.iface_down,
        net.subnets,
        net.iface_names,
        net.mtu,
        ib.transport,
        ib.hca_selects_nothing,
        ib.hca_set,
        ib.port_down,
        ib.rate_link,
        ib.roce_gid,
        software.torch_version,
        software.nccl_version,
        software.cuda_version,
        software.python_version,
        software.env_drift,
        software.env_must_match,
        software.pet_flags,
        software.invalid_values,
        software.command_errors,
        k8s.kubeflow_plain_python,
        system.shm,
        system.memlock,
        system.somaxconn,
        system.nofile,
        profile.nodes,
        profile.ranks_per_node,
        profile.gpus_per_node,
        profile.gpu_model,
        profile.interface,
        profile.versions,
        profile.env,
        profile.hosts,
        profile.launcher,
        profile.master_port,
        meta.collector_errors,
    )
}

# Codes that are not checks over facts but findings of other stages (preflight, diagnose);
# `validator explain` and the docs list them too. Filled by those stages' modules.
FAMILIES = ("RNK", "RDZ", "GPU", "NET", "IB", "SW", "ENV", "SYS", "PRF", "COL", "DGN", "PRE", "NOD", "VAL")


def select(codes: Iterable[str], select: list[str], ignore: list[str], known: Iterable[str]) -> list[str]:
    """Filter codes by prefix, flake8-style: ``--select RNK,RDZ001 --ignore RNK009``."""
    known = list(known)
    for prefix in [*select, *ignore]:
        if not any(k.startswith(prefix.upper()) for k in known):
            raise UserError(f"unknown check code or prefix {prefix!r} (see `validator explain --list`)")
    out = []
    for code in codes:
        if select and not any(code.startswith(p.upper()) for p in select):
            continue
        if any(code.startswith(p.upper()) for p in ignore):
            continue
        out.append(code)
    return out


def to_finding(job: Job, chk: Check, hit: Hit) -> Finding:
    ranks = hit.ranks if hit.ranks is not None else sorted({r for i in hit.members if (r := job.rank(i)) is not None})
    hosts = hit.hosts if hit.hosts is not None else list(dict.fromkeys(job.host(i) for i in hit.members))
    return chk.finding(hit.message, ranks=ranks, hosts=hosts, expected=hit.expected, actual=hit.actual, fix=hit.fix,
                       verify=hit.verify, severity=hit.severity)  # fmt: skip


def run_checks(
    facts: list[Facts],
    profile: Profile | None = None,
    codes: Iterable[str] | None = None,
    context: str = "check",
) -> list[Finding]:
    """Run the checks over all participants. A check that raises becomes a VAL900 finding
    naming it; the others still run."""
    job = Job(facts, profile, context)
    findings: list[Finding] = []
    # The facts of 100,000 ranks are millions of objects without cycles; a cyclic collection
    # triggered by the checks' own allocations would walk them all, several times.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for code in CHECKS if codes is None else [c for c in codes if c in CHECKS]:
            findings.extend(_run_one(job, code))
    finally:
        if collecting:
            gc.enable()
    return sorted(findings, key=lambda f: (-f.severity, f.code))


def _run_one(job: Job, code: str) -> list[Finding]:
    chk = CHECKS[code]
    try:
        return [to_finding(job, chk, hit) for hit in chk.fn(job)]
    except Exception as e:  # noqa: BLE001 - a buggy check becomes a VAL900 finding, the others still run
        return [
            Finding(
                code="VAL900",
                severity=Severity.ERROR,
                title="Check crashed",
                message=f"check {code} raised {type(e).__name__}: {e}",
                fix="report this bug with the facts files",
                verify="",
            )
        ]
