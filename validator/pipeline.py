"""The one place where the stages meet: targets -> transport -> agent -> facts -> checks -> report.

The CLI parses options and calls these functions; transports move bytes and know no checks.
The scan command (choosing a transport, its phases, the drain list) lives in validator.scan.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from validator.agent import probe as agent
from validator.errors import UserError
from validator.facts import load_facts, parse
from validator.facts.command import parse_command
from validator.facts.launch import parse_launch

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
# What only checking needs (the checks, the model's reports, profiles, facts files) is imported
# where it is used: a preflight participant, once per rank at launch, only probes.
if TYPE_CHECKING:
    from typing import Any

    from validator.documents import LayoutDoc
    from validator.model import Facts, Finding, Outcome, Report
    from validator.profiles import Profile


def probe_local(argv: list[str] | None = None, environ: dict[str, str] | None = None, port_check: bool = True) -> Facts:
    """Facts of this process on this node, for the launch command ``argv`` if one is given."""
    env = dict(os.environ if environ is None else environ)
    configs = agent.job_configs(argv, env) if argv else None  # accelerate's config: its port, its main address
    launch = parse_launch(agent.filtered_env(env), parse_command(argv) if argv else None, configs)
    names = tuple(n for n in (launch["master_addr"],) if n)
    raw = agent.collect(argv, names, environ=env, port_check=port_check, port=launch["master_port"])
    return parse(raw)


def load_inputs(paths: Iterable[str]) -> tuple[list[Facts], list[str]]:
    """Every readable facts document, and one error line per unreadable one (nothing is lost:
    the good documents are still checked)."""
    from validator.facts.files import load_file
    from validator.facts.share import Shared

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
    from validator.registry import registry

    known = list(registry())
    return select(known, select_, ignore, known)


def ran_codes(codes: list[str] | None, net_check: bool = False, probes: bool = False) -> list[str]:
    """The codes a command ran, in registry order (junit's test cases): the fact checks kept by
    --select/--ignore, and the net check's when it ran. Codes only preflight, node-check or
    diagnose make are not among them."""
    from validator.checks import CHECKS
    from validator.checks.netcheck import CODES as NET
    from validator.probes.codes import CODES as PRB

    ran = [*CHECKS, *(NET if net_check else ()), *(PRB if probes else ())]
    kept = set(ran if codes is None else codes)
    return [c for c in ran if c in kept]


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
    found: list[Finding] | None = None,
) -> Report:
    """The report on ``facts``; ``found``: the checks' findings over them, already computed."""
    from validator.checks import run_checks
    from validator.model import Report

    findings = run_checks(facts, profile, codes, context) if found is None else found
    return Report(
        findings=findings,
        participants=len(facts),
        hosts=list(dict.fromkeys(f["host"] for f in facts)),
        outcomes=outcomes or [],
        input_errors=input_errors or [],
        title=title,
        layout=layout_section(facts, context),
    )


def layout_section(facts: list[Facts], context: str) -> LayoutDoc | None:
    """The report's layout section, when any participant's configuration names a layout."""
    if not any(f["launch"].get("layout") for f in facts):
        return None
    from validator.checks.base import Job
    from validator.checks.layout import summary

    return summary(Job(facts, None, context))


def check_files(paths: list[str], profile_path: str | None, codes: list[str], layout: str | None = None) -> Report:
    """Check every readable facts document. A bad profile stops the command before any facts are
    read (UserError: one line naming the file, exit 2), as in every other command. ``layout``
    (``--layout tp=2,...``) replaces the layout every document's configuration named."""
    from validator.profiles import load_profile

    profile = load_profile(profile_path) if profile_path else None
    facts, errors = load_inputs(paths)
    if layout:
        from validator.facts.layout import parse_explicit

        given = parse_explicit(layout, "--layout")
        if given["errors"]:
            raise UserError(given["errors"][0])
        for f in facts:
            f["launch"]["layout"] = given
    if not facts and not errors:
        errors.append("no facts documents in the given files")
    return check(facts, profile, codes, input_errors=errors)


def to_facts(host: str, raw: dict[str, Any]) -> Facts | str:
    """The node's facts, labelled with the name it was scanned as; or why they do not load."""
    try:
        facts = load_facts(raw, host)
    except UserError as e:
        return str(e)
    facts["host"] = host
    return facts
