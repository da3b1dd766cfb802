"""Rules over a communicator or store that never formed: NCCL's init checks (two ranks on one GPU,
versions, interfaces, a port in use, a broken launch contract), the TCPStore and its barriers."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from validator.diagnose import strength as S
from validator.diagnose.causes.base import Evidence, by_kind, host_of, quote, ranks_of, who
from validator.diagnose.events import Cause, Confidence, Event
from validator.targets import fold_ranks

# a client's connect that failed at once, not after a timeout: ECONNREFUSED, EADDRNOTAVAIL, EINVAL (connect(2) to an
# address no host can have, as 0.0.188.125), ENETUNREACH, EHOSTUNREACH (no route: the kernel or a router answered), and
# Windows' WSAECONNREFUSED, WSAEADDRNOTAVAIL (c10d prints "errno: N" on POSIX, "system error: N" on Windows)
AT_ONCE = frozenset({"111", "99", "22", "101", "113", "10061", "10049"})


def store_barrier(ev: Evidence) -> list[Cause]:
    """distributed_c10d._store_based_barrier: worker_count of world_size arrived. Fewer: ranks
    never reached the group creation (which ones the store does not say); more: two jobs or a
    duplicate launch share one store and key."""
    events = ev.events
    seen = by_kind(events, "rdzv.store_barrier")
    if not seen:
        return []
    last = max(seen, key=lambda e: (int(e.data["count"]) > int(e.data["world"]), e.time or 0.0))
    world, count = int(last.data["world"]), int(last.data["count"])
    reporters = sorted({int(e.data["reporter"]) for e in seen})
    evidence = [quote(e) for e in seen[:3]]
    reported = f"reported by rank{'s' if len(reporters) > 1 else ''} {', '.join(map(str, reporters[:8]))}"
    if count > world:
        return [
            Cause(
                code="DGN001",
                summary=f"{count} workers checked into a store barrier for a group of {world} ({last.data['key']}): "
                "two jobs or a duplicate launch share one store (MASTER_ADDR:MASTER_PORT)",
                culprits=[],
                confidence="unknown",
                reason="more workers than the world size arrived: nobody is missing, the store is shared",
                evidence=evidence,
                expected=f"{world} workers",
                actual=f"{count} workers",
                strength=S.STORE_BARRIER_COUNT,
                family="rendezvous_timeout",
            )
        ]
    # the default group's barrier (key ...:1) counts global ranks 0..world-1: when every arrival
    # reported, the missing ranks are the rest (by elimination)
    arrived = {int(e.data["reporter"]) for e in seen if e.data["key"] == last.data["key"]}
    if last.data["key"].endswith(":1") and len(arrived) == count and arrived <= set(range(world)):
        missing = sorted(set(range(world)) - arrived)
        # one reporter: the log shows one process, and a rank that checked into another store (another
        # MASTER_ADDR:PORT, another job) looks the same from here: the arithmetic names it, the log does not
        conf: Confidence = "low" if len(arrived) < 2 else "high" if len(missing) == 1 else "medium"
        return [
            Cause(
                code="DGN001",
                summary=f"{who(missing)} never reached the store-based barrier of the default group: the {count} "
                f"of {world} ranks that did all reported ({reported})",
                culprits=missing,
                confidence=conf,
                reason="by elimination: every rank that arrived printed its rank, the barrier counts global ranks "
                f"0-{world - 1}" + ("; only one rank's output is shown" if conf == "low" else ""),
                evidence=evidence,
                expected=f"{world} ranks",
                actual=f"{count} ranks",
                strength=S.STORE_BARRIER_MISSING,
                family="missing_rank",
            )
        ]
    return [
        Cause(
            code="DGN001",
            summary=f"only {count} of {world} ranks reached the store-based barrier for {last.data['key']} "
            f"({reported}); the missing ranks are not named",
            culprits=[],
            confidence="unknown",
            reason="the store counts arrivals; the reporting ranks are the ones that did arrive",
            evidence=evidence,
            expected=f"{world} ranks",
            actual=f"{count} ranks",
            strength=S.STORE_BARRIER_COUNT,
            family="missing_rank",
        )
    ]


def _pairs(seen: list[Event]) -> list[int]:
    out = []
    for e in seen:
        out += [int(e.data[k]) for k in ("a", "b") if k in e.data]
        if e.rank is not None:
            out.append(e.rank)
    return ranks_of(out)


def _shared_device(events: list[Event], ranks: list[int]) -> list[int]:
    """The processes accelerate's state lines put on one device with a rank of NCCL's pair (``Process index``, ``Local
    process index``, ``Device``: the index less the local index tells the nodes apart)."""
    where: dict[tuple[int, str], set[int]] = {}
    for e in by_kind(events, "accel.state"):
        if "index" in e.data and "local" in e.data:
            index = int(e.data["index"])
            where.setdefault((index - int(e.data["local"]), str(e.data["device"])), set()).add(index)
    out: set[int] = set()
    for procs in where.values():
        if len(procs) > 1 and procs & set(ranks):
            out |= procs
    return sorted(out)


def jax_barrier(ev: Evidence) -> list[Cause]:
    """JAX's coordination service (openxla/xla coordination_service.cc): a barrier (jax.distributed's connect, cluster
    registration, a user's or orbax's sync) expired. Where it lists the tasks that never reached it, they are the
    missing processes (a task is JAX's process_id); one task, and no count saying the list was cut, is named. A task whose
    heartbeats stopped is named the same way."""
    dead = sorted({int(e.data["task"]) for e in by_kind(ev.events, "jax.heartbeat")})
    if dead:  # the service stopped hearing from these tasks: failed, preempted or crashed, by its own words
        return [
            Cause(
                code="COL002",
                summary=f"JAX task{'s' if len(dead) > 1 else ''} {', '.join(map(str, dead[:16]))} stopped heartbeating "
                "to the coordination service (failed, got preempted or crashed)",
                culprits=dead if len(dead) == 1 else [],
                confidence="medium" if len(dead) == 1 else "unknown",
                reason="the coordination service names the task whose heartbeats stopped"
                + ("" if len(dead) == 1 else "; several stopped, so none of them is the one that failed first"),
                evidence=[quote(e) for e in by_kind(ev.events, "jax.heartbeat")[:3]],
                strength=S.STORE_BARRIER_MISSING if len(dead) == 1 else S.STORE_BARRIER_COUNT,
                family="missing_rank",
            )
        ]
    seen = by_kind(ev.events, "jax.barrier_timeout")
    if not seen:
        return []
    evidence = [quote(e) for e in seen[:3]]
    named = [e for e in seen if e.data.get("tasks")]
    if not named:
        return [
            Cause(
                code="DGN001",
                summary="JAX's coordination service timed out waiting for tasks to register or reach a barrier; the "
                "log does not say which tasks never came",
                culprits=[],
                confidence="unknown",
                reason="the barrier's timeout names no pending task",
                evidence=evidence,
                strength=S.RDZV_COUNT,
            )
        ]
    last = named[-1]
    tasks = sorted({int(t) for t in str(last.data["tasks"]).split(",")})
    total, reached = last.data.get("total"), last.data.get("reached")
    whole = total is None or int(str(total)) - int(str(reached)) == len(tasks)  # the list stops at a log limit
    culprits = tasks if len(tasks) == 1 and whole else []
    barrier = last.data.get("barrier") or "its barrier"
    return [
        Cause(
            code="DGN001",
            summary=f"JAX task{'s' if len(tasks) > 1 else ''} {', '.join(map(str, tasks[:16]))} never reached the "
            f"coordination barrier {barrier}",
            culprits=culprits,
            confidence="medium" if culprits else "unknown",
            reason="the coordination service lists the tasks that did not arrive"
            + ("" if culprits else "; several never came, so none of them is the one that failed first"),
            evidence=evidence,
            strength=S.STORE_BARRIER_MISSING if culprits else S.STORE_BARRIER_COUNT,
            family="missing_rank",
        )
    ]


def _same_gpu_inits(ev: Evidence) -> list[Cause]:
    """A framework's report of ncclCommInitRank failing with invalid usage (onnxruntime's CudaCall: "NCCL failure 5:
    invalid usage ; GPU=%d ; hostname=%s ; expr=ncclCommInitRank(...)") from two processes on one GPU of one host: what
    NCCL's duplicate-GPU check returns (init.cc: WARN("Duplicate GPU detected ...") then ncclInvalidUsage), its WARN
    not printed."""
    inits: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for e in by_kind(ev.events, "nccl.error"):
        if e.data.get("retcode") == "5" and e.data.get("expr") == "ncclCommInitRank" and "gpu" in e.data:
            inits[(str(e.data["host"]), str(e.data["gpu"]))].append(e)
    shared = [(key, seen) for key, seen in inits.items() if len(seen) > 1]
    if not shared:
        return []
    (host, gpu), seen = shared[0]
    return [
        Cause(
            code="DGN004",
            summary=f"{len(seen)} processes on {host} failed ncclCommInitRank with invalid usage on GPU {gpu}: they "
            "share one GPU",
            culprits=[],
            confidence="unknown",
            reason="NCCL's duplicate-GPU check returns invalid usage at init; their global ranks are not in the log",
            evidence=[quote(e) for e in seen[:3]],
            hosts=[host],
            strength=S.DUPLICATE_GPU,
        )
    ]


def _overlapping_devices(ev: Evidence) -> list[Cause]:
    """torch's symmetric-memory rendezvous found two ranks of its group on one GPU (which ones, it does not say)."""
    seen = by_kind(ev.events, "cuda.shared_device")
    if not seen:
        return []
    return [
        Cause(
            code="DGN004",
            summary="two ranks of one group allocate on the same GPU (torch's symmetric memory found overlapping "
            "devices)",
            culprits=[],
            confidence="unknown",
            reason="CUDASymmetricMemoryAllocator::rendezvous compares the ranks' devices; it names no rank",
            evidence=[quote(e) for e in seen[:3]],
            strength=S.DUPLICATE_GPU,
        )
    ]


def duplicate_gpu(ev: Evidence) -> list[Cause]:
    """NCCL's init check: two ranks of one communicator on one GPU."""
    seen = by_kind(ev.events, "nccl.duplicate_gpu")
    if not seen:
        return _same_gpu_inits(ev) or _overlapping_devices(ev)
    # NCCL init.cc checks its own rank against every peer, so the reporter is one of the pair; a
    # reporter outside the pair it prints means the ranks are a sub-communicator's, not global
    local = [
        e for e in seen if e.rank is not None and "a" in e.data and e.rank not in (int(e.data["a"]), int(e.data["b"]))
    ]
    pair = [] if local else _pairs(seen)
    shared = _shared_device(ev.events, pair)
    ranks = sorted(set(pair) | set(shared))
    dev = next((e.data["dev"] for e in seen if "dev" in e.data), None)
    pairs = sorted({f"{e.data['a']} and {e.data['b']}" for e in local})
    what = f"communicator ranks {', '.join(pairs)} (of a sub-communicator)" if local else who(ranks)
    # NCCL's ranks are its communicator's: global ones only where the log shows whose they are (a reporter's own rank
    # among the pair, per-rank logs, any other rank of the job, several pairs of one communicator); one bare pair may
    # be a sub-communicator's
    one_pair = len({(e.data.get("a"), e.data.get("b")) for e in seen}) == 1
    bare = one_pair and not any(e.rank is not None for e in ev.events) and not ev.file_ranks and not shared
    return [
        Cause(
            code="DGN004",
            summary=f"{what} share one GPU{f' (CUDA device {dev})' if dev else ''}",
            culprits=ranks,
            confidence=("low" if bare else "high") if ranks else "unknown",
            reason=(
                "NCCL names the ranks that share the device"
                + (f"; accelerate's state lines put processes {fold_ranks(shared)} on that GPU" if shared else "")
                + (
                    "; no line says whether they are the job's ranks or a sub-communicator's (NCCL prints its "
                    "communicator's)"
                    if bare
                    else ""
                )
            )
            if ranks
            else "the reporting rank is not in the "
            "pair NCCL names, so those are communicator-local ranks; the global ones are not in the log",
            evidence=[quote(e) for e in seen[:3]],
            strength=S.DUPLICATE_GPU,
        )
    ]


def nccl_versions(ev: Evidence) -> list[Cause]:
    """NCCL's init check: ranks run different NCCL versions; the odd version is the outlier."""
    seen = by_kind(ev.events, "nccl.version_mismatch")
    if not seen:
        return []
    vers: dict[int, str] = {}
    for e in seen:
        vers[int(e.data["a"])], vers[int(e.data["b"])] = e.data["va"], e.data["vb"]
    (top, n), *rest = Counter(vers.values()).most_common()
    if rest and rest[0][1] == n:  # rank A vs rank B and nothing else: no side is the odd one
        return [
            Cause(
                code="DGN006",
                summary=f"ranks run different NCCL versions ({'; '.join(f'rank {r}: {v}' for r, v in sorted(vers.items()))})",
                culprits=[],
                confidence="unknown",
                reason="NCCL compares versions at init; without a majority neither side is the outlier",
                evidence=[quote(e) for e in seen[:3]],
                strength=S.NCCL_VERSIONS,
            )
        ]
    odd = sorted(r for r, v in vers.items() if v != top)
    return [
        Cause(
            code="DGN006",
            summary=f"{who(odd)} run NCCL {', '.join(sorted({vers[r] for r in odd}))}, the others {top}",
            culprits=odd,
            confidence="high" if n >= 2 else "medium",
            reason="NCCL compares versions at init; the odd version is the outlier",
            evidence=[quote(e) for e in seen[:3]],
            strength=S.NCCL_VERSIONS,
        )
    ]


def no_interface(ev: Evidence) -> list[Cause]:
    """NCCL or gloo found no interface to use on a host (a host-level setting)."""
    seen = by_kind(ev.events, "nccl.no_interface")
    if not seen:
        return []
    ranks = ranks_of(e.rank for e in seen)
    hosts = sorted({e.ident.host for e in seen if e.ident.host})
    iface = next((e.data["iface"] for e in seen if "iface" in e.data), None)
    what = f"interface {iface} does not exist" if iface else "no usable network interface"
    return [
        Cause(
            code="DGN005",
            summary=f"{what} on {host_of(hosts, ranks)}",
            culprits=[],
            confidence="unknown",
            reason="a host-level setting (NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME, the host's interfaces): it points "
            "at the host, not at a faulty rank",
            evidence=[quote(e) for e in seen[:3]],
            hosts=hosts,
            strength=S.NO_INTERFACE,
        )
    ]


def addr_in_use(ev: Evidence) -> list[Cause]:
    """The store's or a rank's port is taken on its host."""
    seen = by_kind(ev.events, "net.addr_in_use")
    if not seen:
        return []
    ranks = ranks_of(e.rank for e in seen)
    # the line's own prefix, else the address the message says it could not listen on (HCCL's "listen on ip[%s]")
    hosts = sorted(
        {e.ident.host for e in seen if e.ident.host} or {str(e.data["host"]) for e in seen if "host" in e.data}
    )
    port = next((e.data["port"] for e in seen if e.data.get("port")), None)
    return [
        Cause(
            code="DGN003",
            summary=f"port {port or '?'} already in use on {host_of(hosts, ranks)}",
            culprits=[],
            confidence="unknown",
            reason="the port is taken on the host where the store or the rank binds (another job, a leftover "
            "process): a host-level conflict, not a faulty rank",
            evidence=[quote(e) for e in seen[:3]],
            hosts=hosts,
            strength=S.ADDRESS_IN_USE,
        )
    ]


def launch_contract(ev: Evidence) -> list[Cause]:
    """Ranks report their own broken launch (env:// variables missing, a rank twice, a wrong size)."""
    seen = by_kind(ev.events, "rdzv.env_missing", "nccl.dup_rank", "nccl.nranks_mismatch", "nccl.invalid_rank")
    if not seen:
        return []
    ranks = ranks_of(e.rank for e in seen)
    return [
        Cause(
            code="DGN012",
            summary=f"launch contract broken on {who(ranks)}: {seen[0].text[:160]}",
            culprits=ranks,
            confidence="high",
            reason="the ranks report it themselves",
            evidence=[quote(e) for e in seen[:3]],
            strength=S.LAUNCH_CONTRACT,
        )
    ]


def _outside_world(events: list[Event]) -> str:
    """``RANK=r, WORLD_SIZE=n`` where the log's launch environment (a shell's ``export RANK=1``) gives a rank outside the
    world (r >= n), else "": that process is a store client of a world whose rank 0 it never joins, so no rank 0 is to
    blame."""
    env = {str(e.data["var"]): int(e.data["value"]) for e in by_kind(events, "launch.env")}
    rank, world = env.get("RANK"), env.get("WORLD_SIZE")
    return f"RANK={rank}, WORLD_SIZE={world}" if rank is not None and world is not None and rank >= world else ""


def _own_store(conn: list[Event]) -> bool:
    """A client whose traceback shows its frames but none of torch.distributed's: the caller built the TCPStore itself
    (vLLM's StatelessProcessGroup.create, vllm/distributed/utils.py: ``store = TCPStore(host, port, world_size,
    is_master=(rank == 0))`` for a group of its own, e.g. TRL's trainer and a vLLM server), so the store's host is
    that group's creator, not rank 0 of an env:// world (torch's own store comes through torch/distributed/)."""
    return any(e.stack and not any("torch/distributed/" in f for f in e.stack) for e in conn)


# Store keys whose writer the key's format names, from each store user's key scheme: (pattern, group of the writer's
# rank, or 0 where the key names no rank of the job). The first pattern that matches a key decides.
STORE_KEYS: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"/torchelastic/"), 0),  # torchelastic's own bookkeeping (rendezvous state, agent keys)
    # vLLM vllm/distributed/utils.py StatelessProcessGroup: f"broadcast_from/{src}/{counter}", f"send_to/{dst}/{counter}":
    # a rank of that stateless group (e.g. a trainer and an outside vLLM server), not of torch's world; the counter is
    # no rank
    (re.compile(r"(?:^|/)(?:broadcast_from|send_to)/\d+/\d+$"), 0),
    # c10d nests a new group's store under the default group's (distributed_c10d.py _new_process_group_helper:
    # PrefixStore(f"{group_name}/"), then the device's): "default_pg/0//7//cuda//pg_wrapper:7/0/1" is group 7's, whose
    # ranks are that group's, not the world's; only the default group's own ("default_pg/0//cuda//...") are global
    (re.compile(r"default_pg/\d+//(?!(?:cuda|cpu|xpu|hpu|mtia|meta|privateuseone)//)[^/]+//"), 0),
    # gloo rendezvous (gloo/rendezvous/context.cc connectFullMesh: store.set(std::to_string(rank), address) under the
    # group's PrefixStore), as c10d ProcessGroupGloo and Caffe2's common world ("<name>/<rank>") use it: the last
    # number is the rank that never wrote its address
    (re.compile(r"/(\d+)$"), 1),
    # gloo's own hash store rendezvous (gloo/rendezvous/context.cc, gloo 70dc360): each rank's address under "rank_N"
    (re.compile(r"(?:^|/)rank_(\d+)$"), 1),
)


def key_rank(key: str) -> int | None:
    """The rank whose store key this is, where the key's format determines it."""
    for pattern, group in STORE_KEYS:
        if m := pattern.search(key):
            return int(m.group(group)) if group else None
    return None


def store(ev: Evidence) -> list[Cause]:
    """Ranks that could not reach the TCPStore, and the store keys the others waited for."""
    events = ev.events
    out: list[Cause] = []
    conn = by_kind(
        events,
        "rdzv.connect_timeout",
        "rdzv.conn_error",
        "rdzv.connect_failed",
        "rdzv.store_timeout",
        "rdzv.unresolved",
    )
    # c10d's waitForInput timeout: the client had connected (its remote is a store that was reached) and got no reply;
    # it speaks for the store only where no other rank failed to reach it
    replied = [e for e in conn if "waitForInput" in e.text]
    conn = [e for e in conn if e not in replied] or replied
    reached = by_kind(events, "rdzv.store_endpoint") + replied
    endpoints = Counter((e.data.get("port")) for e in reached if e.data.get("port"))
    server_up = bool(endpoints) or bool(by_kind(events, "rdzv.clients_joined", "rdzv.wait_keys", "rdzv.store_barrier"))
    if conn:
        ranks = ranks_of(e.rank for e in conn)
        target = next(
            (f"{e.data['host']}:{e.data['port']}" for e in conn if "port" in e.data and "host" in e.data), None
        )
        tport = target.rsplit(":", 1)[1] if target else None
        good = endpoints.most_common(1)[0][0] if endpoints else None
        if good and tport and good != tport:
            out.append(
                Cause(
                    code="DGN002",
                    summary=f"{who(ranks)} connect to the store at {target}; the other ranks reached it at port {good}",
                    culprits=ranks,
                    confidence="high" if ranks else "medium",
                    reason="its endpoint differs from the one the other ranks used",
                    evidence=[quote(e) for e in conn[:2]],
                    expected=f"port {good}",
                    actual=f"port {tport}",
                    strength=S.STORE_WRONG_PORT,
                )
            )
        elif (
            0 not in ranks
            and not server_up
            and {e.kind for e in conn} == {"rdzv.connect_timeout"}
            and not by_kind(events, "launch.elastic")
            and not any("/elastic/" in f or f.endswith("/torchrun") for e in events for f in e.stack)
            and not any("local" in e.data for e in by_kind(events, "agent.child_failed"))
            and not any(e.ident.pid is not None for e in conn)
            and not _outside_world(events)
            and not _own_store(conn)
        ):
            # TCPStore's server runs in rank 0 (env:// init_process_group: is_master = rank == 0): a client
            # that cannot connect waited for rank 0 to come up. Under torchrun (its elastic agent anywhere in
            # the log's tracebacks, or its agent's "failed (exitcode: N) local_rank: M" line, api.py's
            # _poll/failure record) the agent of node 0 hosts the store and every rank, rank 0 too, is a client. A
            # client behind a Ray actor's or a vLLM worker's "(Name pid=N)" prefix joined a group its driver made: the
            # store's host is that group's creator, not rank 0 of an env:// world
            out.append(
                Cause(
                    code="DGN002",
                    summary=f"{who(ranks)} timed out connecting to the store at {target or 'MASTER_ADDR:MASTER_PORT'}, "
                    "which rank 0 (or node 0's torchrun agent) hosts: rank 0 never reached init_process_group "
                    "in time, or the address is wrong",
                    culprits=[0],
                    # a bare line (no traceback, no launch environment set by hand to show an env:// world) could
                    # as well be a torchrun worker's, whose store node 0's agent hosts: a lead, not a verdict
                    confidence="medium" if any(e.stack for e in conn) or by_kind(events, "launch.env") else "low",
                    reason="the TCPStore server is created by rank 0 (or node 0's agent); the rank that times out "
                    "connecting is the victim",
                    evidence=[quote(e) for e in conn[:2]],
                    strength=S.STORE_UNREACHABLE,
                )
            )
        else:
            # the store's host name did not resolve (every family's lookup failed, or old c10d's "host not found"): the
            # client gave up at once, as on a refusal, not after a timeout
            unresolved = {
                e.data.get("host") for e in by_kind(events, "rdzv.gai_failed") if e.data.get("family") != "IPv6 "
            }
            nameless = any(e.kind == "rdzv.unresolved" or (e.data.get("host") in unresolved) for e in conn)
            reset = all("reset by peer" in e.text for e in conn)  # something there took the connection and dropped it
            refused = nameless or reset or all(e.data.get("errno") in AT_ONCE or "refused" in e.text for e in conn)
            outside = _outside_world(events)
            out.append(
                Cause(
                    code="DGN002",
                    summary=f"{who(ranks)} could not reach the store at {target or 'MASTER_ADDR:MASTER_PORT'}"
                    + (
                        " (its host name does not resolve)"
                        if nameless
                        else " (the connection was reset: what listens there is not this job's store, or it closed)"
                        if reset
                        else " (connection refused: nothing listened there)"
                        if refused
                        else ""
                    ),
                    culprits=[],
                    confidence="low",
                    reason=f"the launch environment in the log sets {outside}: no rank 0 of this world hosts the store"
                    if outside
                    else "the rank failed to connect; either its address is wrong or the store host was not up",
                    evidence=[quote(e) for e in conn[:2]],
                    # c10d's per-retry warnings alone also appear in runs that then connect (Windows, macOS); its
                    # waitForInput warning alone is a request the store never answered, under whatever else failed
                    strength=S.PARTIAL
                    if {e.kind for e in conn} == {"rdzv.connect_failed"}
                    else S.STORE_NO_REPLY
                    if all("waitForInput" in e.text for e in conn)
                    else S.STORE_UNREACHABLE,
                    family="connection_refused" if refused else "",
                )
            )
    waits = by_kind(events, "rdzv.wait_keys")
    missing = ranks_of(key_rank(k.strip("[]'\",")) for e in waits for k in re.split(r"[,\s]+", e.data.get("keys", "")))
    joined = by_kind(events, "rdzv.clients_joined", "rdzv.timeout", "rdzv.closed")
    if missing or joined or waits:
        counts = next((f" ({e.data['joined']}/{e.data['expected']} joined)" for e in joined if "joined" in e.data), "")
        evidence = [quote(e) for e in (waits + joined)[:3]]
        # a count of arrivals short of the world is a missing member; a key wait is the store's timeout
        family = "missing_rank" if counts else "rendezvous_timeout"
        if missing:
            out.append(
                Cause(
                    code="DGN001",
                    summary=f"{who(missing)} never wrote the store key{'s' if len(missing) > 1 else ''} the others "
                    f"waited for{counts}",
                    culprits=missing,
                    confidence="high",
                    reason="the store keys the others waited for are theirs (gloo's rendezvous key scheme: "
                    "<group prefix>/<rank>)",
                    evidence=evidence,
                    strength=S.NEVER_JOINED,
                    family="rendezvous_timeout",
                )
            )
        else:
            out.append(
                Cause(
                    code="DGN001",
                    summary=f"ranks or nodes never joined the rendezvous{counts}",
                    culprits=[],
                    confidence="unknown",
                    reason="the store only counts who arrived; nothing names who did not",
                    evidence=evidence,
                    strength=S.RDZV_COUNT,
                    family=family,
                )
            )
    return out
