"""Prometheus textfile output (node-exporter's textfile collector) for scan, preflight and
node-check: one file per command, written atomically so the collector never reads half of it.

    cluster_validator_findings{command, code, severity, host}   findings of that code on that host
    cluster_validator_pass{command}                             1 when the run passed (exit 0)
    cluster_validator_exit_code{command}                        the command's exit code
    cluster_validator_duration_seconds{command}                 how long the run took
    cluster_validator_last_run_timestamp_seconds{command}       when it finished (Unix time)
    cluster_validator_hosts{command}                            hosts with facts
    cluster_validator_incomplete_targets{command, status}       targets without facts, by status

A finding about the job as a whole (no host) has ``host=""``. Host names show control characters
as escapes (``report.text.visible``), as every human-facing format does.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from validator.errors import UserError
from validator.model import Report
from validator.report.text import visible

PREFIX = "cluster_validator"


def write_prom(path: str, report: Report, command: str, exit_code: int, duration_s: float) -> None:
    """Write the metrics of one run to ``path`` (atomically: a temporary file, then rename)."""
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

    registry = CollectorRegistry()
    findings = Gauge(f"{PREFIX}_findings", "Findings by code, severity and host", ["command", "code", "severity", "host"],
                     registry=registry)  # fmt: skip
    counts: Counter[tuple[str, str, str]] = Counter()
    for f in report.findings:
        for host in f.hosts or [""]:
            counts[(f.code, f.severity.label, visible(host))] += 1
    for (code, severity, host), n in counts.items():
        findings.labels(command, code, severity, host).set(n)
    gauges = {
        "pass": ("1 when the run passed (exit code 0)", 1 if exit_code == 0 else 0),
        "exit_code": ("Exit code of the run", exit_code),
        "duration_seconds": ("Duration of the run", round(duration_s, 3)),
        "last_run_timestamp_seconds": ("Unix time the run finished", time.time()),
        "hosts": ("Hosts with facts", len(report.hosts)),
    }
    for name, (doc, value) in gauges.items():
        Gauge(f"{PREFIX}_{name}", doc, ["command"], registry=registry).labels(command).set(value)
    incomplete = Gauge(f"{PREFIX}_incomplete_targets", "Targets without facts, by status", ["command", "status"],
                       registry=registry)  # fmt: skip
    for status, n in Counter(o.status for o in report.outcomes).items():
        incomplete.labels(command, status).set(n)
    try:
        write_to_textfile(path, registry)
    except OSError as e:
        raise UserError(f"cannot write the Prometheus file: {e.strerror}", path) from None


def process_seconds() -> float:
    """Seconds since this process started (for commands that do not time themselves)."""
    import psutil

    return max(0.0, time.time() - psutil.Process().create_time())


def write_report_doc(path: str, doc: dict[str, Any], command: str, exit_code: int) -> None:
    """``write_prom`` for a command that holds its report as JSON (preflight's verdict), timed
    from the start of this process; a file that cannot be written is a warning on stderr."""
    import sys

    try:
        write_prom(path, Report.from_json(doc), command, exit_code, process_seconds())
    except UserError as e:
        print(f"validator: warning: {e}", file=sys.stderr)
