"""The preflight flow on one participant: probe, elect, rendezvous, decide, print, exec.

Every participant runs this. The one whose node rank (or rank) is 0 and whose address is the
rendezvous endpoint becomes the coordinator: it binds the job's own port, so the rehearsal proves
what the job will use, and releases it before the job starts. Who is expected and who
coordinates: plan.py.
"""

from __future__ import annotations

import errno
import sys
import time

from validator import pipeline
from validator.agent.probe import held_by, port_owner
from validator.errors import UserError
from validator.preflight import placement
from validator.preflight import protocol as wire
from validator.preflight.finish import act, adopt, after_pass, emit, finish_local, named, speaks, stages
from validator.preflight.plan import (
    Options,
    Plan,
    is_candidate,
    is_deputy,
    key,
    missing,
    plan,
    rdzv_job,
)
from validator.preflight.verdict import codes, local_report, rejected_findings, render, vanished, verdicts

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
# Only the coordinator needs asyncio, the checks, the model's reports and profiles: participants
# (every other rank, on the launch path) import them lazily, which keeps their start-up to the
# standard library, the agent and the facts parser.
if TYPE_CHECKING:
    from typing import Any

    from validator.documents import PreflightDoc
    from validator.model import Facts, Finding
    from validator.preflight.door import Door
    from validator.profiles import Profile


DEPUTY_S = 1.5  # a node holding the endpoint that is not node rank 0 waits this long for node rank 0 to host


def coordinate(
    opts: Options,
    p: Plan,
    facts: Facts,
    sock: Any,
    profile: Profile | None,
    listen: dict[str, Any] | None,
    node: Any = None,
    door: Door | None = None,
    seat: dict[str, Any] | None = None,
) -> int:
    """Gather, decide, print the report here, send it to everyone; returns the exit code.
    ``node``: our node's local socket, where its other ranks meet us (local.py). ``door``: an
    elastic range decides once arrivals pause; later nodes are checked at the door (door.py).
    ``seat``: filled with c10d's predicted placement (placement.wire_doc), when it was predicted."""
    seat = {} if seat is None else seat
    import asyncio

    from validator.preflight import coordinator as coord
    from validator.preflight import peers
    from validator.preflight.gate import Gate

    secret = wire.load_secret(opts.secret_file)

    async def main() -> int:
        expect = coord.expectation(p)
        expect.settle = door.settle if door is not None else 0.0
        c = coord.Coordinator(facts, expect, key(p), p.job_id, secret, opts.timeout,
                              own_listen=listen, net_check=opts.net_check, rdzv_job=rdzv_job(opts, facts))  # fmt: skip
        gate = Gate(opts, p, profile)
        t_start = time.monotonic()
        gathered = await c.gather(sock, gate, node)
        tcp, unix = c.links()
        notes = [f"over {tcp} TCP connection(s) and {unix} node-local"] if p.mode == "rank" else []
        net: list[Finding] = []
        measured: dict[str, Any] = {"net_check": None, "probes": None}  # the JSON's "preflight" section
        if opts.net_check and gathered.complete:
            outcome = await c.working(
                c.check_network(key(p), profile.gpus_per_node if profile else None, opts.net_check_pairs)
            )
            net, measured["net_check"] = outcome.findings, outcome.doc
            notes.append(outcome.line)
        if opts.probes and gathered.complete and not c.early:
            probed = await c.working(c.check_nodes(key(p), profile.baselines if profile else None))
            net += probed.findings
            notes.append(probed.doc["line"])
            measured["probes"] = probed.doc
        all_facts = [a.facts for a in gathered.arrivals]
        wanted = not c.early and bool(set(peers.NAME_CODES) & set(codes(opts)))  # an early verdict does not wait
        t_names = time.monotonic()
        names = await peers.round_(c, key(p)) if wanted else {}
        if names:
            notes.append(f"names: {len(names)} hosts resolved their peers in {time.monotonic() - t_names:.2f} s")
        net += peers.findings(all_facts, names, facts["host"]) + peers.clock_findings(gathered.arrivals, p.host)
        found, laid = gate.findings(all_facts), None
        if placement.applies(p, facts["launch"]) and not c.early and (opts.groups or facts["launch"]["layout"]):
            order, why = placement.predict(all_facts, p)
            seat.update(placement.wire_doc(order, why))
            notes.append(
                placement.note(order) if order is not None else f"node ranks unknown until torch assigns them: {why}"
            )
            if order is not None and facts["launch"]["layout"]:  # the group map's hosts, LAY007 and LAY008 with them
                from validator.checks import run_checks

                laid = placement.placed(order)
                found += run_checks(laid, profile, [k for k in codes(opts) if k in ("LAY007", "LAY008")], "preflight")
        report = pipeline.check(all_facts, profile, codes(opts), context="preflight", found=found,
                                outcomes=missing(p, all_facts, facts, gathered.seconds, c.early, gathered.present),
                                title=f"cluster-validator preflight ({f'[{p.host}]' if ':' in p.host else p.host}:{c.port}, "
                                      f"job {p.job_id or 'unnamed'})")  # fmt: skip
        if laid is not None:
            report.layout = pipeline.layout_section(laid, "preflight")
        extra = peers.defer(pipeline.keep(net + rejected_findings(gathered), codes(opts)), report.findings)
        report.findings = sorted(report.findings + extra, key=lambda f: (-f.severity, f.code))
        exit_code = report.exit_code(opts.fail_on, opts.allow_incomplete)
        ranked = [a.facts for a in c.per_host(key(p))[0]]  # the hosts in rank order, for what to take out
        if opts.net_check or opts.probes:
            report.preflight = taken_out(measured, ranked, report.findings)
        if c.early:
            notes.append(f"decided at {gathered.seconds:.1f} s: no late arrival can make this a pass")
        arrived = [a.facts for a in gathered.arrivals]
        text = render(report, exit_code, arrived, p, gathered.seconds, notes, gathered.present)
        doc = report.to_json()  # once: every participant gets it, and it is printed here
        if exit_code == 0:  # two phases: nobody acts on a pass until everyone counted confirms it
            lost = await c.confirm(*verdicts(report, doc, exit_code, text, c.port, pending=True,
                                             placement=seat if opts.groups and seat else None,
                                             stages=stages(opts)))  # fmt: skip
            if not lost:
                emit(opts, doc, text, True, exit_code)
                await c.go()
                if door is not None:
                    door.admitted = [a.facts for a in gathered.arrivals]
                return exit_code
            report.findings = sorted([vanished(lost, p), *report.findings], key=lambda f: (-f.severity, f.code))
            exit_code = report.exit_code(opts.fail_on, opts.allow_incomplete)
            gone = {id(a.facts) for a in lost}
            kept = [f for f in arrived if id(f) not in gone]
            if report.preflight is not None:
                report.preflight = taken_out(measured, [f for f in ranked if id(f) not in gone], report.findings)
            text = render(report, exit_code, kept, p, time.monotonic() - t_start, notes)
            doc = report.to_json()
        emit(opts, doc, text, True, exit_code)  # now: the coordinator may linger for late arrivals
        await c.deliver(*verdicts(report, doc, exit_code, text, c.port), linger=exit_code != 0)
        return exit_code

    coord.raise_nofile()
    try:
        with coord.paused_gc():
            return asyncio.run(main())
    finally:
        if door is not None and door.admitted:  # a pass: the door listens before the job's port is let go
            door.open(opts, p)
        sock.close()
        if node is not None:
            node.close()


def taken_out(measured: dict[str, Any], arrived: list[Facts], findings: list[Finding]) -> PreflightDoc:
    """The JSON's ``preflight`` section: what --net-check and --probes measured, and the slow nodes
    they named (NET105, PRB001, PRB002) out of the arrivals' hosts, in each launcher's form
    (probes/exclude.py); the hostfile's slots are each host's ranks."""
    from validator.probes.exclude import exclusion, slow_hosts

    slots: dict[str, int] = {}
    for f in arrived:
        slots[f["host"]] = slots.get(f["host"], 0) + 1
    slow = slow_hosts(findings)
    out = [h for h in slots if h in slow] + sorted(slow - set(slots))
    return {
        "net_check": measured["net_check"],
        "probes": measured["probes"],
        "exclude": exclusion(list(slots), out, slots),
    }


def execute(opts: Options) -> int:
    if opts.fmt == "json" and opts.command:
        raise UserError("--format json with a command would mix the report into the job's stdout; "
                        "use --output FILE for the JSON report")  # fmt: skip
    profile = None
    if opts.profile:
        from validator.profiles import load_profile

        profile = load_profile(opts.profile)
    facts = pipeline.probe_local(opts.command or None, port_check=False)
    p = plan(opts, facts, profile)
    if placement.applies(p, facts["launch"]) and (opts.groups or facts["launch"]["layout"]):
        placement.record_addr(facts)  # c10d: the address this node's agent will join with
    if opts.groups:
        from validator.facts.gpu import visible_count
        from validator.facts.layout import group_map

        world = p.expected * ranks_per_node(p, facts)
        layout = facts["launch"]["layout"]
        if layout is None or group_map(layout, world, visible_count(facts["gpus"]) or None) is None:
            what = "no parallel layout (pass --layout tp=N,pp=N,... or the job's own configuration)" if layout is None \
                else f"the layout does not tile the {world} ranks"  # fmt: skip
            raise UserError(f"--groups: {what}")
    if opts.smoke and p.mode == "node" and not isinstance(facts["launch"]["node_rank"], int) and p.minimum < p.expected:
        raise UserError(f"--smoke cannot number the nodes: --nnodes={p.minimum}:{p.expected}: how many nodes start "
                        "is decided at torchrun's rendezvous")  # fmt: skip
    if opts.net_check_pairs == "all":  # every participant refuses above the cap, when the nodes are known
        from validator.cliopts import net_pairs

        net_pairs("all", opts.net_check, len(set(p.names)) or (p.expected if p.mode == "node" else None))
    t0 = time.monotonic()
    listener = open_listener(facts) if opts.net_check else None
    try:
        desc = {"port": listener.port, "token": listener.token, "addrs": listener.bound} if listener else None
        return rendezvous(opts, p, facts, profile, desc, t0)
    finally:
        if listener:
            listener.close()


def ranks_per_node(p: Plan, facts: Facts) -> int:
    """--groups: 1 per participant (per-rank mode), or the ranks one torchrun wrapper will start,
    which the rehearsal starts in its place (finish.after_pass) once every node's node rank is
    known: given (static), or predicted (c10d: placement.py); else a one-line error."""
    if p.mode == "rank":
        return 1
    launch = facts["launch"]
    lws = launch["local_world_size"]
    why = None
    if placement.tool(launch) not in ("torchrun", "accelerate"):  # accelerate launch runs torchrun's launcher
        why = "the wrapped command is not torchrun (run the preflight once per rank: srun, or inside torchrun)"
    elif not isinstance(lws, int) or lws < 1:
        why = "the ranks per node are known only when torchrun starts (--nproc-per-node is not a number)"
    elif not p.keyed:
        why = placement.unpredictable(p, facts)
    elif not isinstance(launch["node_rank"], int):
        why = "this node has no node rank"
    if why is not None or not isinstance(lws, int):
        raise UserError(f"--groups cannot place the ranks on the nodes: {why}")
    return lws


def open_listener(facts: Facts) -> Any:
    """--net-check: listen on the addresses NCCL and Gloo would use here (the same port on both;
    which one is probed is decided with everyone's facts); None when neither can be bound."""
    from validator.facts.network import chosen
    from validator.netcheck.probe import Listener
    from validator.netcheck.ring import scoped

    addrs = [scoped(addr, iface) for addr, iface in (chosen(facts, nccl) for nccl in (True, False)) if addr]
    listener = Listener(addrs)
    if not listener.socks:
        listener.close()
        return None
    return listener


def door_listens(port: int) -> bool:
    from validator.preflight.door import listening  # an elastic range's only: not on every rank's path

    return listening(port)


def rendezvous(
    opts: Options, p: Plan, facts: Facts, profile: Profile | None, listen: dict[str, Any] | None, t0: float
) -> int:
    # a late node of an elastic range on the endpoint's host: the door is open, the job's port is (or
    # is about to be) torchrun's: it joins the door, never takes the port (door.py)
    if is_candidate(facts, p) and not (p.door is not None and door_listens(p.door)):
        from validator.preflight.ports import bind_first  # before asyncio loads: our node's ranks can connect

        try:
            sock, port = bind_first(p.ports)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                from validator.preflight.findings import cannot_bind

                report = local_report(opts, facts, p, None, [cannot_bind.finding(
                    f"cannot listen on port {p.port}: {e.strerror}", hosts=[facts["host"]], actual=str(e.strerror))])  # fmt: skip
                return finish_local(opts, report)
            # Maybe the holder is this job's coordinator (a second rank 0): join it. Held by a
            # program that is not a validator (a stale TCPStore, another service), the job's rank 0
            # cannot bind it either: say so now, with the owner.
            owner = port_owner(p.port)
            if len(p.ports) == 1 and owner is None and not listener_soon(p.port):
                # held without a listener (an outgoing connection's own port, whoever's, a validator's too): no
                # coordinator can be there, and the job's TCPStore cannot bind it either
                return finish_local(opts, local_report(opts, mark_busy(facts, p.port, held_by(p.port)), p, None, []))
            if len(p.ports) == 1 and owner and "validator" not in owner:
                return finish_local(opts, local_report(opts, mark_busy(facts, p.port, owner), p, None, []))
        else:
            from validator.preflight import local
            from validator.preflight.door import Door

            node = local.bind_node(local.job_key(p), facts["host"]) if local.grouped(facts, p.mode) else None
            door = Door(p)
            seat: dict[str, Any] = {}
            try:
                code = coordinate(opts, p, facts, sock, profile, listen, node, door, seat)
            finally:
                door.close()
            return act(opts, code, after_pass(opts, p, facts, port, seat, hosts=True))
    from validator.preflight.local import join

    if is_deputy(facts, p):  # node rank 0 should be here: if nobody hosts within DEPUTY_S, we do
        result = join(opts, p, facts, listen, timeout=DEPUTY_S)
        att = result.attempts
        if result.verdict is None and att.refused and not (att.foreign or att.silent or att.rejected or att.gave_up):
            from validator.preflight.ports import bind_first

            try:
                sock, port = bind_first(p.ports)
            except OSError:
                pass
            else:
                rank = facts["launch"]["node_rank"]
                sys.stderr.write(f"validator: nothing hosts the rendezvous on {p.host}:{p.port} after {DEPUTY_S:g} s "
                                 f"and this node (node rank {rank}) holds that address: coordinating in node rank "
                                 "0's place\n")  # fmt: skip
                code = coordinate(opts, p, facts, sock, profile, listen)
                return act(opts, code, after_pass(opts, p, facts, port, hosts=True))
        owner = port_owner(p.port) if result.verdict is None and (att.silent or att.foreign) else None
        if owner and "validator" not in owner:  # silent or strange, and on our node: we can see who it is
            return finish_local(opts, local_report(opts, mark_busy(facts, p.port, owner), p, None, []))
        if result.verdict is None:
            result = join(opts, p, facts, listen, timeout=max(0.1, opts.timeout - (time.monotonic() - t0)))
    else:
        result = join(opts, p, facts, listen)
    if result.verdict is not None:
        v = result.verdict
        # one report a node: in per-rank mode a named host's report is printed by its local rank 0 alone, unless
        # this rank had to reach the coordinator itself (its node's leader gone, or never there): then it says it
        host_named = facts["host"] in ((v.get("named") or {}).get("hosts") or [])
        alone = result.attempts.tries > 0 and p.mode == "rank"
        full = opts.verbose or (named(v, facts) and (speaks(facts, p) or not host_named or alone))
        text = str(v["text"]) if full or speaks(facts, p) else ""
        emit(opts, v.get("report") or {}, text, full, int(v["exit_code"]))  # participant.well_formed
        port = v["port"] if isinstance(v.get("port"), int) else p.port
        opts = adopt(opts, v)  # the coordinator's stages after a pass: every participant alike
        return act(opts, int(v["exit_code"]), after_pass(opts, p, facts, port, v.get("placement")))
    if result.attempts.foreign and is_candidate(facts, p):
        facts = mark_busy(facts, p.port, port_owner(p.port))
    return finish_local(opts, local_report(opts, facts, p, result, []))


def mark_busy(facts: Facts, port: int, owner: str | None) -> Facts:
    master = facts["network"]["master"]
    if master is not None:
        master["port_free"] = False
        master["port_owner"] = owner
    return facts


def listener_soon(port: int, tries: int = 3, pause: float = 0.05) -> bool:
    """Whether something listens on ``port`` now or within a few pauses (another coordinator of this
    job binds and listens at once: a bind refused a moment before its listen is not a stranger's)."""
    for _ in range(tries):
        if port_owner(port) is not None:
            return True
        time.sleep(pause)
    return False
