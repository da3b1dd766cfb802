"""What a participant does with its verdict (or without one): print or write the report, the
smoke test, then exec the job's command in place on a pass. The verdict itself: run.py."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from validator.errors import UserError
from validator.preflight import k8s
from validator.preflight.plan import Options, Plan
from validator.severity import Severity

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import Facts, Report


def named(verdict: dict[str, Any], facts: Facts) -> bool:
    """Whether the verdict (participant.well_formed) names this participant's host or rank."""
    who = verdict.get("named") or {}
    rank = facts["launch"]["rank"]
    if facts["host"] in (who.get("hosts") or []):
        return True
    if rank is None or not who.get("ranks"):  # a pass names nobody: no rank lists to load
        return False
    from validator.targets import expand_ranks

    try:
        return rank in expand_ranks(who["ranks"])
    except UserError:  # not a rank list: it names nobody
        return False


def brief(opts: Options) -> bool:
    """Whether the verdict's line is all this participant prints or writes, unless the verdict names
    it: the coordinator then sends it that line, not the whole report (at 12,500 nodes, 30 KB a node)."""
    return not (opts.verbose or opts.output or opts.fmt == "json" or opts.termination_log or opts.prom_file)


def stages(opts: Options) -> dict[str, Any]:
    """What runs after a pass (--smoke, --groups) and whether its warnings block (--fail-on), as the
    coordinator sends it with a pass: every participant acts on the coordinator's, so that one given
    other options cannot run the job while the rest stop, or wait alone in a stage the rest skip."""
    return {"smoke": opts.smoke, "groups": opts.groups, "fail_on": None if opts.fail_on is None else int(opts.fail_on)}


def adopt(opts: Options, verdict: dict[str, Any]) -> Options:
    """``opts`` with the verdict's stages (``stages``), where it carries well-formed ones."""
    got = verdict.get("stages")
    if not isinstance(got, dict) or type(got.get("smoke")) is not bool or type(got.get("groups")) is not bool:
        return opts
    level = got.get("fail_on")
    if level is not None and (type(level) is not int or level not in {int(s) for s in Severity}):
        return opts
    return Options(**{**opts._asdict(), "smoke": got["smoke"], "groups": got["groups"],
                      "fail_on": None if level is None else Severity(level)})  # fmt: skip


def speaks(facts: Facts, p: Plan) -> bool:
    """One verdict line per node: in per-rank mode only local rank 0 prints it (unless named)."""
    return p.mode != "rank" or facts["launch"]["local_rank"] in (0, None)


AfterPass = Callable[[], tuple[str | None, list[str]]]  # (what failed, the lines rank 0 prints)


def after_pass(
    opts: Options, p: Plan, facts: Facts, port: int, seat: object = None, hosts: bool = False
) -> AfterPass | None:
    """What runs after a pass, before the exec: --smoke, then --groups (each on the job's port).
    ``seat``: the verdict's placement (c10d: every node's predicted node rank, placement.py);
    ``hosts``: this participant coordinated, on the endpoint's host: in node mode its first rank
    of the rehearsal hosts the rehearsal's store there (whatever node rank c10d gives it)."""
    launch = facts["launch"]
    rank = launch["rank"] if p.mode == "rank" else launch["node_rank"]
    node_mode = opts.groups and p.mode == "node"
    # under c10d a node has no node rank before torchrun: the smoke numbers the nodes itself (smoke.py;
    # an elastic range was refused before the rendezvous: run.execute)
    smoke_here = opts.smoke and (isinstance(rank, int) or p.mode == "node")
    if not (smoke_here or node_mode or (opts.groups and isinstance(rank, int))):
        return None
    from validator.preflight import smoke

    def run() -> tuple[str | None, list[str]]:
        err, lines = None, []
        if smoke_here:
            t0 = time.monotonic()
            got = smoke.smoke(facts, p.host, port, rank if isinstance(rank, int) else None, p.expected, hosts=hosts)
            err = f"PRE006 smoke all_reduce failed: {got.error}" if got.error else None
            lines = [
                f"smoke: all_reduce ok in {time.monotonic() - t0:.1f} s",
                *(smoke.report(got.rows) if got.rank == 0 else []),
            ]
        if err is None and node_mode:
            err, more = groups_here(opts, p, facts, port, seat, hosts)
            lines += more
        elif opts.groups and err is None and isinstance(rank, int):
            from validator.facts.gpu import visible_count
            from validator.facts.layout import group_map
            from validator.preflight.groups import on_node

            # FSDP1 HYBRID_SHARD shards over torch.cuda.device_count() ranks: this rank's count, as torch's
            groups = (group_map(launch["layout"], p.expected, visible_count(facts["gpus"]) or None)
                      if launch["layout"] else None) or {}  # fmt: skip
            name = str(facts["host"] or facts["hostname"])
            failed, more = on_node(p.host, port, rank, 1, p.expected, groups, name, gpus=bool(facts["gpus"]["devices"]),
                                   master=rank == 0, local0=launch["local_rank"] or 0)  # fmt: skip
            err = f"PRE011 process group rehearsal failed: {failed}" if failed else None
            lines += more if speaks(facts, p) else [x for x in more if f"rank {rank} (" in x]
        else:
            more = lines
        slow = [x for x in more if x.startswith("PRE012")]  # all the lines: not only those this rank prints
        if err is None and slow and opts.fail_on is not None and opts.fail_on <= Severity.WARNING:
            err = f"{slow[0]} (a warning, and --fail-on {opts.fail_on.name.lower()})"
        return err, lines

    return run


def groups_here(
    opts: Options, p: Plan, facts: Facts, port: int, seat: object, hosts: bool
) -> tuple[str | None, list[str]]:
    """--groups in node mode: this node's torchrun ranks, started here as torchrun will number them
    (node rank x ranks per node + local rank), rehearse the layout's groups (groups.on_node).
    With c10d the node rank is the coordinator's prediction; when there is none, one line, exit 2."""
    from validator.facts.gpu import visible_count
    from validator.facts.layout import group_map
    from validator.preflight import placement
    from validator.preflight.groups import on_node

    launch = facts["launch"]
    node_rank = launch["node_rank"] if p.keyed else placement.mine(seat, facts, p.expected)
    lws = launch["local_world_size"]
    if not isinstance(node_rank, int) or not isinstance(lws, int):
        raise UserError(f"--groups cannot place the ranks on the nodes: {node_rank}")
    world = p.expected * lws
    devices = visible_count(facts["gpus"]) or None  # FSDP1 HYBRID_SHARD's shard: what each rank's torch counts
    groups = (group_map(launch["layout"], world, devices) if launch["layout"] else None) or {}
    failed, lines = on_node(p.host, port, node_rank, lws, world, groups, str(facts["host"] or facts["hostname"]),
                            gpus=bool(facts["gpus"]["devices"]), master=hosts)  # fmt: skip
    how = "given" if p.keyed else "predicted from torch's c10d rank assignment"
    from validator.targets import fold_ranks

    mine = fold_ranks(range(node_rank * lws, (node_rank + 1) * lws))
    lines.insert(0, f"placement: node rank {node_rank} of {p.expected} here ({facts['host']} pid {facts['pid']}, "
                    f"ranks {mine}), {how}")  # fmt: skip
    return (f"PRE011 process group rehearsal failed: {failed}" if failed else None), lines


def say(text: str) -> None:
    """To stderr, come what may: after this participant confirmed a pass, a stderr or stdout that is closed or
    whose reader has gone (EPIPE) must not stop it before its exec, while the others start the job."""
    for stream, what in ((sys.stderr, text), (sys.stdout, "")):
        try:
            if what:
                stream.write(what)
            stream.flush()
        except (OSError, ValueError, AttributeError):  # AttributeError: a stream Python found closed (None)
            pass


def emit(opts: Options, doc: dict[str, Any], text: str, show_full: bool, code: int) -> None:
    """The report: JSON to --output (and to stdout with --format json, only without a command:
    the job's own stdout follows); the table, or only the verdict line, to stderr. A report file
    that cannot be written is a warning: the verdict stands."""
    if opts.output or opts.fmt == "json":  # the JSON text only where it goes (not on every rank)
        from validator.cliopts import write_report
        from validator.report.text import json_text

        as_json = json_text(doc)
        if opts.output:
            try:
                write_report(as_json, opts.output)
            except UserError as e:
                say(f"validator: warning: {e}\n")
        if opts.fmt == "json":
            write_report(as_json, None)
    if opts.termination_log:
        k8s.write_termination_log(opts.termination_log, doc, code, text)
    if opts.prom_file:
        from validator.report.prom import write_report_doc

        write_report_doc(opts.prom_file, doc, "preflight", code)
    if opts.quiet:
        show_full = False
    if text:
        say(text if show_full else text.rstrip("\n").rsplit("\n", 1)[-1] + "\n")
    say("")


def finish_local(opts: Options, report: Report) -> int:
    """A participant without a verdict: its own report, always printed in full."""
    from validator.report.options import RenderOptions
    from validator.report.text import render_table

    code = report.exit_code(opts.fail_on)
    state = "PASSED" if code == 0 else f"FAILED (exit {code})"
    text = render_table(report, RenderOptions(verdict=f"preflight {state} (no verdict from the coordinator)"))
    emit(opts, report.to_json(), text, True, code)
    return act(opts, code)


def act(opts: Options, code: int, then: AfterPass | None = None) -> int:
    """After the verdict: the smoke test, then exec the command in place on a pass."""
    if code == 0 and then is not None:
        err, lines = then()
        if err:
            say(f"validator: {err}\n")
            return 1
        for line in lines:
            if not opts.quiet or line.startswith("PRE"):
                say(f"validator: {line}\n")
    if code == 0 and opts.command:
        say("")
        if (pairs := sys.modules.get("validator.netcheck.pairrun")) is not None:
            pairs.stop()  # an all_reduce child whose partner never joined (--net-check) does not outlive us
        try:
            os.execvp(opts.command[0], opts.command)  # the job replaces us: nothing lingers
        except OSError as e:
            raise UserError(f"cannot run {opts.command[0]}: {e.strerror}") from None
    return code
