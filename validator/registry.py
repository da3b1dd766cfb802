"""The registry of finding codes: every family's table, gathered. A root: it imports each stage's
code table (checks, the net check, preflight, diagnose, node-check); nothing that defines a code
imports it. ``validator explain``, ``docs/checks/`` and ``--select/--ignore`` read it."""

from __future__ import annotations

from functools import cache

from validator.codes import Code, table


@cache
def registry() -> dict[str, Code]:
    """Every finding code of every family, sorted by code. Each family module is imported here,
    by name: one that fails to import fails this."""
    from validator import checks
    from validator.checks import netcheck
    from validator.diagnose import codes as diagnose
    from validator.nodecheck import codes as nodecheck
    from validator.preflight import findings as preflight
    from validator.probes import codes as probes

    families = (checks.CODES, netcheck.CODES, preflight.CODES, diagnose.CODES, nodecheck.CODES, probes.CODES)
    every = table(*(c for family in families for c in family.values()))
    return dict(sorted(every.items()))
