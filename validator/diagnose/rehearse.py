"""Run a launch command with every rank's collectives recorded, bounded in time, then compare.

``torchrun [opts] train.py args`` becomes ``torchrun [opts] -m validator.trace train.py args``
(``python train.py`` likewise), so each rank writes its trace; the run is stopped at
``max_seconds`` or when no rank has recorded a call for ``stall_seconds`` (a hang), and the
traces and the captured output are diagnosed together.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import validator
from validator.errors import UserError
from validator.facts.command import TORCHRUN, identify, parse_options


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


@dataclass(slots=True)
class RunResult:
    returncode: int | None  # None: stopped by us
    stopped: str | None  # why we stopped it
    seconds: float
    log: str
    trace_dir: str


def _tee(src: IO[bytes], dst: IO[bytes], echo: bool) -> None:
    for chunk in iter(lambda: src.read1(1 << 16), b""):  # type: ignore[attr-defined]
        dst.write(chunk)
        dst.flush()
        if echo:
            sys.stderr.buffer.write(chunk)
            sys.stderr.flush()


def _trace_size(d: str) -> int:
    try:
        return sum(p.stat().st_size for p in Path(d).glob("trace_rank*.jsonl"))
    except OSError:
        return 0


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run(
    argv: list[str], trace_dir: str, max_seconds: float, stall_seconds: float, backend: str | None, echo: bool
) -> RunResult:
    cmd = wrap(argv)
    os.makedirs(trace_dir, exist_ok=True)
    env = dict(os.environ, VALIDATOR_TRACE_DIR=os.path.abspath(trace_dir))
    root = str(Path(validator.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    if backend:
        env["VALIDATOR_TRACE_BACKEND"] = backend
    log = os.path.join(trace_dir, "rehearsal.log")
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:
        raise UserError(f"cannot start {cmd[0]}: {e.strerror}", "rehearse") from None
    stopped: str | None = None
    with open(log, "wb") as out:
        assert proc.stdout is not None
        tee = threading.Thread(target=_tee, args=(proc.stdout, out, echo), daemon=True)
        tee.start()
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
                _stop(proc)
                break
        proc.wait()
        tee.join(5)
    return RunResult(None if stopped else proc.returncode, stopped, time.monotonic() - t0, log, trace_dir)


def temp_dir() -> str:
    return tempfile.mkdtemp(prefix="validator-rehearse-")


def cleanup(d: str) -> None:
    shutil.rmtree(d, ignore_errors=True)
