"""The one place where the stages meet: targets -> transport -> agent -> facts -> checks -> report.

The CLI parses options and calls these functions; transports move bytes and know no checks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from validator.agent import probe as agent
from validator.checks import CHECKS, run_checks, select
from validator.errors import UserError
from validator.facts import load_facts, parse
from validator.facts.command import parse_command
from validator.facts.launch import parse_launch
from validator.model import Facts, Outcome, Report
from validator.profiles import Profile, load_profile


def probe_local(argv: list[str] | None = None, environ: dict[str, str] | None = None, port_check: bool = True) -> Facts:
    """Facts of this process on this node, for the launch command ``argv`` if one is given."""
    env = dict(os.environ if environ is None else environ)
    launch = parse_launch(agent.filtered_env(env), parse_command(argv) if argv else None)
    names = tuple(n for n in (launch["master_addr"],) if n)
    raw = agent.collect(argv, names, environ=env, port_check=port_check, port=launch["master_port"])
    return parse(raw)


def read_documents(path: str) -> Iterator[tuple[str, Any]]:
    """(where, document) for each JSON document in a file: one document, a JSON array, or JSON
    Lines (``srun validator probe --json > facts.jsonl``). Errors name the file and line."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise UserError(f"cannot read: {e.strerror}", path) from None
    except UnicodeDecodeError:
        raise UserError("not a text file", path) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as whole:
        lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
        if len(lines) <= 1:
            raise UserError(f"not valid JSON: {whole.msg}", f"{path}:{whole.lineno}") from None
        for n, line in lines:
            try:
                yield f"{path}:{n}", json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError(f"not valid JSON ({e.msg}, column {e.colno}); truncated file?", f"{path}:{n}") from None
        return
    if isinstance(doc, list):
        for n, d in enumerate(doc):
            yield f"{path}[{n}]", d
    else:
        yield path, doc


def load_inputs(paths: Iterable[str]) -> tuple[list[Facts], list[str]]:
    """Every readable facts document, and one error line per unreadable one (nothing is lost:
    the good documents are still checked)."""
    facts: list[Facts] = []
    errors: list[str] = []
    for path in paths:
        try:
            for where, doc in read_documents(path):
                try:
                    facts.append(load_facts(doc, where))
                except UserError as e:
                    errors.append(str(e))
        except UserError as e:
            errors.append(str(e))
    return facts, errors


def resolve_codes(select_: list[str], ignore: list[str]) -> list[str]:
    return select(CHECKS, select_, ignore, CHECKS)


def check(
    facts: list[Facts],
    profile: Profile | None = None,
    codes: list[str] | None = None,
    context: str = "check",
    outcomes: list[Outcome] | None = None,
    input_errors: list[str] | None = None,
    title: str = "cluster-validator check",
) -> Report:
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
    profile = load_profile(profile_path) if profile_path else None
    facts, errors = load_inputs(paths)
    if not facts and not errors:
        errors.append("no facts documents in the given files")
    return check(facts, profile, codes, input_errors=errors)
