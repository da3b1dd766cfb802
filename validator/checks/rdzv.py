"""RDZ: the rendezvous endpoint. Everyone agrees on MASTER_ADDR:MASTER_PORT, it resolves to the
same routable address everywhere, and the port is free on the master."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from validator.agent.probe import redact_command
from validator.checks.base import Check, Hit, Job, all_in_range, check, describe, majority_of, outliers
from validator.codes import table
from validator.facts.network import is_loopback
from validator.model import Launcher, Severity

DERIVING_LAUNCHERS: tuple[Launcher, ...] = ("slurm", "mpi", "mpich", "flux")
RESOLVE = "getent ahosts {addr}   # on each named host: the same non-loopback address everywhere"


def _first(job: Job, i: int) -> str | None:
    return _firsts(job)[i]


def _masters(job: Job) -> tuple[list[int], dict[int, Any]]:
    """Every participant's network facts' id, by index, and id -> their MasterFacts (or None):
    one network object per node (facts.share), so the RDZ checks read each node's once."""

    def compute() -> tuple[list[int], dict[int, Any]]:
        nets = job.section("network")
        ids = list(map(id, nets))
        return ids, {k: n["master"] for k, n in dict(zip(ids, nets, strict=True)).items()}

    return job.memo("rdzv.masters", compute)


def _master(job: Job, i: int) -> Any:
    """Participant ``i``'s MasterFacts (or None)."""
    return job.section("network")[i]["master"]


def _where(job: Job, test: Callable[[Any], Any]) -> list[int]:
    """Participants whose MasterFacts pass ``test`` (asked once per distinct object), in order."""
    ids, masters = _masters(job)
    hit = {k for k, m in masters.items() if test(m)}
    return [i for i, k in enumerate(ids) if k in hit] if hit else []


def _firsts(job: Job) -> list[str | None]:
    """The first address MASTER_ADDR resolves to, for every participant (computed once)."""

    def compute() -> list[str | None]:
        ids, masters = _masters(job)
        first = {k: m["resolved"][0] if m and m["resolved"] else None for k, m in masters.items()}
        return list(map(first.__getitem__, ids))

    return job.memo("rdzv.firsts", compute)


def _loopback_members(job: Job) -> tuple[int, ...]:
    return job.memo("rdzv.loopback", lambda: _find_loopback(job))


def _find_loopback(job: Job) -> tuple[int, ...]:
    """Participants whose MASTER_ADDR resolves to loopback where that cannot work: the job
    spans hosts, or their peers reach the master on a routable address."""
    firsts = _firsts(job)
    # all addresses loopback implies the first one is: look closer only at those
    # (each distinct address parsed once: 100,000 ranks name a handful)
    loopback = {a: is_loopback(a) for a in set(firsts) if a}
    if not any(loopback.values()):
        return ()
    loop = [i for i, a in enumerate(firsts) if a and loopback[a] and _master(job, i)["loopback"]]
    if loop and (job.multi_node or len(loop) < len(firsts) - firsts.count(None)):
        return tuple(loop)
    return ()


@check("RDZ001", Severity.ERROR, "MASTER_ADDR differs")
def master_addr(job: Job) -> Iterator[Hit]:
    """Every rank points at the same master: the same MASTER_ADDR, or names that resolve to the
    same address (compared with the peer majority).

    Ranks that look for the store on different hosts never meet: one side waits for clients
    ("1/2 clients joined"), the other times out connecting.

    Set MASTER_ADDR once for the job (first host of $SLURM_JOB_NODELIST, the master Service
    name) and pass it unchanged to every node.
    """
    skip = set(_loopback_members(job))
    firsts, column = _firsts(job), job.column("master_addr")
    # the usual job: every rank names the master, and the name resolved everywhere
    if not skip and None not in column and "" not in column and None not in firsts and "" not in firsts:
        members: list[int] = list(range(len(job)))
        keys: list[str | None] = firsts  # every rank resolved its MASTER_ADDR
    else:
        members = [i for i, name in enumerate(column) if name and i not in skip]
        # a rank that could not resolve the name is RDZ005's; here it counts as pointing where
        # that name resolves for its peers
        names = [column[i] for i in members]
        resolved: dict[str, str] = {}
        for i, name in zip(members, names, strict=True):
            if name not in resolved and (first := firsts[i]):
                resolved[name] = first
        keys = [firsts[i] or resolved.get(name, name) for i, name in zip(members, names, strict=True)]
    expected, groups = majority_of(members, keys, job.is_reference)
    for value, who in outliers(groups, expected):
        names = sorted({job.launch(i)["master_addr"] for i in who})
        yield Hit(
            f"MASTER_ADDR {', '.join(names)} ({value}) where the rest of the job uses {expected} ({describe(job, groups)})",
            who,
            expected=str(expected),
            actual=", ".join(names),
            fix=f"set MASTER_ADDR to the master ({expected}) on every rank",
            verify="validator check FACTS... --select RDZ001",
        )


@check("RDZ002", Severity.ERROR, "MASTER_PORT differs")
def master_port(job: Job) -> Iterator[Hit]:
    """Every rank uses the same MASTER_PORT (compared with the peer majority).

    A rank with another port connects to nothing (`The client socket has timed out after ...
    while trying to connect to (host, port)`) while the master waits for it.

    Set MASTER_PORT once for the job and pass it unchanged to every node.
    """
    expected, groups = job.majority(range(len(job)), job.column("master_port").__getitem__)
    for value, who in outliers(groups, expected):
        yield Hit(
            f"MASTER_PORT={value} where the rest of the job uses {expected}",
            who,
            expected=str(expected),
            actual=str(value),
            fix=f"use MASTER_PORT={expected} on every rank",
            verify="validator check FACTS... --select RDZ002",
        )


@check("RDZ003", Severity.ERROR, "MASTER_ADDR resolves differently on different nodes")
def split_resolution(job: Job) -> Iterator[Hit]:
    """The same MASTER_ADDR name resolves to the same address on every node.

    Split DNS, a stale /etc/hosts entry or a search domain that differs per node sends some ranks
    to another machine; they time out connecting while the master waits for them.

    Fix the name service on the outlier nodes (compare /etc/hosts and resolv.conf), or set
    MASTER_ADDR to an IP address.
    """
    skip = set(_loopback_members(job))
    firsts = _firsts(job)
    _, named = majority_of(range(len(job)), job.column("master_addr"), job.is_reference)  # grouped at C speed
    by_name = {name: members for name, members in named.items() if name}
    if skip or None in firsts or "" in firsts:  # ranks that resolved nothing, or to loopback, do not count
        by_name = {n: kept for n, m in by_name.items() if (kept := [i for i in m if firsts[i] and i not in skip])}
    for name, members in by_name.items():
        expected, groups = job.majority(members, firsts.__getitem__)
        for value, who in outliers(groups, expected):
            yield Hit(
                f"{name} resolves to {value} here but to {expected} on the other nodes",
                who,
                expected=str(expected),
                actual=str(value),
                fix=f"make {name} resolve to {expected} on the named hosts (/etc/hosts, DNS)",
                verify=RESOLVE.format(addr=name),
            )


@check("RDZ004", Severity.ERROR, "MASTER_ADDR resolves to loopback")
def loopback_master(job: Job) -> Iterator[Hit]:
    """MASTER_ADDR does not resolve to a loopback address (127.x, ::1) in a job that spans
    several hosts, nor on a rank whose peers reach the master on a routable address.

    Each host then looks for the store on itself: the master waits for clients and the others
    time out. Typical causes: MASTER_ADDR=localhost, the hostname mapped to 127.0.1.1 in
    /etc/hosts, or c10d's rendezvous advertising socket.getfqdn() = localhost.

    Use the master's routable address or a name that resolves to it on every node (remove the
    127.0.1.1 line for the hostname from /etc/hosts, or pass --local-addr to torchrun).
    """
    members = list(_loopback_members(job))
    if members:
        names = sorted({job.launch(i)["master_addr"] for i in members})
        yield Hit(
            f"MASTER_ADDR {', '.join(names)} resolves to loopback ({_first(job, members[0])})"
            + (
                " in a job on several hosts"
                if job.multi_node
                else " while the other ranks reach the master on a routable address"
            ),
            members,
            expected="a routable address of the master",
            actual=str(_first(job, members[0])),
            fix="set MASTER_ADDR to the master's routable address (not localhost / 127.0.1.1)",
            verify=RESOLVE.format(addr=names[0]),
        )


@check("RDZ005", Severity.ERROR, "MASTER_ADDR does not resolve")
def unresolvable_master(job: Job) -> Iterator[Hit]:
    """MASTER_ADDR resolves to an address on every node.

    A name that does not resolve makes every client retry until the timeout (`The IPv6 network
    addresses of (host, port) cannot be retrieved (gai error: -2 ...)`). In Kubernetes the
    master's Service name resolves only once the Service exists, and before the master pod is
    ready only with `publishNotReadyAddresses: true` on a headless Service.

    Fix the name or the resolver on the named hosts; in Kubernetes create a headless Service for
    the master with publishNotReadyAddresses: true.
    """
    groups: dict[tuple[str, str], list[int]] = {}
    for i in _where(job, lambda m: m and not m["resolved"]):
        m = _master(job, i)
        groups.setdefault((str(m["addr"]), str(m["error"])), []).append(i)
    for (name, error), members in groups.items():
        launch = job.launch(members[0])
        endpoint = str(launch.get("rdzv_endpoint") or "")
        fix = f"make {name} resolvable on the named hosts (DNS, /etc/hosts, a headless Service)"
        if (
            endpoint.count(":") > 1
            and not endpoint.startswith("[")
            and "endpoint" in launch["sources"].get("master_addr", "")
        ):
            # torch reads the text after the last colon as the port: fd00::1 is host fd00: port 1
            fix = (f"write the IPv6 endpoint in brackets, [{endpoint}]:PORT: torch takes what follows its last colon "
                   f"as the port (here {launch.get('master_port')}) and {name!r} as the host")  # fmt: skip
        shown = repr(name) if ":" in name else name
        yield Hit(f"MASTER_ADDR {shown}: {error}", members, expected="an address", actual="no address", fix=fix,
                  verify=RESOLVE.format(addr=name))  # fmt: skip


@check("RDZ006", Severity.ERROR, "MASTER_PORT is busy on the master")
def port_busy(job: Job) -> Iterator[Hit]:
    """MASTER_PORT can be bound on the master node before the job starts (not checked inside
    torchrun workers, whose agent holds the port by design).

    The rank-0 TCPStore binds MASTER_PORT; when a stale job or another service holds it, rank 0
    fails with `EADDRINUSE` (`The server socket has failed to listen on any local network
    address`) or, worse, the other ranks connect to the stale job's store.

    Stop the process named in the finding (often a previous run's torchrun that never exited), or
    choose another MASTER_PORT for the whole job.
    """
    busy = _where(job, lambda m: m and m["port_free"] is False)
    for i in busy:
        f = job.facts[i]
        m = f["network"]["master"]
        if f["env"].get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            continue  # a torchrun worker: its own agent holds MASTER_PORT by design
        if m:
            owner = redact_command(m["port_owner"])[:300] if m["port_owner"] else None  # facts of older agents
            yield Hit(
                f"port {m['port']} on {f['host']} is held by {owner or 'another process'}",
                [i],
                expected="free",
                actual=owner or "in use",
                fix=f"stop {owner or 'the process holding the port'}, or pick another MASTER_PORT",
                verify=f"ss -tanp 'sport = :{m['port']}'   # on {f['host']}: nothing holds it",
            )


@check("RDZ007", Severity.ERROR, "MASTER_PORT is not a valid port")
def port_range(job: Job) -> Iterator[Hit]:
    """MASTER_PORT is an integer from 1 to 65535 (0 only for torchrun --standalone).

    torch rejects it at init (`port must have value from 0 to 65535 but was 70000.`) or, for a
    non-integer, raises before any rendezvous, on every rank.

    Set MASTER_PORT (or --master-port) to a free port in 1024-65535 that the firewall allows.
    """
    groups: dict[str, list[int]] = {}
    launches = job.launches
    ports = job.column("master_port")
    if not any(job.column("invalid")) and all_in_range([p - 1 for p in set(ports) if isinstance(p, int)], [65535]):
        return  # nothing invalid, every port from 1 to 65535 (or not set)
    suspects = [
        i
        for i, (bad, p) in enumerate(zip(job.column("invalid"), ports, strict=True))
        if bad or (isinstance(p, int) and not 0 < p < 65536)
    ]
    for i in suspects:  # a handful at most: the rest pass the cheap filter above
        launch = launches[i]
        port = launch["master_port"]
        bad = [f"{k}={v!r}" for k, v in launch["invalid"].items() if "PORT" in k.upper() or "port" in k]
        if isinstance(port, int) and not 0 < port < 65536 and not (port == 0 and launch["rdzv_backend"] == "c10d"):
            bad.append(f"{launch['sources'].get('master_port', 'MASTER_PORT')}={port}")
        for b in bad:
            groups.setdefault(b, []).append(i)
    for what, members in groups.items():
        yield Hit(
            f"invalid master port {what}",
            members,
            expected="1-65535",
            actual=what,
            fix="write the endpoint as HOST:PORT (or --master-addr and --master-port)"
            if "without a port" in what
            else "use a port number in 1024-65535",
            verify="validator check FACTS... --select RDZ007",
        )


@check("RDZ008", Severity.ERROR, "Rendezvous variables missing")
def missing_rendezvous(job: Job) -> Iterator[Hit]:
    """Processes started without torchrun (env:// initialisation) have MASTER_ADDR and
    MASTER_PORT set when WORLD_SIZE > 1 (a warning under srun and MPI launchers, where the job
    script or the framework often derives them after the probe ran).

    init_process_group raises at once on every rank: `Error initializing torch.distributed
    using env:// rendezvous: environment variable MASTER_ADDR expected, but not set`.

    Export MASTER_ADDR (the first node) and MASTER_PORT in the launch script for every rank.
    """
    groups: dict[str, list[int]] = {}
    launchers, modes = job.column("launcher"), job.column("mode")
    candidates = [
        i
        for i, (lc, m) in enumerate(zip(launchers, modes, strict=True))
        if m == "rank" and lc not in ("torchrun", "none")
    ]
    for i in candidates:
        launch = job.launches[i]
        if not isinstance(launch["world_size"], int) or launch["world_size"] <= 1:
            continue
        missing = [v for v, k in (("MASTER_ADDR", "master_addr"), ("MASTER_PORT", "master_port")) if launch[k] is None]
        if missing:
            groups.setdefault(" and ".join(missing), []).append(i)
    for what, members in groups.items():
        launcher = job.launch(members[0])["launcher"]
        # under srun/mpirun the variables are often exported later by the job script or derived by
        # the framework (Lightning, DeepSpeed's MPI discovery): a warning, not a certain failure
        derived = launcher in DERIVING_LAUNCHERS
        yield Hit(
            f"{what} not set (launcher: {launcher})"
            + (" — fine only if the training script or framework derives it" if derived else ""),
            members,
            expected="set",
            actual="unset",
            fix=f"export {what} for every rank",
            verify="env | grep ^MASTER_   # on each named host",
            severity=Severity.WARNING if derived else None,
        )


def _zero(launch: Any) -> bool:
    """Rank 0 (per-rank mode) or node rank 0 of a static launch: who hosts the rendezvous store."""
    if launch["mode"] == "rank":
        return bool(launch["rank"] == 0)
    return bool(launch["node_rank"] == 0 and launch["rdzv_backend"] in (None, "static"))


@check("RDZ010", Severity.ERROR, "MASTER_ADDR is not rank 0's host")
def master_elsewhere(job: Job) -> Iterator[Hit]:
    """Rank 0 (node rank 0 of a static launch) runs on the host MASTER_ADDR names.

    Rank 0 hosts the rendezvous store on its own node, and every other participant connects to
    MASTER_ADDR. When MASTER_ADDR is an address of another node, the store is where nobody looks:
    torchrun's static rendezvous and init_process_group wait until their timeout. Typical causes:
    node ranks swapped between two nodes, the same --node-rank on every node, or
    --node-rank=$SLURM_NODEID while MASTER_ADDR is not the first host of the nodelist.

    Start node rank 0 on the MASTER_ADDR host, or set MASTER_ADDR to the host of node rank 0
    (in Slurm: `scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1` with --node-rank=$SLURM_NODEID).
    """
    zero = [i for i, launch in enumerate(job.launches) if _zero(launch)]
    if not zero or any((_master(job, i) or {}).get("local") for i in zero):
        return
    zero_hosts = {job.host(i) for i in zero}
    holders = [
        i for i in _where(job, lambda m: m and m["local"] and not m["loopback"]) if job.host(i) not in zero_hosts
    ]
    if not holders:
        return
    addr = job.launch(holders[0])["master_addr"]
    holder = job.host(holders[0])
    what = "rank 0" if job.launch(zero[0])["mode"] == "rank" else "node rank 0"
    other = job.launch(holders[0])["rank" if what == "rank 0" else "node_rank"]
    yield Hit(
        f"{what} runs on {', '.join(sorted(zero_hosts))}, but MASTER_ADDR {addr} is an address of {holder}"
        f"{f' ({what[:-2]} {other})' if other is not None else ''}: the store would be hosted where nobody connects",
        zero + holders[:1],
        expected=f"{what} on {holder}",
        actual=f"{what} on {', '.join(sorted(zero_hosts))}",
        fix=f"start {what} on {holder}, or set MASTER_ADDR to {sorted(zero_hosts)[0]}",
        verify="hostname; getent ahosts $MASTER_ADDR   # on the node of node rank 0: one of its addresses",
    )


# torch/distributed/elastic/rendezvous/registry.py: the backends torch registers itself (names are case-sensitive);
# a package may register more (the "torchrun.handlers" entry points), so another name is a warning only
TORCH_BACKENDS = ("static", "c10d", "etcd", "etcd-v2")


@check("RDZ011", Severity.WARNING, "Rendezvous backend torch does not register")
def unknown_backend(job: Job) -> Iterator[Hit]:
    """The rendezvous backend (--rdzv-backend, PET_RDZV_BACKEND, accelerate's rdzv_backend) is one torch registers:
    static, c10d, etcd or etcd-v2.

    torchrun looks the name up case-sensitively and stops at once on every node with `The rendezvous backend
    'C10D' is not registered. Did you import the module that registers it?`, unless an installed package
    registers that name (the `torchrun.handlers` entry points): a warning, not an error.

    Write the backend in lower case (`--rdzv-backend=c10d`), or install the package that registers it on every
    node.
    """
    groups: dict[str, list[int]] = {}
    for i, launch in enumerate(job.launches):
        backend = launch["rdzv_backend"]
        if isinstance(backend, str) and backend not in TORCH_BACKENDS:
            groups.setdefault(backend, []).append(i)
    for backend, members in groups.items():
        known = backend.strip().lower() if backend.strip().lower() in TORCH_BACKENDS else None
        yield Hit(
            f"rendezvous backend {backend!r} ({job.launch(members[0])['sources'].get('rdzv_backend', 'launch')}): "
            f"torch registers {', '.join(TORCH_BACKENDS)}, case-sensitively; torchrun stops at once unless an "
            "installed package registers this name",
            members,
            expected=" or ".join(TORCH_BACKENDS),
            actual=backend[:80],
            fix=f"write --rdzv-backend={known}"
            if known
            else "use --rdzv-backend=c10d (or static), or install the "
            "package that registers this backend on every node",
            verify="validator check FACTS... --select RDZ011",
        )


CODES: dict[str, Check] = table(
    master_addr,
    master_port,
    split_resolution,
    loopback_master,
    unresolvable_master,
    port_busy,
    port_range,
    missing_rendezvous,
    master_elsewhere,
    unknown_backend,
)
