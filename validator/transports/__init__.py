"""Transports: how to reach a node and run the agent there. They move bytes; they know no checks.

Every transport returns, per target, either the agent's raw document (a dict) or an
``Outcome`` saying why there is none (unreachable, auth, hostkey, timeout, no-python, unparsed,
error). What the agent's output means is decided by ``validator.facts``, not here.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeAlias

from validator.model import Outcome

Raw = dict[str, Any]
Result: TypeAlias = "Raw | Outcome"
Gathered: TypeAlias = "dict[str, Result]"
OnDone: TypeAlias = "Callable[[str, Result], None]"  # called once per target as soon as its result is known

MAX_OUTPUT = 8 << 20  # bytes of agent output accepted from one node
WATCHDOG_SLACK_S = 5  # the node-side watchdog fires this long after the client's own timeout


def agent_source() -> str:
    from validator.agent import probe

    return Path(probe.__file__).read_text()


FRAME = "cv:"  # prefix of the framed agent output's lines (see ``bootstrap``)
FRAME_END = "cv!end"  # the last framed line: this task's output is complete
FRAME_WIDTH = 900  # srun --label splits lines at 1024 bytes


def bootstrap(timeout_s: float, source: str | None = None, framed: bool = False, drop: tuple[str, ...] = ()) -> str:
    """A ``python3 -c`` program that arms a watchdog (SIGALRM kills the process even when it is
    stuck in a C call) and runs the agent, embedded or read from stdin (``stdin_payload``: the
    environment to add, then the source). The agent starts with a ``from __future__`` import, so
    the watchdog cannot simply be prepended to its source.

    ``framed``: the agent's output comes back as lines of ``cv:`` + at most 900 characters
    (``unframe`` joins them) and a last ``cv!end`` line, for carriers that split long lines
    (srun --label) and to know each node's answer as soon as it is complete.

    ``drop``: environment variables the agent must not see (a trailing ``*`` is a prefix): the
    carrier's own, such as the scan step's SLURM_PROCID, which describe no job."""
    # From stdin: the first line is a JSON object of variables to set (values such as tokens
    # never appear on the remote command line, which `ps` shows to every user of the node).
    code = "s" if source is None else repr(source)
    alarm = max(1, int(timeout_s + WATCHDOG_SLACK_S))
    run = f"exec(compile({code},'cluster-validator-agent','exec'),{{'__name__':'__main__'}})"
    if source is None:
        run = f"e,_,s=sys.stdin.read().partition(chr(10))\nos.environ.update(json.loads(e))\n{run}"
    names = tuple(d for d in drop if not d.endswith("*"))
    prefixes = tuple(d[:-1] for d in drop if d.endswith("*"))
    scrub = (
        f"[os.environ.pop(k) for k in list(os.environ) if k in {names!r} or k.startswith({prefixes!r})]\n"
        if drop
        else ""
    )
    if not framed:
        return f"import json,os,signal,sys\nsignal.alarm({alarm})\n{scrub}{run}"
    return (
        f"import io,os,signal,sys\nsignal.alarm({alarm})\n{scrub}out,sys.stdout=sys.stdout,io.StringIO()\n"
        f"try:\n {run}\nexcept SystemExit:\n pass\nfinally:\n"
        f" t,sys.stdout=sys.stdout.getvalue().replace(chr(10),''),out\n"
        f" [print({FRAME!r}+t[i:i+{FRAME_WIDTH}]) for i in range(0,len(t),{FRAME_WIDTH})]\n"
        f" print({FRAME_END!r},flush=True)"
    )


def unframe(lines: list[str]) -> str:
    """The agent's output from framed lines, other lines (banners, errors) kept after it."""
    framed = "".join(ln[len(FRAME) :].rstrip("\n") for ln in lines if ln.startswith(FRAME))
    rest = "\n".join(ln for ln in lines if not ln.startswith((FRAME, FRAME_END)))
    return f"{rest}\n{framed}" if rest else framed


def remote_command(python: str, program: str, args: list[str]) -> str:
    """One POSIX shell command line: ``python3 -c PROGRAM ARGS``. Nothing secret goes here:
    every user of the node can read a command line."""
    return " ".join(shlex.quote(p) for p in [python, "-c", program, *args])


def stdin_payload(env: Mapping[str, str], source: str) -> str:
    """What a ``bootstrap(source=None)`` program reads: the variables to set, then the agent."""
    return json.dumps(dict(env)) + "\n" + source


def last_json_line(text: str) -> Any:
    """The last line that parses as a JSON object: login banners or rc-file chatter printed
    before it do not spoil the result."""
    from validator.safejson import JsonError, loads

    for line in reversed(text.splitlines()[-200:]):
        line = line.strip()
        if line.startswith("{"):
            try:
                return loads(line, max_bytes=MAX_OUTPUT)
            except JsonError:
                continue
    return None


def _tail(text: str, limit: int = 300) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-3:])[-limit:]


def classify(
    target: str,
    stdout: str,
    stderr: str,
    exit_status: int | None,
    exit_signal: str | None,
    python: str = "python3",
) -> Result:
    """The agent's document, or why there is none, from what the remote command left behind."""
    if exit_signal == "ALRM":
        return Outcome(target, "timeout", "the agent was stopped by its own watchdog (a collector hung)")
    doc = last_json_line(stdout)
    if isinstance(doc, dict) and doc.get("kind") == "raw":
        return doc
    err = _tail(stderr)
    low = err.lower()
    if exit_status == 127 or (python in err and ("not found" in low or "no such file" in low)):
        return Outcome(target, "no-python", f"{python} not found on the node ({err or f'exit {exit_status}'})")
    if "syntaxerror" in low:
        return Outcome(target, "no-python", f"{python} is too old for the agent (needs 3.7+): {err}")
    if exit_signal:
        return Outcome(target, "error", f"the agent was killed by SIG{exit_signal}: {err}".rstrip(": "))
    if exit_status not in (0, None):
        return Outcome(target, "error", f"the agent exited {exit_status}: {err or 'no error output'}")
    what = "no output" if not stdout.strip() else f"not the agent's JSON: {_tail(stdout, 120)!r}"
    return Outcome(target, "unparsed", f"{what}{f' (stderr: {err})' if err else ''}")
