"""One self-contained HTML page for `validator scan --format html`: what to drain, the node x
check matrix (pass / info / warn / fail / unreachable, hosts folded where their rows are
identical), each finding expandable to expected vs actual, fix and verification command, and
the hosts that gave no facts. Inline CSS, no scripts, nothing fetched: it opens from a file, a
CI artifact or a mail attachment alike. Standard library only.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from validator.documents import ExcludeDoc, ProbesDoc
from validator.drain import drain_hosts
from validator.model import Finding, Outcome, Report, Severity
from validator.report.options import RenderOptions
from validator.report.text import fold, summary, visible, where
from validator.targets import fold_hosts

CELL = {
    "pass": ("✓", "passed"),
    "info": ("i", "info"),
    "warn": ("!", "warning"),
    "fail": ("✗", "error"),
    "unreachable": ("–", "no facts"),
}
STATUS_OF = {Severity.ERROR: "fail", Severity.WARNING: "warn", Severity.INFO: "info"}
RANK = {"pass": 0, "info": 1, "warn": 2, "fail": 3, "unreachable": 4}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2330;background:#fbfbfd}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.sub{color:#5b6475;margin-bottom:16px}.counts span{margin-right:14px}
.box{border:1px solid #d9dde6;border-radius:8px;background:#fff;padding:12px 16px;margin:8px 0}
.drain{border-left:6px solid #c62828}.clean{border-left:6px solid #2e7d32}
table{border-collapse:collapse;background:#fff}th,td{border:1px solid #d9dde6;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f7;font-weight:600}th.code{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-family:ui-monospace,monospace}
td.c{text-align:center;font-weight:700;min-width:22px}
.pass{background:#dff3e2;color:#1b5e20}.info{background:#e3eefb;color:#0d47a1}.warn{background:#fff1cc;color:#7a4f00}
.fail{background:#fbd9d7;color:#b71c1c}.unreachable{background:#e4e4e8;color:#444}
.hosts{font-family:ui-monospace,monospace;white-space:nowrap}.n{color:#5b6475}
details{border:1px solid #d9dde6;border-radius:6px;background:#fff;margin:6px 0;padding:6px 10px}
summary{cursor:pointer}summary .sev{display:inline-block;min-width:58px;padding:0 6px;border-radius:4px;margin-right:6px;text-align:center;font-size:12px}
code,pre{font-family:ui-monospace,monospace;background:#f3f4f8;border-radius:4px;padding:1px 4px}pre{padding:8px;white-space:pre-wrap}
dl{display:grid;grid-template-columns:max-content auto;gap:4px 12px;margin:8px 0}dt{color:#5b6475}dd{margin:0}
.legend span{display:inline-block;padding:0 8px;margin-right:6px;border-radius:4px}
"""


def _e(value: object) -> str:
    """Escaped for HTML, control characters shown (``visible``): what the world wrote stays text."""
    return html.escape(visible(value), quote=True)


def matrix(report: Report) -> tuple[list[str], list[tuple[list[str], list[str]]]]:
    """(columns, rows): columns are the codes with findings (worst first); each row is (hosts,
    cell statuses), hosts with identical cells folded into one row, worst rows first."""
    worst: dict[str, Severity] = {}
    for f in report.findings:
        worst[f.code] = max(worst.get(f.code, f.severity), f.severity)
    columns = sorted(worst, key=lambda c: (-worst[c], c))
    cells: dict[str, dict[str, str]] = {h: {} for h in report.hosts}
    for f in report.findings:
        for h in f.hosts:
            row = cells.setdefault(h, {})
            status = STATUS_OF[f.severity]
            if RANK[status] > RANK.get(row.get(f.code, "pass"), 0):
                row[f.code] = status
    groups: dict[tuple[str, ...], list[str]] = {}
    for h, row in cells.items():
        groups.setdefault(tuple(row.get(c, "pass") for c in columns), []).append(h)
    for o in report.outcomes:
        groups.setdefault(("unreachable",) * max(1, len(columns)), []).append(o.target)
    rows = [(hosts, list(key) or ["pass"]) for key, hosts in groups.items()]
    rows.sort(key=lambda r: (-max(RANK[s] for s in r[1]), -sum(RANK[s] for s in r[1]), -len(r[0])))
    return columns, rows


def _matrix_html(report: Report, titles: dict[str, str]) -> str:
    columns, rows = matrix(report)
    head = "".join(
        f'<th class="code" title="{_e(titles.get(c, c))}"><a href="#{_e(c)}">{_e(c)}</a></th>' for c in columns
    )
    if not columns:
        head = "<th>all checks</th>"
    body = []
    for hosts, statuses in rows:
        tds = "".join(f'<td class="c {s}" title="{_e(CELL[s][1])}">{CELL[s][0]}</td>' for s in statuses)
        body.append(
            f'<tr><td class="hosts">{_e(fold_hosts(hosts))} <span class="n">({len(hosts)})</span></td>{tds}</tr>'
        )
    legend = "".join(f'<span class="{s}">{sym} {_e(label)}</span>' for s, (sym, label) in CELL.items())
    return f'<p class="legend">{legend}</p><table><tr><th>hosts</th>{head}</tr>{"".join(body)}</table>'


def _finding_html(f: Finding, anchor: bool) -> str:
    status = STATUS_OF[f.severity]
    rows = [("where", where(f)), ("expected", f.expected), ("actual", f.actual)]
    dl = "".join(f"<dt>{k}</dt><dd><code>{_e(v)}</code></dd>" for k, v in rows if v is not None)
    fix = f"<dt>fix</dt><dd>{_e(f.fix)}</dd>" if f.fix else ""
    verify = f"<dt>verify</dt><dd><pre>{_e(f.verify)}</pre></dd>" if f.verify else ""
    ident = f' id="{_e(f.code)}"' if anchor else ""
    return (
        f'<details{ident}><summary><span class="sev {status}">{_e(f.severity.label)}</span>'
        f"<b>{_e(f.code)}</b> {_e(f.title)} — <span class=hosts>{_e(where(f))}</span></summary>"
        f"<p>{_e(f.message)}</p><dl>{dl}{fix}{verify}</dl></details>"
    )


def _outcomes_html(outcomes: Iterable[Outcome]) -> str:
    groups: dict[tuple[str, str], list[str]] = {}
    for o in outcomes:
        groups.setdefault((o.status, o.detail), []).append(o.target)
    rows = "".join(
        f'<tr><td class="hosts">{_e(fold_hosts(hosts))} <span class="n">({len(hosts)})</span></td>'
        f'<td class="unreachable">{_e(status)}</td><td>{_e(detail)}</td></tr>'
        for (status, detail), hosts in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1])))
    )
    return f"<table><tr><th>hosts</th><th>status</th><th>detail</th></tr>{rows}</table>"


def _drain_reasons(report: Report, drain: list[str]) -> dict[str, list[str]]:
    """reason ("unreachable", "SW002, NET101") -> drained hosts with exactly that reason."""
    why: dict[str, list[str]] = {h: [] for h in drain}
    for o in report.outcomes:
        if o.target in why:
            why[o.target].append(o.status)
    everyone = set(report.hosts)
    for f in report.findings:
        if len(everyone) > 1 and set(f.hosts) >= everyone:
            continue
        for h in f.hosts:
            if h in why and f.code not in why[h]:
                why[h].append(f.code)
    groups: dict[str, list[str]] = {}
    for h, reasons in why.items():
        groups.setdefault(", ".join(reasons) or "see findings", []).append(h)
    return groups


def _drain_html(report: Report, drain: list[str]) -> str:
    if not drain:
        return '<div class="box clean"><b>Nothing to drain.</b> Every node that answered passed the checks.</div>'
    folded = fold_hosts(drain)
    cmd = f'scontrol update nodename={folded} state=drain reason="validator scan"'
    if report.scan is not None and report.scan["transport"] == "kubectl":  # pods: cordon the nodes they run on
        pods = " ".join(drain)
        cmd = f'for p in {pods}; do kubectl cordon "$(kubectl get pod "$p" -o jsonpath=\'{{.spec.nodeName}}\')"; done'
    reasons = "".join(
        f'<tr><td class="hosts">{_e(fold_hosts(hosts))}</td><td>{_e(why)}</td></tr>'
        for why, hosts in sorted(_drain_reasons(report, drain).items(), key=lambda kv: -len(kv[1]))
    )
    return (
        f'<div class="box drain"><b>Drain {len(drain)} node{"s" if len(drain) != 1 else ""}:</b> '
        f'<span class="hosts">{_e(folded)}</span><pre>{_e(cmd)}</pre>'
        f"<table><tr><th>hosts</th><th>why</th></tr>{reasons}</table>"
        f"<details><summary>one per line</summary><pre>{chr(10).join(map(_e, drain))}</pre></details></div>"
    )


def _exclude_html(ex: ExcludeDoc) -> str:
    """Every form of taking the named nodes out (validator/probes/exclude.py)."""
    s, k = ex["slurm"], ex["kubernetes"]
    forms = [("Slurm: resubmit without them", s["sbatch"]), ("Slurm: relaunch on the rest", s["srun"]),
             ("Slurm admins: drain", s["drain"]), ("deepspeed / mpirun hostfile", "\n".join(ex["hostfile"])),
             ("Kubernetes: cordon", "\n".join(k["cordon"])), ("Kubernetes: taint", "\n".join(k["taint"])),
             ("Kubernetes: node anti-affinity", k["affinity"])]  # fmt: skip
    rows = "".join(f"<tr><td>{_e(what)}</td><td><pre>{_e(text)}</pre></td></tr>" for what, text in forms if text)
    return f'<h2>Exclude {len(ex["hosts"])}</h2><div class="box drain"><span class="hosts">{_e(fold_hosts(ex["hosts"]))}</span><table>{rows}</table></div>'


def _probes_html(doc: ProbesDoc) -> str:
    """A row per node: its figures, the peers' medians on top, the named ones marked."""
    types = len({s["hardware"] for s in doc["stats"]}) > 1
    medians: dict[tuple[str, str], list[str]] = {}  # a column per figure, a median per hardware type
    for s in doc["stats"]:
        medians.setdefault((s["kind"], s["key"]), []).append(
            f"median {s['median']} {s['unit']}" + (f" ({s['hardware'] or 'unknown'})" if types else "")
        )
    head = "".join(f"<th>{_e(kind)} {_e(key)}<br>{'<br>'.join(_e(m) for m in meds)}</th>"
                   for (kind, key), meds in medians.items())  # fmt: skip
    rows = "".join(
        f"<tr><td class=hosts>{_e(r['host'])}</td>"
        + "".join(f"<td>{_e(r[kind].get(key, '-'))}</td>" for kind, key in medians)  # type: ignore[literal-required]
        + f"<td>{_e(', '.join(k + ' (' + ' and '.join(r['against'].get(k, [])) + ')' for k in r['named']) or 'ok')}</td></tr>"
        for r in doc["nodes"]
    )
    base = "".join(f"<li>{_e(b['hardware'])}: {_e(b['kind'])} {_e(b['key'])} median {_e(b['median'])} {_e(b['unit'])} "
                   f"(MAD {_e(b['mad'])}, n={_e(b['n'])}, {_e(b['date'])}), {_e(b['nodes'])} held to it</li>"
                   for b in doc["baseline"])  # fmt: skip
    base = f"<p>Baseline (the profile's, by hardware type):</p><ul>{base}</ul>" if base else ""
    return f"<h2>Probes</h2><table><tr><th>node</th>{head}<th>slow (named by)</th></tr>{rows}</table>{base}"


def render_html(report: Report, options: RenderOptions) -> str:
    """The report's ``drain`` (computed from ``options.fail_on`` when absent), ``scan`` and
    ``preflight`` sections show when present."""
    scan = report.scan
    drain = report.drain if report.drain is not None else drain_hosts(report, options.fail_on)
    findings = fold(report.findings)
    titles = {f.code: f.title for f in findings}
    reached, missing = len(report.hosts), len({o.target for o in report.outcomes})
    counts = f"<span><b>{reached}</b> reached</span><span><b>{missing}</b> without facts</span>"
    if scan is not None:
        counts += f"<span>{_e(scan['transport'])}, {_e(scan['elapsed_s'])} s</span>"
        if scan["interrupted"]:
            counts += "<span><b>interrupted</b> (Ctrl-C): partial results</span>"
    measured = scan if scan is not None else report.preflight  # the net check, the probes, what to take out
    if measured is not None:
        if measured["net_check"] is not None:
            counts += f"<span>{_e(measured['net_check']['line'])}</span>"
        if (probed := measured.get("probes")) is not None:
            counts += f"<span>{_e(probed['line'])}</span>"
    sections = [
        f"<h1>{_e(report.title)}</h1><div class=sub>{_e(summary(report))}</div><div class=counts>{counts}</div>",
        "<h2>Drain</h2>" + _drain_html(report, drain),
        *([_exclude_html(ex)] if measured is not None and (ex := measured.get("exclude")) and ex["hosts"] else []),
        *([_probes_html(p)] if measured is not None and (p := measured.get("probes")) else []),
        "<h2>Nodes × checks</h2>" + _matrix_html(report, titles),
    ]
    if findings:
        first = {f.code: i for i, f in reversed(list(enumerate(findings)))}
        sections.append(
            "<h2>Findings</h2>" + "".join(_finding_html(f, first[f.code] == i) for i, f in enumerate(findings))
        )
    if report.outcomes:
        sections.append("<h2>Hosts without facts</h2>" + _outcomes_html(report.outcomes))
    if report.input_errors:
        sections.append("<h2>Input errors</h2><pre>" + "\n".join(map(_e, report.input_errors)) + "</pre>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_e(report.title)}</title><style>{CSS}</style></head><body>" + "".join(sections) + "</body></html>\n"
    )
