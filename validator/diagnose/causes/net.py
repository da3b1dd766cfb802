"""Rules over network and NCCL errors by return-code class, the NCCL versions in a log, NCCL RAS, and
the last resorts: collective timeouts alone, the earliest error, errors of no known family.

Attribution rules (issue 11): the rank that reports a timeout or waits on the store or a peer
is a victim; NCCL's "at and around rank N" and RAS communicator ranks are pointers, not
initiators; a peer address is where the reporter tried to go, not a proven culprit.
"""

from __future__ import annotations

from collections import defaultdict

from validator.diagnose import strength as S
from validator.diagnose.causes.base import Evidence, by_kind, quote, ranks_of, who
from validator.diagnose.events import Cause, Event, Role
from validator.diagnose.families import INFO_KINDS, LOOPBACK, NCCL_VOCAB, nccl_class, nccl_vocab

NCCL_KINDS = (
    "nccl.error",
    "nccl.result",
    "nccl.last_error",
    "nccl.ib_error",
    "nccl.peer_closed",
    "nccl.peer_io",
    "nccl.connect_failed",
    "nccl.proxy_failed",
    "nccl.proxy_closed",
    "nccl.syscall_failed",
    "nccl.warn",
    "coll.watchdog_exception",
    "coll.async_error",
)


NETWORK_KINDS = ("gloo.peer_closed", "gloo.connect_refused", "gloo.connect_mesh", "net.conn_refused")


def ras(ev: Evidence) -> list[Cause]:
    """NCCL RAS (2.24+) status: ranks whose communicator data is missing or processes considered
    dead (missing_rank), or ranks whose operation counts differ (MISMATCH: a hang, not a crash).
    Its ranks are communicator ranks: pointers with their nodes, never named as global ranks."""
    events = ev.events
    seen = by_kind(events, "nccl.ras_missing")
    if not seen:
        return []
    mismatch = [e for e in seen if "MISMATCH" in str(e.data.get("section", ""))]
    pick = [e for e in seen if e not in mismatch] or mismatch
    nodes = sorted({str(e.data["node"]) for e in pick if "node" in e.data})
    ranks = sorted({int(e.data["comm_rank"]) for e in pick if "comm_rank" in e.data})
    what = (
        f"communicator rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks[:16]))}" if ranks else "processes"
    )
    where = f" on node{'s' if len(nodes) != 1 else ''} {', '.join(nodes[:8])}" if nodes else ""
    if pick is mismatch:
        return [
            Cause(
                code="COL003",
                summary=f"NCCL RAS: {what}{where} are at a different operation count than the rest of their "
                "communicator (a hang in a collective)",
                culprits=[],
                confidence="unknown",
                reason="RAS compares operation counts; the odd ranks may be ahead or behind, the report does not say who "
                "stopped",
                evidence=[quote(e) for e in pick[:3]],
                hosts=nodes[:8],
                strength=S.NCCL_RAS,
            )
        ]
    return [
        Cause(
            code="COL002",
            summary=f"NCCL RAS reports {what} missing or unresponsive{where}",
            culprits=[],
            confidence="low",
            reason="RAS lists communicator ranks (not global ranks) that did not answer; their nodes are the suspects",
            evidence=[quote(e) for e in pick[:3]],
            hosts=nodes[:8],
            strength=S.NCCL_RAS,
            family="missing_rank",
        )
    ]


def versions(ev: Evidence) -> list[Cause]:
    """NCCL version banners that differ within one log (nodes run different NCCL builds)."""
    events = ev.events
    seen = by_kind(events, "misc.nccl_version")
    found = sorted({str(e.data["version"]) for e in seen if "version" in e.data})
    if len(found) < 2:
        return []
    first = [next(e for e in seen if e.data.get("version") == v) for v in found]
    return [
        Cause(
            code="DGN006",
            summary=f"the log shows NCCL versions {', '.join(found)}: nodes run different NCCL builds",
            culprits=[],
            confidence="unknown",
            reason="NCCL's version banners differ between processes of the job",
            evidence=[quote(e) for e in first[:3]],
            strength=S.NCCL_VERSIONS_IN_LOG,
        )
    ]


def network(ev: Evidence) -> list[Cause]:
    """NCCL errors by ncclResult_t class, gloo connects refused; nobody named (they echo a peer)."""
    events = ev.events
    out: list[Cause] = []
    # a pair its peer closed while other ranks report collective timeouts: the peer exited after its own
    # timeout, so the timeout is the failure and the lost pair its echo (a refused connect never is one)
    timed_out = bool(by_kind(events, "coll.gloo_timeout", "coll.watchdog_timeout", "coll.blocking_wait"))
    refused = [e for e in by_kind(events, *NETWORK_KINDS) if not (timed_out and e.kind == "gloo.peer_closed")]
    if refused:

        def where(e: Event) -> str:
            return f"{e.data['peer']}:{e.data['port']}" if "port" in e.data else str(e.data["peer"])

        peers = sorted({where(e) for e in refused if "peer" in e.data})
        # a loopback peer is a misadvertised address only where a connect failed: a closed pair had connected
        dialled = {where(e) for e in refused if "peer" in e.data and e.kind != "gloo.peer_closed"}
        loop = sorted({p for p in dialled if LOOPBACK.match(p.rsplit(":", 1)[0])})
        note = (
            (
                f"; {', '.join(loop)} is a loopback address: a peer advertised its own hostname's loopback alias "
                "(/etc/hosts maps it to 127.0.1.1), set GLOO_SOCKET_IFNAME / fix the hosts file"
            )
            if loop
            else ""
        )
        target = f" to {', '.join(peers[:3])}" if peers else ""
        what = "connection refused" if any("refused" in e.text for e in refused) else "connection to a peer lost"
        # a launcher's ssh to a node (OpenSSH's "ssh: connect to host", DeepSpeed's runner): before any worker, so
        # the exceptions after it (CalledProcessError, the launcher's RuntimeError) are its echo
        ssh = [e for e in refused if "ssh" in e.data]
        if ssh:
            what = "the launcher could not reach a node over ssh"
        out.append(
            Cause(
                code="DGN007",
                summary=f"{what}{target}{note}",
                culprits=[],
                confidence="unknown",
                reason="nothing listened where the rank connected, or the peer closed the pair: the peer had exited, "
                "was not up yet, or advertised an address others cannot reach",
                evidence=[quote(e) for e in (ssh or refused)[:3]],
                strength=S.SSH_UNREACHABLE if ssh else S.CONNECTION_REFUSED,
                family="connection_refused",
            )
        )
    nccl = [e for e in by_kind(events, *NCCL_KINDS) if "cuda" not in str(e.data.get("what", "")).lower()]
    classes = [c for e in nccl if (c := nccl_class(e.kind, e.data, e.text))]
    hard = [e for e in nccl if e.kind != "nccl.warn" or nccl_class(e.kind, e.data, e.text)]
    if hard and (classes or not refused):
        family = nccl_vocab(classes)
        hosts: list[str] = []
        if family == "nccl_remote_error" and (own := _own_failure(nccl)):
            family, hosts = own
        elif family == "nccl_remote_error" and _never_connected(nccl):
            family = "nccl_system_error"
        elif family == "nccl_init_duplicate_gpu" and len({str(e.data["gpu"]) for e in hard if "gpu" in e.data}) > 1:
            family = "nccl_system_error"  # the processes print their GPUs, and they differ: not two on one
        first = sorted(hard, key=lambda e: (nccl_class(e.kind, e.data, e.text) is None, e.time or 0.0))[0]
        ranks = sorted({e.rank for e in hard if e.rank is not None})
        peers = sorted({str(e.data["peer"]) for e in hard if "peer" in e.data})
        extra = f"; peer{'s' if len(peers) > 1 else ''} named: {', '.join(peers[:4])}" if peers else ""
        label = {"nccl_remote_error": "remote peer or network failure", "nccl_system_error": "system/socket failure",
                 "nccl_init_duplicate_gpu": "invalid usage (two ranks on one GPU, most often)"}  # fmt: skip
        # mpirun's first process to exit is the only one with NCCL errors: its own failure, not an echo
        first_exit = {str(e.data.get("reporter")) for e in by_kind(events, "agent.child_failed")
                      if e.data.get("launcher") == "mpirun" and "reporter" in e.data}  # fmt: skip
        alone = len(ranks) == 1 and first_exit == {str(ranks[0])}
        if alone:
            printed = {e.ident.host for e in hard if e.ident.host}
            hosts = hosts or (sorted(printed) if len(printed) == 1 else [])
        out.append(
            Cause(
                code="DGN004" if family == "nccl_init_duplicate_gpu" else "DGN007",
                summary=f"NCCL {label[family]} on {who(ranks)}: {first.text[:160]}{extra}",
                culprits=ranks if alone else [],
                confidence="low" if alone else "unknown",
                reason="the only rank with NCCL errors, and the process mpirun saw exit first"
                if alone
                else "NCCL errors on many ranks are usually the echo of one peer's failure; none failed first in "
                "these logs",
                evidence=[quote(first), *[quote(e) for e in hard if e is not first][:2]],
                hosts=hosts,
                strength=S.NCCL_NET_ERROR,
                family=family,
            )
        )
    return out


def _own_failure(nccl: list[Event]) -> tuple[str, list[str]] | None:
    """The class of the processes that failed on their own where the others only lost them: NCCL's remote result
    ("Connection closed by remote peer", ncclRemoteError) on some processes and only explicit other results on
    others (each process by its host and pid): the peer that went away is among the latter, and its own result says
    why (and their host, where they are all on one). None where a process reports both, or no process names its
    own."""
    per: dict[tuple[str | None, int | None], set[str]] = defaultdict(set)
    for e in nccl:
        if e.ident.pid is not None and (c := nccl_class(e.kind, e.data, e.text)) and c[1]:
            per[(e.ident.host, e.ident.pid)].add(c[0])
    lost = [p for p, cs in per.items() if "remote" in cs]
    own = {c for cs in per.values() if "remote" not in cs for c in cs}
    if lost and own and all(per[p] == {"remote"} for p in lost):
        hosts = {host for (host, _pid), cs in per.items() if "remote" not in cs}
        family = NCCL_VOCAB["system" if "system" in own else sorted(own)[0]]
        return family, [str(h) for h in hosts] if len(hosts) == 1 and None not in hosts else []
    return None


def _never_connected(nccl: list[Event]) -> bool:
    """Every remote result (the "-> 6" trail) is on a process whose connect never succeeded (NCCL's socket connect failing,
    which 2.19+ returns as ncclRemoteError): no peer went away, this process never reached it (a system failure, as the
    corpus's connect refusals)."""
    failed = {  # a reset by peer had reached it
        (e.ident.host, e.ident.pid) for e in nccl if e.kind == "nccl.connect_failed" and "reset by peer" not in e.text
    }
    remote = [e for e in nccl if (c := nccl_class(e.kind, e.data, e.text)) and c == ("remote", True)]
    return bool(failed) and bool(remote) and all((e.ident.host, e.ident.pid) in failed for e in remote)


def oneccl(ev: Evidence) -> list[Cause]:
    """Intel oneCCL's own errors: the collective library failed to start its workers or its transport (libfabric
    providers), the class NCCL's system errors have; the exception and the crash after it are its echo."""
    seen = by_kind(ev.events, "ccl.error")
    if not seen:
        return []
    first = seen[0]
    hosts = sorted({e.ident.host for e in seen if e.ident.host})
    return [
        Cause(
            code="DGN007",
            summary=f"oneCCL failed on {who(ranks_of(e.rank for e in seen))}: {first.text[:160]}",
            culprits=[],
            confidence="unknown",
            reason="the collective library reports its own failure (its worker threads or its ATL/OFI transport did "
            "not start); every process of the communicator fails alike",
            evidence=[quote(e) for e in seen[:3]],
            hosts=hosts if len(hosts) == 1 else [],
            strength=S.CCL_ERROR,
            family="nccl_system_error",
        )
    ]


def connect_retries(ev: Evidence) -> list[Cause]:
    """NCCL retrying a connect that timed out (``Call to connect returned Connection timed out, retrying``), an excerpt
    that ends before its ``Connect to %s failed`` (ncclSystemError): the class, nobody named (the peer it dials is only
    where it tried to go)."""
    seen = by_kind(ev.events, "nccl.connect_retry")
    if not seen:
        return []
    why = sorted({str(e.data["why"]) for e in seen})
    ranks = sorted({e.rank for e in seen if e.rank is not None})
    return [
        Cause(
            code="DGN007",
            summary=f"NCCL on {who(ranks)} kept retrying a connect to a peer ({', '.join(why[:3])})",
            culprits=[],
            confidence="unknown",
            reason="NCCL retries a connect that got no answer, then fails with a system error; the peer's address may "
            "be unreachable from here (a wrong interface, a firewall) or its host down",
            evidence=[quote(e) for e in seen[:3]],
            strength=S.CONNECT_RETRIES,
            family="nccl_system_error",
        )
    ]


def unrecognised(ev: Evidence) -> list[Cause]:
    """No family fits: quote the first error lines in time per rank (or per file without ranks)."""
    events = ev.events
    seen = [e for e in events if e.role != Role.FACT and e.kind not in INFO_KINDS]
    if not seen:
        return []
    per: dict[object, list[Event]] = defaultdict(list)
    for e in sorted(seen, key=lambda e: (e.time is None, e.time or 0.0)):
        per[e.rank if e.rank is not None else e.file].append(e)
    groups = sorted(per.values(), key=lambda g: (g[0].time is None, g[0].time or 0.0))[:6]
    lines = [quote(e) for g in groups for e in g[:2]]
    first = "; ".join(
        f"{g[0].source}: {'rank ' + str(g[0].rank) + ': ' if g[0].rank is not None else ''}{g[0].text[:120]}"
        for g in groups[:4]
    )
    return [
        Cause(
            code="DGN013",
            summary=f"errors that match no known failure family; first error lines: {first}",
            culprits=[],
            confidence="unknown",
            reason="no recognised family; these are the earliest error lines of each rank (see `validator explain DGN013` "
            "to share the log for a new rule)",
            evidence=lines[:8],
            strength=S.UNRECOGNISED,
        )
    ]


def nccl_cuda(ev: Evidence) -> list[Cause]:
    """NCCL's own error names a CUDA failure and no CUDA error of the rank's own is in the log."""
    cuda = [
        e for e in by_kind(ev.events, *NCCL_KINDS, "gloo.peer_closed") if "cuda" in str(e.data.get("what", "")).lower()
    ]
    if not cuda or by_kind(ev.events, "cuda.error", "cuda.oom"):
        return []
    ranks = sorted({e.rank for e in cuda if e.rank is not None})
    # alone in the log (no other rank shown waiting or failing after it), it is only the first visible failure
    waited = any(r not in ranks for r in ev.symptoms)
    return [
        Cause(
            code="DGN008",
            summary=f"NCCL reports a CUDA failure on {who(ranks)}",
            culprits=ranks,
            confidence="medium" if len(ranks) == 1 and waited else "low",
            reason="NCCL's own error names a CUDA failure on these ranks",
            evidence=[quote(e) for e in cuda[:3]],
            strength=S.NCCL_CUDA,
        )
    ]


TIMEOUT_KINDS = (
    "coll.watchdog_timeout",
    "coll.gloo_timeout",
    "coll.blocking_wait",
    "coll.heartbeat",
    "coll.watchdog_status",
    "coll.watchdog_teardown",
    "coll.dump_signal",
)


def timeouts_only(ev: Evidence) -> list[Cause]:
    """Collective timeouts: the class, nobody named (a stronger rule names the culprit if any)."""
    timeouts = by_kind(ev.events, *TIMEOUT_KINDS)
    if not timeouts:
        return []
    ranks = sorted({e.rank for e in timeouts if e.rank is not None})
    return [
        Cause(
            code="COL003",
            summary=f"{who(ranks)} timed out in a collective; no rank failed differently",
            culprits=[],
            confidence="unknown",
            reason="all reporting ranks show the same timeout and nothing else names a culprit",
            evidence=[quote(e) for e in timeouts[:3]],
            strength=S.TIMEOUT_ONLY,
        )
    ]


def earliest_error(ev: Evidence) -> list[Cause]:
    """Without timeouts or network errors: the earliest error by timestamp, low confidence."""
    fatal = [
        e
        for e in ev.events
        if e.role != Role.FACT and e.time is not None and e.rank is not None and not e.kind.startswith("misc")
    ]
    if not fatal or by_kind(ev.events, *TIMEOUT_KINDS) or network(ev):
        return []
    first = min(fatal, key=lambda e: e.time or 0.0)
    return [
        Cause(
            code="DGN007" if first.kind.startswith(("nccl", "gloo")) else "DGN010",
            summary=f"earliest error: rank {first.rank}: {first.text[:160]}",
            culprits=[int(first.rank)],  # type: ignore[arg-type]
            confidence="low",
            reason="the earliest error by timestamp; nothing else decides",
            evidence=[quote(first)],
            time=first.time,
            strength=S.EARLIEST_ERROR,
        )
    ]
