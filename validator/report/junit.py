"""JUnit XML: one testcase per check code that ran (CI dashboards show them as tests), one
per unreachable target; findings at or above ``fail_on`` are failures. Every text goes through
``visible``: XML 1.0 has no way to carry most control characters, so they show as escapes."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from validator.model import Report
from validator.report.options import RenderOptions
from validator.report.text import fold, visible, where


def render_junit(report: Report, options: RenderOptions) -> str:
    codes, fail_on = options.codes, options.fail_on
    by_code: dict[str, list] = {}  # type: ignore[type-arg]
    for f in fold(report.findings):
        by_code.setdefault(f.code, []).append(f)
    all_codes = list(dict.fromkeys([*codes, *by_code]))
    v = visible
    suite = ET.Element("testsuite", name=v(report.title))
    failures = 0
    for code in all_codes:
        findings = by_code.get(code, [])
        title = findings[0].title if findings else _title(code)
        case = ET.SubElement(suite, "testcase", classname="cluster-validator", name=v(f"{code} {title}"))
        failing = [f for f in findings if fail_on is not None and f.severity >= fail_on]
        if failing:
            failures += 1
            message = v("; ".join(f.message for f in failing)[:500])
            el = ET.SubElement(case, "failure", message=message, type=v(code))
            el.text = "\n".join(
                f"{f.severity.label} {where(f)}: {v(f.message)}\nfix: {v(f.fix)}\nverify: {v(f.verify)}"
                for f in failing
            )
        elif findings:
            ET.SubElement(case, "system-out").text = "\n".join(
                f"{f.severity.label} {where(f)}: {v(f.message)}" for f in findings
            )
    for o in report.outcomes:
        case = ET.SubElement(suite, "testcase", classname="cluster-validator.targets", name=v(o.target))
        ET.SubElement(case, "error", message=v(f"{o.status}: {o.detail}"), type=v(o.status))
    for err in report.input_errors:
        case = ET.SubElement(suite, "testcase", classname="cluster-validator.input", name=v(err.split(":", 1)[0]))
        ET.SubElement(case, "error", message=v(err), type="input")
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    suite.set("errors", str(len(report.outcomes) + len(report.input_errors)))
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _title(code: str) -> str:
    """The code's title for a code that found nothing (it still shows as a passing test)."""
    from validator.registry import registry

    known = registry().get(code)
    return known.title if known else code
