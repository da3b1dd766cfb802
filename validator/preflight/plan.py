"""What a participant expects of the rendezvous: the options, the endpoint, who must arrive and
how participants are told apart (rank, node rank, or host and pid as c10d knows nodes), who
coordinates, and who is missing. Pure apart from one name resolution (is_candidate)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Set

from validator.errors import UserError
from validator.severity import Severity

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:  # not loaded by a participant: every rank's launch path (no dataclasses either)
    from typing import Any

    from validator.cliopts import NetPairs
    from validator.model import Facts, Outcome
    from validator.profiles import Profile

# Missing participants are reported as outcomes (exit 3, worth a retry), not as RNK findings.
NOT_IN_PREFLIGHT = ("RNK002", "RNK007", "PRF008")
MAX_PARTICIPANTS = 1_000_000  # a sanity bound on --expect, WORLD_SIZE and --nnodes


class Options:
    """The command line (main.py). Options and Plan are plain classes, not NamedTuples: typing's
    NamedTuple costs every rank ~1 ms at start. Never changed once made, their lists included."""

    __slots__ = ("allow_incomplete", "command", "coordinator", "expect", "fail_on", "fmt", "groups", "hosts",
                 "ignore", "job_id", "net_check", "net_check_pairs", "output", "probes", "profile", "prom_file",
                 "quiet", "secret_file", "select", "smoke", "termination_log", "timeout", "verbose")  # fmt: skip

    def __init__(
        self,
        command: list[str] | None = None,
        timeout: float = 60.0,
        coordinator: str | None = None,
        job_id: str | None = None,
        secret_file: str | None = None,
        expect: int | None = None,
        hosts: str | None = None,
        profile: str | None = None,
        fmt: str = "table",
        output: str | None = None,
        fail_on: Severity | None = Severity.ERROR,
        select: list[str] | None = None,
        ignore: list[str] | None = None,
        allow_incomplete: bool = False,
        net_check: bool = False,
        net_check_pairs: NetPairs = "rings",  # rings | all: every pair of nodes too (netcheck/sweep.py)
        probes: bool = False,  # the node probes (compute, memory) on every host, judged against the peers
        smoke: bool = False,
        groups: bool = False,  # after a pass, rehearse the layout's process groups (groups.py)
        verbose: bool = False,
        quiet: bool = False,
        termination_log: str | None = None,  # one-line summary for `kubectl describe pod`
        prom_file: str | None = None,  # Prometheus textfile metrics (validator.report.prom)
    ) -> None:
        self.command, self.timeout, self.coordinator, self.job_id = command or [], timeout, coordinator, job_id
        self.secret_file, self.expect, self.hosts, self.profile = secret_file, expect, hosts, profile
        self.fmt, self.output, self.fail_on, self.select, self.ignore = fmt, output, fail_on, select or [], ignore or []
        self.allow_incomplete, self.net_check, self.net_check_pairs = allow_incomplete, net_check, net_check_pairs
        self.probes, self.smoke, self.groups, self.verbose, self.quiet = probes, smoke, groups, verbose, quiet
        self.termination_log, self.prom_file = termination_log, prom_file

    def _asdict(self) -> dict[str, Any]:  # as a NamedTuple's: door.py hands it to its process
        return {k: getattr(self, k) for k in self.__slots__}


# Findings a late arrival can still clear (missing participants, names that may resolve later,
# counts per node or job): they wait for the deadline. Anything else at or above --fail-on ends
# the wait at once: no late arrival can make that verdict a pass.
HEALABLE = frozenset({"RNK002", "RNK005", "RNK007", "PRF001", "PRF002", "PRF008", "RDZ003", "RDZ005"})
LAST_CALL_S = 30.0  # torchrun's default last_call_timeout for an elastic --nnodes=MIN:MAX
PORT_TRIES = 8  # per-rank mode inside torchrun: candidate ports after the agent's store


class Plan:
    __slots__ = ("door", "expected", "host", "job_id", "keyed", "last_call", "minimum", "mode", "names", "ports")

    def __init__(
        self,
        host: str,
        ports: list[int],  # the job's port; inside torchrun, candidates after the agent's store
        mode: str,  # rank | node
        keyed: bool,  # participants known by rank or node rank; else by (host, pid), as c10d knows nodes
        expected: int,  # participants (the maximum, for an elastic range)
        minimum: int,  # an elastic range passes with this many once the last call is over
        last_call: float,
        job_id: str,
        names: list[str],  # expected hosts in node (or node-of-rank) order, when known
        door: int | None = None,  # an elastic range: where late nodes are checked after the pass (door.py)
    ) -> None:
        self.host, self.ports, self.mode, self.keyed, self.expected = host, ports, mode, keyed, expected
        self.minimum, self.last_call, self.job_id, self.names, self.door = minimum, last_call, job_id, names, door

    def _asdict(self) -> dict[str, Any]:  # as a NamedTuple's: door.py hands it to its process
        return {k: getattr(self, k) for k in self.__slots__}

    @property
    def port(self) -> int:
        return self.ports[0]

    @property
    def candidates(self) -> list[int]:
        """Where a participant looks for the coordinator: the job's port(s), then the door."""
        return self.ports + ([self.door] if self.door else [])


def endpoint(opts: Options, facts: Facts) -> tuple[str, list[int]]:
    """--coordinator, else the launch contract's master (torchrun command, PET_*, MASTER_*).
    Inside torchrun (per-rank mode) the agent's store holds MASTER_PORT: the coordinator binds
    the first free port after it, and participants try the same short list in the same order."""
    launch = facts["launch"]
    if opts.coordinator:
        text_host, _, text_port = opts.coordinator.rpartition(":")
        if not text_host or not text_port.isdecimal():
            raise UserError(f"--coordinator must be HOST:PORT, got {opts.coordinator!r}")
        return text_host.strip("[]"), [int(text_port)]
    host, port = launch["master_addr"], launch["master_port"]
    bad = [f"{k}={v!r}" for k, v in launch["invalid"].items() if "port" in k.lower()]  # as RDZ007 names it
    if bad:
        fix = "write the endpoint as HOST:PORT" if "without a port" in bad[0] else "use a port number in 1024-65535"
        raise UserError(f"invalid rendezvous port {bad[0]}: {fix}")
    if not host or port is None:
        raise UserError(
            "no rendezvous address: set MASTER_ADDR and MASTER_PORT, wrap a torchrun command, "
            "or pass --coordinator HOST:PORT"
        )
    if not 0 <= port < 65536 or (port == 0 and launch["nnodes"] != 1):
        raise UserError(f"rendezvous port {port} is out of range (1-65535)")  # 0: --standalone picks one
    if facts["env"].get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return host, [q for q in range(port + 1, port + 1 + PORT_TRIES) if q < 65536]
    return host, [port]


def elastic(launch: Any, env: dict[str, str]) -> tuple[int | None, float]:
    """The minimum of torchrun's --nnodes=MIN:MAX (None when fixed) and its last call."""
    options = (launch["command"] or {}).get("options", {})
    raw = str(options.get("nnodes") or env.get("PET_NNODES") or "")
    conf = str(options.get("rdzv_conf") or env.get("PET_RDZV_CONF") or "")
    last_call = LAST_CALL_S
    for item in conf.split(","):
        name, _, value = item.partition("=")
        if name.strip() == "last_call_timeout":
            with contextlib.suppress(ValueError):
                last_call = float(value)
    low, sep, _ = raw.partition(":")
    return (int(low) if sep and low.strip().isdecimal() else None), last_call


def plan(opts: Options, facts: Facts, profile: Profile | None) -> Plan:
    launch = facts["launch"]
    host, ports = endpoint(opts, facts)
    mode = launch["mode"]
    expected = opts.expect or (launch["world_size"] if mode == "rank" else launch["nnodes"])
    if not expected:
        raise UserError(f"cannot tell how many participants to expect ({mode} mode, no "
                        f"{'WORLD_SIZE' if mode == 'rank' else '--nnodes'}); pass --expect N")  # fmt: skip
    if expected > MAX_PARTICIPANTS:
        raise UserError(f"{expected} participants expected; at most {MAX_PARTICIPANTS} are supported")
    # c10d and etcd assign node ranks at rendezvous (torchrun ignores --node-rank there) and know a
    # node by its host and agent pid; the wrapper execs torchrun in place, so the pid is the same.
    keyed = mode == "rank" or launch["rdzv_backend"] in (None, "static")
    minimum, last_call = elastic(launch, facts["env"]) if not keyed and not opts.expect else (None, 0.0)
    hostlist = opts.hosts or launch["nodelist"] or (profile.hosts if profile else None)
    names: list[str] = []
    if hostlist:
        from validator.targets import expand

        names = expand(hostlist)
    job = opts.job_id or launch["job_id"] or ""
    low = min(minimum or expected, expected)
    # a door one port up (door.py) for every rendezvous that is not keyed: late nodes of a range are checked there,
    # and a node beyond the job's count is turned away there, never taking the port torchrun is about to bind
    door = ports[-1] + 1 if not keyed and ports[-1] < 65535 else None
    return Plan(host, ports, mode, keyed, int(expected), low, last_call, job, names, door)


def rdzv_job(opts: Options, facts: Facts) -> bool:
    """Whether this participant's job id is only its launcher's rendezvous id (torchrun --rdzv-id),
    which a static node of the same job does not have: a coordinator then compares the two
    launches instead of refusing "another job" (connection.got_header)."""
    launch = facts["launch"]
    return not opts.job_id and bool(launch["job_id"]) and launch["job_id"] == launch["rdzv_id"]


def key(p: Plan) -> Callable[[Facts], Any]:
    def by(f: Facts) -> Any:
        launch = f["launch"]
        value = launch["rank"] if p.mode == "rank" else launch["node_rank"]
        return value if p.keyed and isinstance(value, int) else (f["host"], f["pid"])

    return by


MISSING_HOSTS = 8  # beyond this many hosts with missing participants, one outcome names them all, folded


def missing(
    p: Plan, arrived: list[Facts], facts: Facts, waited: float, early: bool = False, present: Set[Any] | None = None
) -> list[Outcome]:
    """Participants that never arrived, one outcome per expected host (or one in all when the
    hosts are unknown), ranks folded: 50,000 missing ranks stay a few lines. ``present``: the
    keys of ``arrived`` (``key(p)``), when the caller counted them as they came (coordinator.Gathered)."""
    from validator.model import Outcome
    from validator.targets import fold_hosts, fold_ranks

    when = (f"had not arrived when the verdict was decided in {waited:.0f} s" if early else
            f"never reached the coordinator in {waited:.0f} s: not started, or launched with another master "
            "address or port (compare the launch lines), or it cannot reach this host")  # fmt: skip
    present = set(map(key(p), arrived)) if present is None else present
    if not p.keyed:  # c10d: nodes have no rank until the rendezvous; name the hosts not seen
        short = p.minimum - len(present)
        if short <= 0:
            return []
        seen = {f["host"] for f in arrived}
        absent = [n for n in p.names if n not in seen]
        who = f"expected on {fold_hosts(absent)}; " if absent else ""
        need = f"{p.minimum}-{p.expected}" if p.minimum < p.expected else str(p.expected)
        return [Outcome(f"{short} of {need} nodes (--nnodes)", "missing", who + when)]
    lws = facts["launch"]["local_world_size"] or 1
    by_host: dict[str, list[int]] = {}
    for k in sorted(set(range(p.expected)).difference(present)):  # at C speed: 12,500 nodes, 100,000 ranks
        node = k if p.mode == "node" else k // lws
        by_host.setdefault(p.names[node] if node < len(p.names) else "", []).append(k)
    what = "rank" if p.mode == "rank" else "node rank"
    if len(by_host) > MISSING_HOSTS:  # 10 % of 12,500 nodes: one line, ranks and hosts folded
        hosts = [h for h in by_host if h]
        ks = [k for group in by_host.values() for k in group]
        where = f"expected on {fold_hosts(hosts)}; " if hosts else ""
        return [Outcome(f"{len(ks)} {what}s: {fold_ranks(ks)}", "missing", where + when)]
    return [
        Outcome(f"{what} {fold_ranks(ks)}", "missing", f"{'expected on ' + host + '; ' if host else ''}{when}")
        for host, ks in by_host.items()
    ]


def is_candidate(facts: Facts, p: Plan) -> bool:
    """Rank 0 / node rank 0 (any node, with c10d) on the host the endpoint names."""
    launch = facts["launch"]
    mine = launch["rank"] if p.mode == "rank" else launch["node_rank"]
    if p.keyed and mine not in (0, None):
        return False
    return holds_endpoint(facts, p)


def is_deputy(facts: Facts, p: Plan) -> bool:
    """A static node whose node rank is not 0 on the host the endpoint names: if no node rank 0
    hosts the rendezvous there, nobody will (the same --node-rank everywhere, node ranks swapped).
    It coordinates in node rank 0's place after a short wait (run.rendezvous), so the drift is
    named in seconds instead of every node reporting "Connection refused" at the deadline."""
    mine = facts["launch"]["node_rank"]
    return p.mode == "node" and p.keyed and isinstance(mine, int) and mine != 0 and holds_endpoint(facts, p)


def holds_endpoint(facts: Facts, p: Plan) -> bool:
    """Whether the endpoint's host is an address of this node (or loopback)."""
    import ipaddress

    from validator.agent.probe import resolve
    from validator.facts.network import is_loopback

    try:  # an address is itself: no lookup thread that a loaded node may time out (both nodes then joined, nobody hosted)
        addrs = [str(ipaddress.ip_address(p.host.strip("[]")))]
    except ValueError:
        addrs = resolve([p.host])[p.host].get("addrs", [])
    ours = {a.split("/")[0] for i in facts["network"]["interfaces"] for a in i["addrs"]}
    return any(a in ours or is_loopback(a) for a in addrs)
