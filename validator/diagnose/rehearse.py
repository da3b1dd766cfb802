"""Run a launch command with every rank's collectives recorded, bounded in time, then compare.

``torchrun [opts] train.py args`` becomes ``torchrun [opts] -m validator.trace train.py args``
(``python train.py`` likewise), so each rank writes its trace; the run is stopped at
``max_seconds`` or when no rank has recorded a call for ``stall_seconds`` (a hang), every process
it started is ended, and the traces and the captured output (``LOG``) are diagnosed together.

A job with a parallel layout (``--layout``, or its own configuration: docs/layout.md) first has its
process groups rehearsed in every rank, before the script (``layout_groups``, ``groups_verdict``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import validator
from validator.errors import UserError
from validator.facts.command import TORCHRUN, identify, parse_options
from validator.procs import Tree

if TYPE_CHECKING:
    from validator.model import Finding

LOG = "rehearsal.log"  # the command's output (stdout and stderr), in the trace directory
GROUPS = ".groups.json"  # the layout's groups, for the ranks (validator.trace); their answers: .groups-rank<R>.json
ANSWER_BYTES = 1 << 20  # a rank's answer file, read bounded
LOG_TAIL = 1 << 16  # bytes of the log's end read for torchrun's root cause
# torchrun's failure summary (torch/distributed/elastic/multiprocessing/errors/__init__.py,
# _MSG_FORMAT_TEMPLATE and _FAILURE_FORMAT_TEMPLATE): the first observed failure's rank and exit code
ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\):\s*\[0\]:.*?\n\s*rank\s*: (\d{1,9}) \(local_rank: \d{1,9}\)"
                        r"\s*\n\s*exitcode\s*: (-?\d{1,4})( \(pid: \d+\) ?(\S*))?", re.S)  # fmt: skip
GRACE_S = 5.0  # between SIGTERM and SIGKILL when the run is stopped


def wrap(argv: list[str]) -> list[str]:
    """Insert the recorder in front of the training script."""
    tool, rest = identify(argv)
    if tool == "torchrun":
        options, script, script_args, errors = parse_options(rest, TORCHRUN)
        if errors:
            raise UserError(f"cannot parse the torchrun command: {errors[0]}", "rehearse")
        if script is None:
            raise UserError("the torchrun command names no training script", "rehearse")
        if "no_python" in options:
            raise UserError("--no-python runs a binary; rehearse needs a Python script or module", "rehearse")
        idx = len(argv) - len(script_args) - 1
        if "module" in options:  # torchrun -m pkg.train: torchrun keeps -m, the recorder gets -m pkg.train
            return [*argv[:idx], "validator.trace", "-m", script, *script_args]
        return [*argv[:idx], "-m", "validator.trace", script, *script_args]
    if tool == "python" and rest:
        idx = len(argv) - len(rest)
        return [*argv[:idx], "-m", "validator.trace", *rest]
    raise UserError(
        "rehearse wraps a torchrun or python command (e.g. -- torchrun --nproc-per-node=4 train.py)", "rehearse"
    )


def layout_groups(argv: list[str], layout: str | None) -> dict[str, Any] | None:
    """The job's parallel layout as the ranks rehearse it, {"world": N, "groups": group_map}, from
    ``--layout`` or else the job's own configuration (read as the agent reads it); None when the job
    names none, or every degree is 1. One that cannot be read or does not tile the ranks of this
    launch is a UserError (one line, exit 2): its groups cannot be made."""
    from validator.agent.probe import filtered_env, job_configs, packages
    from validator.facts.command import parse_command
    from validator.facts.launch import parse_launch
    from validator.facts.layout import group_map, parse_explicit, parse_layout

    env = dict(os.environ)
    configs = job_configs(argv, env)
    installed = packages().get("accelerate")
    found = parse_explicit(layout, "--layout") if layout else parse_layout(argv, configs, env, installed)
    if found is None:
        return None
    if found["errors"]:
        raise UserError(f"the layout: {found['errors'][0]}", "rehearse")
    launch = parse_launch(filtered_env(env), parse_command(argv), configs)
    world = launch["world_size"] or (1 if identify(argv)[0] == "python" else None)
    degrees = " ".join(f"{k}={v}" for k, v in found["degrees"].items())
    what = f"the layout ({'--layout' if layout else found['framework'] + ' ' + found['source']}: {degrees})"
    if world is None:
        raise UserError(f"{what} needs a fixed world size: torchrun --nnodes N --nproc-per-node M", "rehearse")
    groups = group_map(found, world)
    if groups is None:
        raise UserError(f"{what} does not tile the {world} rank{'s' * (world != 1)} of this launch", "rehearse")
    return {"world": world, "groups": groups} if groups else None


def groups_verdict(trace_dir: str, result: RunResult) -> tuple[list[Finding], list[str]]:
    """The ranks' answers to the group rehearsal (every rank gets the same one; a rank's own failure
    is the first found): a group that failed or hung is PRE011, naming its kind, its ranks and the
    rank and host that failed; a slow rank or group PRE012; and the lines to print. No answer at
    all (the launcher failed, or the ranks died or were stopped before one) is a line, not a
    finding: the run's own diagnosis names what happened."""
    from validator.preflight import findings
    from validator.safejson import loads, read_text

    answers = []
    for path in sorted(Path(trace_dir).glob(".groups-rank*.json")):
        try:
            got = loads(read_text(str(path), ANSWER_BYTES, "answer"), path.name)
        except (UserError, ValueError):
            continue  # a rank killed while writing it: another rank's answer is the same
        if isinstance(got, dict) and isinstance(got.get("lines"), list):
            answers.append(got)
    if not answers:
        died = _died(trace_dir, result)
        if died is not None:
            return [findings.groups_failed.finding(died[0], ranks=died[1], hosts=died[2])], []
        state = result.stopped or f"exit code {result.returncode}"
        return [], [f"groups: no rank answered the process group rehearsal ({state})"]
    got = next((a for a in answers if a.get("error")), answers[0])
    ranks = [r for r in got.get("ranks") or [] if isinstance(r, int) and not isinstance(r, bool)]
    hosts = [str(h) for h in got.get("hosts") or []]
    found, lines = [], []
    if got.get("error"):
        found.append(findings.groups_failed.finding(str(got["error"]), ranks=ranks, hosts=hosts))
    for line in map(str, got["lines"]):
        if line.startswith("PRE012 "):
            found.append(findings.groups_slow.finding(line.removeprefix("PRE012 ")))
        else:
            lines.append(line)
    return found, lines


def _died(trace_dir: str, result: RunResult) -> tuple[str, list[int], list[str]] | None:
    """No rank answered and the script never started: the rank torchrun saw fail first (its root
    cause, read from the log's end) died during the rehearsal. (PRE011's message, its rank, its
    host) naming the group it was entering (``.groups-at-rank<R>.json``, groups.AT_ENV), or None
    when the log names no rank (the launcher itself failed: the run's own diagnosis says so)."""
    from validator.safejson import loads, read_text

    if result.returncode in (0, None) or any(Path(trace_dir).glob("trace_rank*.jsonl")):
        return None
    try:
        with open(result.log, "rb") as f:
            f.seek(max(0, os.path.getsize(result.log) - LOG_TAIL))
            tail = f.read(LOG_TAIL).decode("utf-8", "replace")
    except OSError:
        return None
    m = ROOT_CAUSE.search(tail)
    if m is None:
        return None
    rank, code, signame = int(m[1]), int(m[2]), (m[4] or "").strip()
    how = f"was killed ({signame or f'signal {-code}'})" if code < 0 else f"exited (exit code {code})"
    try:
        at = loads(read_text(os.path.join(trace_dir, f".groups-at-rank{rank}.json"), 4096, "rehearsal"), "at")
    except (UserError, ValueError, OSError):
        at = None
    kind, members = (at.get("kind"), at.get("members")) if isinstance(at, dict) else (None, None)
    if not isinstance(kind, str) or not isinstance(members, list) or not all(type(r) is int for r in members):
        return f"rank {rank} {how} during the process group rehearsal, before its first group's collective", [rank], []
    host = str(at.get("host", "?"))[:255] if isinstance(at, dict) else "?"
    shown = ",".join(map(str, members[:64])) + (",..." if len(members) > 64 else "")
    text = f"{kind[:16]} group [{shown}]: rank {rank} ({host}) {how} during its collective; no rank ran the script"
    return text, [rank], [host]


@dataclass(slots=True)
class RunResult:
    returncode: int | None  # None: stopped by us
    stopped: str | None  # why we stopped it
    seconds: float
    log: str
    trace_dir: str


def _tail(log: str, done: threading.Event) -> None:
    """--verbose: the command's output, as the log file grows, to stderr."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})  # the main thread's to take
    with open(log, "rb") as f:
        while True:
            ended = done.is_set()
            if chunk := f.read(1 << 16):
                sys.stderr.buffer.write(chunk)
                sys.stderr.flush()
            elif ended:
                return
            else:
                time.sleep(0.1)


def _trace_size(d: str) -> int:
    try:
        return sum(p.stat().st_size for p in Path(d).glob("trace_rank*.jsonl"))
    except OSError:
        return 0


def fresh_dir(path: str) -> str:
    """A --trace-dir the rehearsal can call its own: new, or an empty directory. One with files in it would have an
    earlier run's logs read as this one's (red-teamed: a healthy run blamed on a stale rank0.log); a file, or a link
    to one (/dev/null), is no directory at all."""
    p = Path(path)
    if p.is_symlink() or (p.exists() and not p.is_dir()):
        raise UserError(f"--trace-dir {path}: exists and is not a directory: give a new or empty directory", "rehearse")
    if p.is_dir() and any(p.iterdir()):
        raise UserError(
            f"--trace-dir {path}: not empty (an earlier run's traces and logs would be read as this one's): give a new "
            "or empty directory",
            "rehearse",
        )
    return path


def run(
    argv: list[str],
    trace_dir: str,
    max_seconds: float,
    stall_seconds: float,
    backend: str | None,
    echo: bool,
    groups: dict[str, Any] | None = None,
) -> RunResult:
    """Run the wrapped command (with ``groups``, ``layout_groups``: every rank rehearses them
    first); whatever way it ends (a hang, a timeout, Ctrl-C or SIGTERM of this process), every
    process it started is ended before this returns (``procs.Tree``)."""
    cmd = wrap(argv)
    os.makedirs(trace_dir, exist_ok=True)
    tree = Tree(adopt=True)  # this process starts nothing else until the tree ends
    env = tree.env(dict(os.environ, VALIDATOR_TRACE_DIR=os.path.abspath(trace_dir)))
    for stale in Path(trace_dir).glob(".groups-rank*.json"):  # a --trace-dir used before
        stale.unlink()
    for stale in Path(trace_dir).glob(".groups-at-rank*.json"):
        stale.unlink()
    if groups:
        from validator.preflight.groups import AT_ENV

        env["VALIDATOR_TRACE_GROUPS"] = path = os.path.join(os.path.abspath(trace_dir), GROUPS)
        env[AT_ENV] = os.path.abspath(trace_dir)
        Path(path).write_text(json.dumps(groups))
    root = str(Path(validator.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    if backend:
        env["VALIDATOR_TRACE_BACKEND"] = backend
    log = os.path.join(trace_dir, LOG)
    t0 = time.monotonic()
    stopped: str | None = None
    with open(log, "wb") as out, _terminated_raises():
        try:
            # its own session: Ctrl-C at a terminal reaches us alone, and we end the run
            proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            tree.end(0)
            raise UserError(f"cannot start {cmd[0]}: {e.strerror}", "rehearse") from None
        done = threading.Event()
        try:
            tree.add(proc.pid)
            if echo:
                threading.Thread(target=_tail, args=(log, done), daemon=True).start()
            size, changed = -1, time.monotonic()
            while proc.poll() is None:
                time.sleep(0.25)
                now = time.monotonic()
                if (s := _trace_size(trace_dir)) != size:
                    size, changed = s, now
                if now - t0 > max_seconds:
                    stopped = f"still running after --max-seconds {max_seconds:g}"
                elif stall_seconds and size > 0 and now - changed > stall_seconds:
                    stopped = f"no rank recorded a call for {stall_seconds:g} s (hung)"
                if stopped:
                    break
        finally:
            with _deferred(signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C lands after the cleanup
                tree.end(GRACE_S)  # also what outlived the command: ranks in their own sessions, orphans
                proc.wait()
            done.set()
    return RunResult(None if stopped else proc.returncode, stopped, time.monotonic() - t0, log, trace_dir)


@contextlib.contextmanager
def _terminated_raises() -> Iterator[None]:
    """SIGTERM of rehearse ends the run as Ctrl-C does (exit 143 instead of 130)."""

    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def _deferred(*signals: signal.Signals) -> Iterator[None]:
    """Hold these signals (this thread takes them; others block them) until the block ends."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, set(signals))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def temp_dir() -> str:
    return tempfile.mkdtemp(prefix="validator-rehearse-")


def cleanup(d: str) -> None:
    shutil.rmtree(d, ignore_errors=True)
