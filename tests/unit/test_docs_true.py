"""The docs say only what is true (issue 28): in README.md and docs/*.md every path named exists,
every finding code named is registered (the generated docs/checks pages too), every option named
for a `validator` command is in that command's --help, and every shell block is either run here,
on loopback (as written, or with the substitutions its marker states), or marked as needing a
real cluster. The marker convention is in docs/architecture.md, "Docs the suite checks"."""

from __future__ import annotations

import functools
import glob
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest

from validator.codes import CODE, PREFIXES
from validator.registry import registry

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PAGES = sorted((ROOT / "docs" / "checks").glob("*.md"))
SHELL = {"sh", "bash", "console", "shell"}
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
MARKER = re.compile(r"<!--\s*(needs|on loopback|run by):\s*(.*?)\s*-->")
SUBSTITUTION = re.compile(r'"([^"]*)"\s*->\s*"([^"]*)"')
# the code a doc uses to show how a new check is written; it must stay unregistered
NEW_CODE_EXAMPLES = {"docs/architecture.md": {"RDZ009"}}
COMMANDS = ("profiles validate", "baseline record", "node-check", "preflight", "rehearse", "diagnose", "explain", "schema", "probe",
            "check", "scan")  # fmt: skip
COMMAND_LINE = re.compile(rf"\b(?:validator|python3? -m validator)(?:\.(preflight)\b| ({'|'.join(COMMANDS)})\b)")
PATH_WORD = re.compile(
    r"(?<![\w./-])((?:validator|docs|launch_profiles|benchmarks|scripts|tests|gpu-capture)/[\w./*-]*)"
)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    lang: str
    text: str
    marker: tuple[str, str] | None  # (kind, argument) of the HTML comment right before it

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        before = MARKER.fullmatch(text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip())
        marker = (before.group(1), before.group(2)) if before else None
        out.append(Block(rel(path), text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2), marker))
    return out


def prose(path: Path) -> str:
    """The doc without its non-shell code blocks (sample output may name made-up files)."""
    return FENCE.sub(lambda m: m.group(0) if m.group(1) in SHELL else "", path.read_text())


def shell_blocks() -> list[Block]:
    return [b for doc in DOCS for b in blocks(doc) if b.lang in SHELL]


# --- paths ------------------------------------------------------------------------------------


PACKAGES = {p.name for p in (ROOT / "validator").iterdir() if p.is_dir() and p.name != "__pycache__"}
PLACEHOLDER = re.compile(r"[\w./-]*(?:<\w+>|\bNAME\b)[\w./-]*")  # validator/checks/<family>.py


def named_paths(text: str) -> set[str]:
    """Repository paths a text names: words under a top-level folder, `x/y.py` spans under a
    subpackage (docs/architecture.md writes `facts/launch.py` for validator/facts/launch.py),
    and `../` paths, which must not leave the repository."""
    text = PLACEHOLDER.sub("", text)
    words = set(PATH_WORD.findall(text)) | set(re.findall(r"(?<![\w./-])(\.\./[\w./-]+)", text))
    for word in re.findall(r"`([\w-]+/[\w./-]+\.(?:py|md|yaml|sh|json))(?::[\w.]+)?`", text):
        if word.split("/")[0] in PACKAGES or not word.endswith(".py"):  # a .py elsewhere is torch's, ...
            words.add(word)
    return {w.rstrip(".,:;") for w in words}


def exists(word: str, doc: Path) -> bool:
    if word.startswith("../"):
        where = (doc.parent / word).resolve()
        return where.is_relative_to(ROOT) and where.exists()
    for base in (ROOT, ROOT / "validator", doc.parent):
        if "*" in word:
            if glob.glob(str(base / word)):
                return True
        elif (base / word).exists():
            return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    missing = sorted(w for w in named_paths(prose(doc)) if not exists(w, doc))
    assert missing == [], f"{rel(doc)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_every_link_target_exists(doc: Path) -> None:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", prose(doc))
    missing = [t for t in targets if "://" not in t and not (doc.parent / t).exists()]
    assert missing == [], f"{rel(doc)} links to files that do not exist: {missing}"


# --- finding codes ----------------------------------------------------------------------------


def named_codes(text: str) -> set[str]:
    """Codes, and the far end of ranges such as NET101–105 or IB001-IB006."""
    codes = set(CODE.findall(text))
    for family, last in re.findall(rf"\b({'|'.join(PREFIXES)})\d{{3}}\s*[–-]\s*(?:\1)?(\d{{3}})\b", text):
        codes.add(family + last)
    return codes


@pytest.mark.parametrize("doc", DOCS + PAGES, ids=rel)
def test_every_code_a_doc_names_is_registered(doc: Path) -> None:
    examples = NEW_CODE_EXAMPLES.get(rel(doc), set())
    unknown = sorted(named_codes(doc.read_text()) - set(registry()) - examples)
    assert unknown == [], f"{rel(doc)} names codes that are not in validator.registry.registry(): {unknown}"
    assert not examples & set(registry()), f"{rel(doc)}: the example of a new code is a real code now: pick another"


def test_the_architecture_table_places_every_code_in_its_module() -> None:
    """docs/architecture.md's table of codes and modules: every registered code has exactly one
    row (an exact code or range before a bare prefix), and that row's module declares it."""
    rows = re.findall(
        r"^\| ([A-Z][^|]*?) \| `(validator/[\w/]+)\.py` \|", (ROOT / "docs/architecture.md").read_text(), re.M
    )
    assert rows, "docs/architecture.md has no table of codes and modules"
    tables = {}
    for _, path in rows:
        module = importlib.import_module(path.replace("/", ".").removesuffix(".__init__"))
        tables[path] = set(module.CODES)
    for c in registry():
        exact = [p for spec, p in rows for s in spec.split(", ") if c == s or c in expand(s)]
        prefix = [p for spec, p in rows for s in spec.split(", ") if s == c[: len(s)] and s.isalpha()]
        places = exact or prefix
        assert len(places) == 1, f"docs/architecture.md places {c} in {places or 'no row'}"
        assert c in tables[places[0]], f"docs/architecture.md places {c} in {places[0]}.py, which does not declare it"


def expand(spec: str) -> set[str]:
    m = re.fullmatch(r"([A-Z]+)(\d{3})[–-](\d{3})", spec)
    return {f"{m.group(1)}{n:03d}" for n in range(int(m.group(2)), int(m.group(3)) + 1)} if m else set()


# --- options ----------------------------------------------------------------------------------


@functools.cache
def help_text(command: str) -> str:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    p = subprocess.run([sys.executable, "-m", "validator", *command.split(), "--help"], capture_output=True, text=True,
                       timeout=60, check=False, cwd=ROOT, env=env)  # fmt: skip
    assert p.returncode == 0 and "Usage" in p.stdout, f"validator {command} --help: {p.stderr}"
    return p.stdout


def options_in(words: str) -> list[str]:
    out = []
    for word in words.split():
        if word in ("|", "&&", "||", ";") or word.startswith((">", "#", "'")) or word == "--":
            break  # a pipeline, a redirection, a comment, the wrapped command
        m = re.match(r"^\[?(--?[A-Za-z][\w-]*)", word)
        if m:
            out.append(m.group(1))
    return out


def command_options(text: str) -> list[tuple[str, str]]:
    """(command, option) for every `validator COMMAND ... --option` in a text: backtick spans and
    code blocks (a line ending in `\\` or followed by an indented one continues), up to a pipe,
    redirection, comment or `--`."""
    spans = re.findall(r"`([^`\n]+)`", FENCE.sub("", text))
    for m in FENCE.finditer(text):
        spans += re.sub(r"\\?\n(?=[ \t]+\S)", " ", m.group(2)).splitlines()  # continuation lines joined
    out = []
    for span in spans:
        for m in COMMAND_LINE.finditer(span):
            command = m.group(1) or m.group(2)
            out += [(command, o) for o in options_in(span[m.end() :])]
    return out


def table_options(text: str) -> list[tuple[str, str]]:
    """(command, option) for the first cell of every table row that starts with an option,
    under the nearest heading that names a command."""
    out: list[tuple[str, str]] = []
    commands: list[str] = []
    for line in FENCE.sub("", text).splitlines():
        if line.startswith("#"):
            named = [a or b for a, b in COMMAND_LINE.findall(line)]
            commands = named or commands
        elif line.startswith("| `-") and commands:
            cell = line.split(" | ")[0].replace("\\|", "/")
            for option in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", cell):
                out += [("|".join(commands), option)]
    return out


def known(command: str, option: str) -> bool:
    return any(re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", help_text(c)) for c in command.split("|"))


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_every_option_a_doc_names_is_in_the_commands_help(doc: Path) -> None:
    text = prose(doc)
    named = dict.fromkeys(command_options(doc.read_text()) + table_options(text))
    unknown = [f"validator {c} {o}" for c, o in named if not known(c, o)]
    assert unknown == [], f"{rel(doc)} names options that --help does not list: {unknown}"


# --- shell blocks -----------------------------------------------------------------------------


def test_every_marker_is_well_formed() -> None:
    """`needs: WHAT` (a real cluster; not run), `run by: tests/PATH` (that test runs it), `on
    loopback: "A" -> "B"; ...` (run here with those substitutions, each found in the block)."""
    for b in shell_blocks():
        if b.marker is None:
            continue
        kind, arg = b.marker
        assert arg, f"{b}: the marker says {kind} what?"
        if kind == "run by":
            assert (ROOT / arg).is_file(), f"{b}: run by {arg}, which does not exist"
        if kind == "on loopback":
            pairs = SUBSTITUTION.findall(arg)
            assert pairs, f'{b}: write the substitutions as "A" -> "B"; ...'
            assert all(a in b.text for a, _ in pairs), f"{b}: a substitution names text the block does not have"


RUN = [b for b in shell_blocks() if b.marker is None or b.marker[0] == "on loopback"]
# Each `validator` in a block goes through this function: an exit status above 1 (usage, input
# error, incomplete, a crash) is reported and fails the block; 0 and 1 (findings) are answers.
WRAPPER = """validator() {
  echo "$*" >> "$DOCS_RAN"
  local rc=0; command validator "$@" || rc=$?
  if [ "$rc" -gt 1 ]; then echo "docs test: exit $rc from: validator $*" >&2; return "$rc"; fi
}
export -f validator
set -eo pipefail
"""


TOOLS = ("bash", "sh", "cat", "echo", "env", "grep", "head", "hostname", "ip", "jq", "ls", "mkdir", "nvidia-smi", "paste",
         "rm", "sed", "sort", "tail", "tee", "test", "true", "false", "wc", "xargs")  # fmt: skip


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory that looks like the repository root to a block, and has `facts/local.json`
    (this machine's `validator probe --json`)."""
    base = tmp_path_factory.mktemp("docs")
    for name in ("launch_profiles", "docs", "tests", "benchmarks", "scripts", "validator"):
        (base / name).symlink_to(ROOT / name)
    (base / "bin").mkdir()
    for tool in TOOLS:
        if found := shutil.which(tool, path="/usr/local/bin:/usr/bin:/bin"):
            (base / "bin" / tool).symlink_to(found)
    for tool in ("validator", "python", "python3"):
        (base / "bin" / tool).symlink_to(Path(sys.executable).parent / tool)
    (base / "facts").mkdir()
    probe = subprocess.run([sys.executable, "-m", "validator", "probe", "--json"], capture_output=True, text=True,
                           timeout=60, check=True, cwd=ROOT, env=clean_env(base))  # fmt: skip
    (base / "facts" / "local.json").write_text(probe.stdout)
    return base


def clean_env(home: Path) -> dict[str, str]:
    """No launch contract of the machine running the suite, as a new user's shell; on PATH only
    the validator and plain tools, so an unmarked block that would reach a cluster (srun,
    scontrol, kubectl, ssh) fails here instead of acting."""
    return {"PATH": str(home / "bin"), "HOME": str(home), "LANG": "C.UTF-8",
            "PYTHONPATH": str(ROOT), "VALIDATOR_SELF_CHECK": os.environ.get("VALIDATOR_SELF_CHECK", "1")}  # fmt: skip


@pytest.mark.parametrize("block", RUN, ids=str)
def test_shell_block_runs_on_loopback(block: Block, scratch: Path, tmp_path: Path) -> None:
    text = block.text
    for a, b in SUBSTITUTION.findall(block.marker[1]) if block.marker else []:
        text = text.replace(a, b)
    ran = tmp_path / "ran"
    env = {**clean_env(scratch), "DOCS_RAN": str(ran)}
    p = subprocess.run(["bash", "-c", WRAPPER + text], capture_output=True, text=True, timeout=180, check=False,
                       cwd=scratch, env=env)  # fmt: skip
    assert p.returncode == 0, f"{block} failed (exit {p.returncode}):\n{text}\n{p.stderr[-3000:]}"
    assert "Traceback" not in p.stdout + p.stderr, f"{block}:\n{p.stderr[-3000:]}"
    commands = ran.read_text().splitlines() if ran.exists() else []
    wanted = [line for line in text.splitlines() if COMMAND_LINE.search(line)]
    assert len(commands) >= len(wanted) > 0, f"{block}: ran {commands}, the block has {wanted}"


def test_marked_blocks_name_no_unknown_command() -> None:
    """A block that is not run still names real commands (the option test reads it too)."""
    for b in shell_blocks():
        for line in b.text.splitlines():
            m = re.search(r"\bvalidator ([a-z][a-z-]*)", line)
            if m and not line.lstrip().startswith("#"):
                assert any(m.group(1) == c.split()[0] for c in COMMANDS), f"{b}: no command {m.group(1)!r}"


def test_every_shell_block_pastes_as_written() -> None:
    """Quotes balance, and no option value holds a bare `|` (`--format table|json` runs a
    pipeline when pasted): list the choices in prose instead."""
    for b in shell_blocks():
        shlex.split(b.text.replace("\\\n", " "), comments=True)
        unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "", b.text)
        assert not re.search(r"-[\w-]+[ =]\w+\|\w", unquoted), f"{b}: an option's choices would be a pipeline"


# --- claims docs/usage.md makes about errors ------------------------------------------------

USAGE_FORMATS = {"check": "table, json, junit, html, markdown", "scan": "table, json, junit, html, markdown", "diagnose": "table, json, junit",
                 "rehearse": "table, json, junit", "preflight": "table, json", "node-check": "table, json"}  # fmt: skip


@pytest.mark.parametrize("command", USAGE_FORMATS)
@pytest.mark.parametrize("option", ["--format", "--fail-on"])
def test_a_wrong_format_or_fail_on_is_one_line_naming_every_value(command: str, option: str) -> None:
    """docs/usage.md, "Formats": one line naming every valid value, exit 2."""
    usage = (ROOT / "docs" / "usage.md").read_text()
    assert "A wrong `--format` or `--fail-on` is one line naming every valid value, exit 2." in usage
    p = subprocess.run([sys.executable, "-m", "validator", command, option, "bogus"], capture_output=True, text=True,
                       timeout=60, check=False, cwd=ROOT, env=clean_env(ROOT))  # fmt: skip
    assert (p.returncode, p.stdout, p.stderr.count("\n")) == (2, "", 1), p.stderr
    values = USAGE_FORMATS[command] if option == "--format" else "error, warning, info, never"
    assert all(v in p.stderr for v in values.split(", ")), p.stderr


def test_a_json_line_over_4_mib_is_named_with_its_size(tmp_path: Path) -> None:
    """docs/usage.md, "Limits", quotes the message word for word."""
    (tmp_path / "big.jsonl").write_text('{"a": "' + "x" * (5 * 1024 * 1024) + '"}\n{}\n')  # JSON Lines
    p = subprocess.run([sys.executable, "-m", "validator", "check", "big.jsonl"], capture_output=True, text=True,
                       timeout=60, check=False, cwd=tmp_path, env=clean_env(ROOT))  # fmt: skip
    quoted = re.search(r"input error naming its size \(`([^`]+)`\)", (ROOT / "docs" / "usage.md").read_text())
    assert quoted and p.returncode == 2 and quoted.group(1) in p.stderr, p.stderr


# --- samples and field lists of what the code prints ------------------------------------------


def samples() -> list[Block]:
    """Blocks that show output (no language, or json): what a reader compares with their screen."""
    return [b for doc in DOCS for b in blocks(doc) if b.lang in ("", "json")]


def typed_dict_in(tp: object) -> type | None:
    """The TypedDict a field holds (itself, in `X | None` or in `list[X]`); None for a mapping
    of any keys (`dict[str, X]`) or a plain value."""
    if typing.is_typeddict(tp):
        return tp  # type: ignore[return-value]
    if typing.get_origin(tp) is dict:
        return None
    return next((t for a in typing.get_args(tp) if (t := typed_dict_in(a)) is not None), None)


def field_errors(sample: dict[str, object], doc: type, where: str) -> list[str]:
    """Every required field of ``doc`` in ``sample`` and no other, recursively."""
    hints = typing.get_type_hints(doc)
    out = [f"{where}: no {k!r}" for k in doc.__required_keys__ if k not in sample]  # type: ignore[attr-defined]
    out += [f"{where}: {k!r} is not a field" for k in sample if k not in hints]
    for k, v in sample.items():
        inner = typed_dict_in(hints[k]) if k in hints else None
        items = [v] if isinstance(v, dict) else v if isinstance(v, list) else []
        out += [e for i in items if inner and isinstance(i, dict) for e in field_errors(i, inner, f"{where}.{k}")]
    return out


def test_every_json_report_sample_has_the_fields_the_code_writes() -> None:
    """A JSON sample of a report (scan.md's) has exactly the fields of validator/documents.py,
    nested ones too: a field added to the report shows in the sample, or this fails."""
    from validator.documents import AnyReportDoc

    shown = [(b, json.loads(b.text)) for b in samples() if b.lang == "json"]
    reports = [(b, d) for b, d in shown if isinstance(d, dict) and "findings" in d]
    assert reports, "no JSON report sample in the docs"
    for b, d in reports:
        errors = field_errors(d, AnyReportDoc, "report")
        assert errors == [], f"{b}: the sample's fields are not the report's: {errors}"


FIELD_LISTS = [  # (doc, the words that open the list, the document it lists)
    ("docs/usage.md", "- **json**: the report as one document:", "ReportDoc"),
    ("docs/diagnose.md", "adds a `diagnosis` object", "DiagnosisDoc"),
]


@pytest.mark.parametrize(("doc", "opening", "name"), FIELD_LISTS)
def test_a_list_of_json_fields_names_every_field(doc: str, opening: str, name: str) -> None:
    import validator.documents as documents

    text = (ROOT / doc).read_text()
    assert opening in text, f"{doc} no longer says {opening!r}"
    paragraph = re.split(r"\n\s*\n|\n- ", text.split(opening, 1)[1], maxsplit=1)[0]
    named = set(re.findall(r"`(\w+)`", paragraph))
    missing = sorted(set(typing.get_type_hints(getattr(documents, name))) - named)
    assert missing == [], f"{doc}: the list after {opening!r} leaves out {missing}"


def test_the_scan_transports_a_doc_lists_are_the_registered_ones() -> None:
    from validator.transports.table import TRANSPORTS

    row = re.search(r"^\| `scan\.transport` \| (.*) \|$", (ROOT / "docs/scan.md").read_text(), re.M)
    assert row, "docs/scan.md has no scan.transport row"
    assert set(re.findall(r"`(\w+)`", row.group(1))) == set(TRANSPORTS)


HEADLINE = re.compile(r"^(?:cluster-validator [\w-]+(?: \([^)]*\))?|scan of \S+): (.*)$", re.M)
COUNT = r"\d+ (?:errors?|warnings?|infos?|without facts|input errors?)"
SUMMARY = re.compile(rf"(?:no findings|{COUNT}(?:, {COUNT})*) — \d+ participants?(?: on \d+ hosts?)?")


def test_every_headline_sample_is_what_the_table_writes() -> None:
    """`TITLE: 3 errors, 1 input error — 4 participants on 1 host` (report/text.py, summary): the
    shape, and the kinds of line the sample shows below it counted in it."""
    found = 0
    for b in samples():
        for m in HEADLINE.finditer(b.text):
            found += 1
            head = m.group(1)
            assert SUMMARY.fullmatch(head), f"{b}: {head!r} is not the table's headline"
            body = b.text[m.end() :]
            for label, word in (("INPUT", "input error"), ("ERROR", "error"), ("WARNING", "warning")):
                if re.search(rf"^{label}\s", body, re.M):
                    assert re.search(rf"\b{word}s?\b", head), f"{b}: {label} lines below {head!r}, not counted in it"
    assert found, "no headline sample in the docs"


def test_every_exclude_sample_is_what_the_code_prints() -> None:
    """`exclude: gpu003 (1 of 4)` and the lines under it (probes/exclude.py), for the hosts the
    sample takes out and keeps: its quoting, its order and what it shortens."""
    from validator.probes.exclude import exclusion, lines
    from validator.targets import expand

    found = 0
    for b in samples():
        for m in re.finditer(r"^exclude: .*(?:\n  .*)*", b.text, re.M):
            found += 1
            shown = m.group(0).splitlines()
            out = expand(shown[0].split()[1])
            keep = re.search(r"--nodelist=(\S+)", m.group(0))
            rest = expand(shlex.split(keep.group(1))[0]) if keep else []
            slots = re.search(r"slots=(\d+)", m.group(0))
            base = sorted(out + rest)
            want = lines(exclusion(base, out, dict.fromkeys(base, int(slots.group(1)) if slots else 1)))
            assert shown == want, f"{b}: the code prints\n" + "\n".join(want)
    assert found, "no exclude sample in the docs"


NET_LINE = re.compile(r"net check: (?:no links to test|\d+ of \d+ links failed|\d+ links, \d+ named \([A-Z0-9, ]+\)"
                      r"|\d+ links ok \(\d+ measured: too few to compare\)"
                      r"|\d+ links, all within 3x of the median link(?: \(\d+ more reached\))?)(?:;|$)")  # fmt: skip


def test_every_net_check_line_a_doc_quotes_is_one_the_code_writes() -> None:
    """The net check's line as netcheck/verdict.py (``line``) writes it, wherever a doc quotes one
    with figures (`net check: 6 links, all within 3x of the median link; ...`)."""
    quoted = [" ".join(s.split()) for doc in DOCS for s in re.findall(r"`([^`]*)`|\"line\": \"([^\"]*)\"", doc.read_text())
              for s in s if "net check: " in s]  # fmt: skip
    lines = [q[q.index("net check: ") :] for q in quoted if re.search(r"net check: \d", q)]
    assert lines, "no net check line quoted in the docs"
    wrong = [x for x in lines if not NET_LINE.match(x)]
    assert wrong == [], f"net check lines the code does not write: {wrong}"
