"""What the world wrote, through every report format (issue 21, item 7).

Host names, versions, interface names, launch values and finding texts come from nodes, logs and
the network. Whatever they hold (control characters, brackets, markup, bidi overrides), every
format renders, parses back and shows it: the table carries no raw control character, JUnit is
well-formed XML 1.0, the HTML page's text shows it escaped, the JSON report keeps it exact, the
Prometheus file parses with the host label escaped; and `validator check` neither crashes nor
prints a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.factories import LO, iface, master, rank_job, selection, tweak
from validator import pipeline
from validator.model import Facts, Finding, Outcome, Report, Severity
from validator.report import RenderOptions, render
from validator.report.prom import write_prom
from validator.report.text import COLOURS, RESET, render_facts, visible
from validator.targets import fold_hosts, unfold_hosts

ROOT = Path(__file__).resolve().parent.parent.parent
FORMATS = ("table", "json", "junit", "html", "markdown")
HOSTILE = "\x00\x07\x08\t\n\r\x1b\x7f\x85\x9b\u200e\u202a\u202e\u2066\u2069\u2028\ufeff\ufffe[]<&>\"',!*?^@ %|`\\_~$#"
FUZZ = settings(
    max_examples=60,
    deadline=timedelta(seconds=20),
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,  # the same examples on every run: no flaky CI
    database=None,
)
# any Unicode but surrogates (hypothesis's default), with the characters that matter drawn often
TEXT = st.text(st.one_of(st.characters(), st.sampled_from(HOSTILE)), min_size=1, max_size=24)
VOID = {"meta", "br", "hr", "img", "input", "link"}


def shown(text: str) -> bool:
    """Nothing a terminal or an XML parser would act on: printable characters and line ends."""
    return all(ch.isprintable() or ch == "\n" for ch in text)


# --------------------------------------------------------------------------- the two functions


def test_visible_escapes_control_and_bidi_characters_and_keeps_the_rest() -> None:
    assert visible("x\x1b[31mred\x07\x08\r\n\t\x7f\x85") == "x\\x1b[31mred\\x07\\x08\\r\\n\\t\\x7f\\x85"
    assert visible("admin\u202egnp.exe \u2066x\u2069") == "admin\\u202egnp.exe \\u2066x\\u2069"
    assert visible("\ufeff\ufffe\U000e0001") == "\\ufeff\\ufffe\\U000e0001"
    for text in ("gpu[1", "a]b", "<&>\"'", "nöde-é 日本 ✓", "C:\\path"):
        assert visible(text) == text  # printable text, backslashes included, as it is
    assert visible(None) == "None" and visible(visible("\x1b")) == "\\x1b"


def test_names_that_cannot_fold_follow_the_folded_ones_sorted() -> None:
    hosts = ["n02", "gpu[1", "n01", "a]b", "x\x1b[31mred", "a!b", "c&d", "e*", "f,g", "h?", "i^j"]
    folded = fold_hosts(hosts)
    assert folded == "n[01-02],a!b,a]b,c&d,e*,f,g,gpu[1,h?,i^j,x\x1b[31mred"  # none dropped, none misread
    assert fold_hosts(["a]b"]) == "a]b" and fold_hosts(["gpu01", "gpu02"]) == "gpu[01-02]"
    assert fold_hosts(["a\nb", "c"]) == "c,a\nb"  # a line break inside a name is no separator
    assert unfold_hosts(fold_hosts(["n01", "n02", "gpu[1", "a]b", "x\x1b[31mred"])) == [
        "n01", "n02", "a]b", "gpu[1", "x\x1b[31mred"]  # fmt: skip
    assert unfold_hosts("node[01-03],gpu7") == ["node01", "node02", "node03", "gpu7"]


# --------------------------------------------------------------------------- every format, parsed back


class Page(HTMLParser):
    """The page's text, and whether every element it opens is closed in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.open: list[str] = []
        self.broken: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.open.append(tag)
        self.text += [v for _, v in attrs if v]

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            self.broken.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse_html(page: str) -> str:
    p = Page()
    p.feed(page)
    p.close()
    assert not p.broken and not p.open, (p.broken, p.open)
    return "\n".join(p.text)


def parse_junit(xml: str) -> ET.Element:
    suite = ET.fromstring(xml.encode())  # expat: raises on anything that is not well-formed XML 1.0
    for el in suite.iter():
        assert shown(el.text or "") and all(shown(v) for v in el.attrib.values())
    return suite


def parse_markdown(text: str) -> str:
    """The text a reader of the Markdown sees (CommonMark with tables, raw HTML allowed so that
    any would show): no HTML, link, image, code span, emphasis or strikethrough came from the
    world, and every row of a table has its header's cells."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).parse(text)
    kinds = {t.type for t in tokens} | {c.type for t in tokens for c in t.children or []}
    assert not kinds & {"html_inline", "html_block", "link_open", "image", "code_inline", "em_open", "s_open"}, kinds
    widths: list[list[int]] = []  # per table, the cells of each row
    for t in tokens:
        if t.type == "table_open":
            widths.append([])
        elif t.type == "tr_open":
            widths[-1].append(0)
        elif t.type in ("th_open", "td_open"):
            widths[-1][-1] += 1
    assert all(len(set(w)) == 1 for w in widths), widths
    return "\n".join(c.content for t in tokens if t.type == "inline" for c in t.children or [] if c.type == "text")


def check_every_format(report: Report, strings: list[str], hosts: list[str]) -> None:
    """Render ``report`` in every format and parse each back; ``strings`` (texts the report
    shows) and the findings' hosts appear in each, escaped or, in the JSON report, exact."""
    options = RenderOptions(codes=pipeline.ran_codes(None), fail_on=Severity.INFO, verdict="done\x1b[2J")
    table = render(report, "table", options)
    assert shown(table)
    coloured = render(report, "table", RenderOptions(colour=True))
    for seq in [*COLOURS.values(), RESET]:
        coloured = coloured.replace(seq, "")
    assert shown(coloured)
    text = parse_html(render(report, "html", options))
    markdown = parse_markdown(render(report, "markdown", options))
    suite = parse_junit(render(report, "junit", options))
    xml_text = "\n".join(
        [*(el.text or "" for el in suite.iter()), *(v for el in suite.iter() for v in el.attrib.values())]
    )
    for s in strings:
        assert visible(s) in table and visible(s) in text and visible(s) in xml_text
        assert visible(s).strip(" ") in markdown  # Markdown trims a cell's and a heading's outer spaces
    for f in report.findings:  # the culprits, folded where they fold, each shown
        shown_hosts = visible(fold_hosts(f.hosts))
        assert shown_hosts in table and shown_hosts in text and shown_hosts in xml_text
        assert shown_hosts.strip(" ") in markdown
    doc = json.loads(render(report, "json"))
    assert doc["hosts"] == fold_hosts(report.hosts) == fold_hosts(hosts)
    for f, d in zip(report.findings, doc["findings"], strict=True):
        assert (d["message"], d["expected"], d["actual"], d["fix"]) == (f.message, f.expected, f.actual, f.fix)
        assert d["hosts"] == fold_hosts(f.hosts)


@FUZZ
@given(st.lists(TEXT, min_size=1, max_size=3, unique=True), TEXT, TEXT, TEXT)
def test_every_field_of_a_report_in_every_format(hosts: list[str], message: str, value: str, err: str) -> None:
    finding = Finding("SW001", Severity.ERROR, "torch version differs", message, [0, 3], hosts, value, message,
                      fix=value, verify=message)  # fmt: skip
    report = Report([finding], 2, hosts, [Outcome(err, "unreachable", message)], [err], title=f"scan of {value}")
    check_every_format(report, [message, value, err], hosts)
    back = Report.from_json(json.loads(render(report, "json")))
    assert [(f.message, f.expected, f.actual) for f in back.findings] == [(message, value, message)]
    if all(h == h.strip() and not {",", "[", "]"} & set(h) for h in hosts):  # no comma, no hostlist syntax
        assert sorted(back.hosts) == sorted(hosts) == sorted(back.findings[0].hosts)


@FUZZ
@given(st.lists(TEXT, min_size=3, max_size=3, unique=True), TEXT, TEXT, TEXT)
def test_facts_from_the_world_through_the_checks_in_every_format(
    hosts: list[str], version: str, name: str, addr: str
) -> None:
    """Host names, a torch version (SW001), an interface name (NET007) and MASTER_ADDR from the
    facts, through the real checks, into every format and the Prometheus file."""
    job = hostile_job(hosts, version, name, addr)
    report = pipeline.check(job)
    messages = [f.message for f in report.findings]
    assert not any(f.code == "VAL900" for f in report.findings), messages  # no check crashed
    assert any(version in m for m in messages) or version == "2.5.1+cu124"  # SW001
    assert any(f.code == "RDZ001" and f.actual == addr for f in report.findings) or addr == "node001"
    check_every_format(report, messages, hosts)
    for f in job:
        assert shown(render_facts(f))


def test_prometheus_labels_escape_host_names(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    hosts = ["gpu[1", 'x\x1b[31mred\n"q"\\', "a]b"]
    report = pipeline.check(hostile_job(hosts, "2.4\x07", "e\x1b[2Jth0", "m\u202easter"))
    path = tmp_path / "v.prom"
    write_prom(str(path), report, "check", 1, 0.5)
    text = path.read_text()
    assert all(ch.isprintable() or ch == "\n" for ch in text)
    labels = [s.labels for fam in text_string_to_metric_families(text) for s in fam.samples if "host" in s.labels]
    assert {lb["host"] for lb in labels} == {'x\\x1b[31mred\\n"q"\\', "a]b"}  # SW001 and NET007; RDZ001


def hostile_job(hosts: list[str], version: str, name: str, addr: str) -> list[Facts]:
    job = rank_job(3, 1)
    for f, host in zip(job, hosts, strict=True):
        f["host"] = f["hostname"] = host
    network = {"interfaces": [LO, iface(name, "10.0.0.2/24")], "nccl": selection([name], "10.0.0.2/24")}
    job = tweak(job, 1, network=network, software={"torch": version})
    over = {"launch": {"master_addr": addr}, "env": {"MASTER_ADDR": addr}}
    return tweak(job, 2, network={"master": master(addr, ["10.9.9.9"])}, **over)


# --------------------------------------------------------------------------- the real command


@pytest.mark.parametrize("fmt", FORMATS)
def test_check_with_hostile_host_names_in_every_format(tmp_path: Path, fmt: str) -> None:
    job = hostile_job(["gpu[1", "a]b", "x\x1b[31mred"], "2.4\x07\x08\r", "e\x1b[2Jth0", "m\u202easter")
    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(json.dumps(f) + "\n" for f in job))
    p = subprocess.run([sys.executable, "-m", "validator", "check", str(facts), "-f", fmt], capture_output=True,
                       text=True, timeout=120, check=False, cwd=ROOT)  # fmt: skip
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr and not p.stderr.strip(), p.stderr
    out = p.stdout
    if fmt == "json":
        doc = json.loads(out)
        assert "x\x1b[31mred" in doc["hosts"] and any("2.4\x07\x08\r" in f["message"] for f in doc["findings"])
        return
    if fmt == "markdown":
        out = parse_markdown(out)  # what a reader sees: Markdown's own escapes undone
    assert shown(out) and "x\\x1b[31mred" in out and "2.4\\x07\\x08\\r" in out
    if fmt == "junit":
        suite = parse_junit(out)
        names = [c.get("name", "").split()[0] for c in suite.iter("testcase")]
        assert "SW001" in names and not any(n[:3] in ("COL", "DGN", "PRE", "NOD") for n in names)
        assert len(names) == len(pipeline.ran_codes(None))  # every check that ran, and only those
    elif fmt == "html":
        assert "gpu[1" in parse_html(out) and "a]b" in parse_html(out)
    else:
        assert "gpu[1" in out and "e\\x1b[2Jth0" in out


def test_junit_lists_the_codes_that_ran() -> None:
    """check runs the fact checks kept by --select/--ignore; scan adds the net check's codes when
    it ran; codes only preflight, node-check or diagnose make are never test cases."""
    from validator.checks import CHECKS
    from validator.checks.netcheck import CODES as NET

    everything = pipeline.resolve_codes([], [])
    assert pipeline.ran_codes(everything) == list(CHECKS) and len(CHECKS) < len(everything)
    assert pipeline.ran_codes(everything, net_check=True) == [*CHECKS, *NET]
    assert pipeline.ran_codes(pipeline.resolve_codes(["RNK", "NET1"], ["RNK009"]), net_check=True) == [
        *(c for c in CHECKS if c.startswith("RNK") and c != "RNK009"),
        *NET,
    ]
    assert not any(c[:3] in ("COL", "DGN", "PRE", "NOD") for c in pipeline.ran_codes(None, net_check=True))
