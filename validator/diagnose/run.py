"""The one place where the diagnose stages meet: paths in, (Report, Diagnosis) out."""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from validator.diagnose import flightrec, tracefile
from validator.diagnose.anchors import ANCHORS
from validator.diagnose.causes import Evidence
from validator.diagnose.events import Diagnosis, Event, Ident, Role
from validator.diagnose.filescan import FileResult, scan_file
from validator.diagnose.inputs import (
    display_names,
    file_rank,
    local_rank_from_path,
    log_files,
    read_json,
    sniff,
    unreadable,
)
from validator.diagnose.ranks import RankMap
from validator.diagnose.report import to_report
from validator.diagnose.verdict import decide
from validator.errors import EXIT_INCOMPLETE, UserError
from validator.model import Outcome, Report

PARALLEL_BYTES = 64 << 20  # below this, worker processes cost more than they save
# The last resort, read only when the anchors found no failure: the anchors (validator.diagnose.anchors.ANCHORS:
# "rror", "fail", "bort", "imeout", "xception", ...) and the words of a failure they do not cover, each line on its
# own (no block keeps the lines after it from being read), so that a log whose lines say ERROR, Failed, FAILED,
# TIMEOUT, ABORT, EXCEPTION or "Timed out" never yields "no failure found", whatever block its line sits in. A second
# pass costs a log with a failure nothing, and one without a failure one more read.
LAST_RESORT: tuple[bytes, ...] = (
    b"ERROR", b"FAIL", b"Fail", b"IMEOUT", b"BORT", b"XCEPTION", b"imed out", b"of memory", b"Of Memory",
)  # fmt: skip


@dataclass(slots=True)
class Inputs:
    logs: list[str] = field(default_factory=list)
    dumps: list[flightrec.Dump] = field(default_factory=list)
    traces: list[tracefile.Trace] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # from torchelastic error files
    errors: list[str] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # path -> how evidence shows it
    empty: list[str] = field(default_factory=list)  # directories given that hold no file


def _error_file(path: str, name: str) -> Event | None:
    doc = read_json(path)
    msg = doc.get("message") if isinstance(doc, dict) else None
    if not isinstance(msg, dict):
        return None
    text = str(msg.get("message", "")).strip().splitlines()[-1:] or [""]
    extra = msg.get("extraInfo") or {}
    stamp = extra.get("timestamp") if isinstance(extra, dict) else None
    callstack = str(extra.get("py_callstack", "")) if isinstance(extra, dict) else ""
    frames = [ln.strip() for ln in callstack.splitlines() if ln.strip().startswith('File "')]
    from validator.diagnose.classify import classify

    got = classify(text[0]) or ("py.exception", Role.ORIGIN, {"msg": text[0]})
    ident = Ident(rank=file_rank(path), local_rank=local_rank_from_path(path))
    stack = [f.replace('File "', "").replace('", line ', ":").replace(", in ", " in ") for f in frames]
    t = float(stamp) if isinstance(stamp, (int, float, str)) and str(stamp).replace(".", "", 1).isdecimal() else None
    return Event(got[0], got[1], text[0][:400], name, ident, t, got[2], stack, path)


class NothingRead(UserError):
    """Every input was empty, unreadable or not a log: no answer, not "no failure found" (exit 3)."""

    exit_code = EXIT_INCOMPLETE


def gather(paths: list[str]) -> Inputs:
    got = Inputs()
    unread: list[tuple[str, str]] = []
    files = log_files(paths, unread)
    got.names = display_names(files, paths)
    got.outcomes += [Outcome(path, "unparsed", why) for path, why in unread]
    under = files + [u for u, _ in unread]
    got.empty = [
        p for p in paths if os.path.isdir(p) and not any(f == p or f.startswith(os.path.join(p, "")) for f in under)
    ]
    for path in files:
        name = got.names[path]
        if (why := unreadable(path)) is not None:
            got.outcomes.append(Outcome(name, "unparsed", why))
            continue
        try:
            kind = sniff(path)
        except UserError as err:  # unreadable: said, and the rest is still diagnosed
            got.outcomes.append(Outcome(name, "unparsed", err.message))
            continue
        try:
            if kind == "log":
                got.logs.append(path)
            elif kind in ("fr-pickle", "fr-json"):
                got.dumps.append(flightrec.load_dump(path, kind))
            elif kind == "trace":
                got.traces.append(tracefile.load_trace(path))
            elif kind == "errorfile":
                if (e := _error_file(path, name)) is not None:
                    got.events.append(e)
            else:
                got.outcomes.append(Outcome(name, "unparsed", "binary file, not a log, dump or trace"))
        except UserError as e:
            got.errors.append(str(e))
    return got


def scan_logs(
    paths: list[str], jobs: int | None, names: dict[str, str] | None = None, last_resort: bool = False
) -> list[FileResult]:
    """Every log's events, in worker processes when the logs are large; ``last_resort``: LAST_RESORT's words
    too, every line on its own (``scan_file``'s ``plain``)."""
    shown = [(names or {}).get(p, os.path.basename(p)) for p in paths]
    total = sum(os.path.getsize(p) for p in paths)
    workers = jobs if jobs is not None else min(os.cpu_count() or 1, 8)
    lines, plain = (ANCHORS + LAST_RESORT, True) if last_resort else (ANCHORS, False)
    if workers <= 1 or len(paths) < 2 or total < PARALLEL_BYTES:
        return [scan_file(p, n, lines, plain) for p, n in zip(paths, shown, strict=True)]
    import multiprocessing

    ctx = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        chunk = max(1, len(paths) // (workers * 4))
        return list(pool.map(scan_file, paths, shown, [lines] * len(paths), [plain] * len(paths), chunksize=chunk))


def _nothing_read(got: Inputs, results: list[FileResult]) -> str | None:
    """What was not read, as one line, when nothing at all was; None when something was."""
    if got.dumps or got.traces or got.events or got.errors:
        return None
    if any(r.bytes and (r.error is None or r.events) for r in results):
        return None
    why = [f"{p} (an empty directory)" for p in got.empty] + [f"{o.target} ({o.detail})" for o in got.outcomes]
    why += [f"{got.names.get(r.path, r.path)} ({r.error or 'an empty file'})" for r in results]
    shown = "; ".join(why[:4]) + (f"; and {len(why) - 4} more" if len(why) > 4 else "")
    return f"nothing read: {shown or 'no input'}"


def diagnose_paths(
    paths: list[str],
    jobs: int | None = None,
    title: str = "cluster-validator diagnose",
    require_input: bool = False,
    ours: frozenset[str] = frozenset(),
) -> tuple[Report, Diagnosis]:
    """``require_input``: raise NothingRead when no input could be read at all (diagnose's exit 3). ``ours``: kinds of
    event the caller caused (rehearse's own stop of a hung run), left out before any cause is weighed."""
    got = gather(paths)
    results = scan_logs(got.logs, jobs, got.names)
    if require_input and (nothing := _nothing_read(got, results)) is not None:
        raise NothingRead(nothing)
    rmap = RankMap(results)
    events: list[Event] = []
    file_ranks: dict[int, str] = {}
    for res in results:
        rmap.resolve(res)
        events += res.events
        if (r := file_rank(res.path)) is not None:
            file_ranks[r] = res.path
        for r in rmap.stream_ranks(res):  # a combined --tee log's streams count as the ranks' own logs
            file_ranks.setdefault(r, res.path)
        if res.error:
            got.outcomes.append(Outcome(got.names.get(res.path, res.path), "unparsed", res.error))
    for e in got.events:
        rmap.place(e, e.file, e.ident.rank)
    events += got.events
    if ours:
        events = [e for e in events if e.kind not in ours]
    for e in events:
        if e.rank is not None and e.ident.host is None:
            e.ident.host = rmap.hosts.get(e.rank)
    dumps = flightrec.analyze(got.dumps) if got.dumps else None
    traces = tracefile.analyze(got.traces) if got.traces else None
    endings = {t.rank: t.ending for t in got.traces if t.ending}
    hosts = dict(rmap.hosts)
    for t in got.traces:
        if t.host:
            hosts.setdefault(t.rank, t.host)
    files = {d.rank: got.names.get(d.path, d.path) for d in got.dumps} | {
        t.rank: got.names.get(t.path, t.path) for t in got.traces
    }
    coll = [f[1] for res in results for f in res.facts if f[0] == "coll_seq"]
    evidence = Evidence(
        events=events,
        dumps=dumps,
        traces=traces,
        trace_endings=endings,
        hosts=hosts,
        files=files,
        file_ranks=sorted(file_ranks),
        coll=coll,
    )
    diag = decide(evidence)
    if diag.primary is None and got.logs:  # the last resort: failure words in the cases the anchors miss
        extra = scan_logs(got.logs, jobs, got.names, last_resort=True)
        for res in extra:
            rmap.resolve(res)
        if found := [e for res in extra for e in res.events if e.role != Role.FACT]:
            diag = decide(dataclasses.replace(evidence, events=events + found))
    notes = (dumps.notes if dumps else []) + (traces.notes if traces else [])
    diag.notes += notes + [f"{p}: an empty directory, nothing read there" for p in got.empty]
    written = sorted({str(e.data["path"]) for e in events if e.kind == "rdzv.dump_written" and "path" in e.data})
    if written and not got.dumps:
        diag.notes.append(
            f"the logs say Flight Recorder dumps were written ({', '.join(written[:3])}); diagnose them with the logs"
        )
    suppressed = sum(sum(r.suppressed.values()) for r in results)
    diag.ranks_seen = sorted(set(diag.ranks_seen) | {d.rank for d in got.dumps} | {t.rank for t in got.traces})
    participants = len(diag.ranks_seen) or len(results)
    report = to_report(diag, participants, got.outcomes, got.errors, title, suppressed)
    return report, diag
