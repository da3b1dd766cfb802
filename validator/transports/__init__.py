"""Transports: how to reach a node and run a program there. They move bytes; they know no checks.

Every transport (``Transport`` below: local, ssh, slurm, kubectl, openssh) runs a ``Program`` -- a
standard-library Python program such as the agent or the net check's prober -- on its targets
and returns, per target, the program's answer (a dict) or an ``Outcome`` saying why there is
none (unreachable, auth, hostkey, timeout, no-python, unparsed, error). What the agent's output
means is decided by ``validator.facts``, not here. Adding a transport: docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeAlias, TypeVar

from validator.model import Outcome

Raw = dict[str, Any]
Result: TypeAlias = "Raw | Outcome"
Gathered: TypeAlias = "dict[str, Result]"
OnDone: TypeAlias = "Callable[[str, Result], None]"  # called once per target as soon as its result is known

MAX_OUTPUT = 8 << 20  # bytes of agent output accepted from one node
MAX_STDERR = 64 << 10
WATCHDOG_SLACK_S = 5  # the node-side watchdog fires this long after the client's own timeout


def agent_source() -> str:
    from validator.agent import probe

    return Path(probe.__file__).read_text()


def is_agent_doc(doc: Raw) -> bool:
    return doc.get("kind") == "raw"


@dataclass(frozen=True)
class Program:
    """A standard-library Python program to run on every target, and what it gets there. Its
    arguments, input and environment travel on its stdin (``payload``), never on a command line,
    which every user of the node can read."""

    source: str
    args: Sequence[str] | Mapping[str, Sequence[str]] = ()  # the same for every target, or per target
    input: Mapping[str, str] | None = None  # per target; None: stdin stays open (start) or empty (run)
    env: Mapping[str, str] = field(default_factory=dict)  # set before the program runs
    timeout: float = 60.0  # the program's run (its node-side watchdog fires 5 s later)
    answer: Callable[[Raw], bool] = is_agent_doc  # which JSON object printed is its answer

    def entry(self, target: str) -> dict[str, Any]:
        args = self.args.get(target, ()) if isinstance(self.args, Mapping) else self.args
        text = None if self.input is None else self.input.get(target, "")
        return {"env": dict(self.env), "argv": list(args), "input": text}


class Transport(Protocol):
    """Reach targets, run jobs there, stream per-target results, stop. Used as ``async with``:
    leaving it ends everything it started (``stop``) and closes its connections."""

    name: str  # "ssh", "slurm", "kubectl", "local", "openssh": the report's scan.transport
    warnings: list[str]  # scanner-side notes for the report (a host key that could not be saved)

    async def __aenter__(self) -> Transport: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def run(self, job: Program, targets: list[str], on_done: OnDone | None = None) -> Gathered:
        """Run ``job`` to completion on every target; each result goes to ``on_done`` as soon as
        it is known (an interrupted run keeps them)."""
        ...

    async def start(self, job: Program, targets: list[str]) -> Gathered:
        """Start ``job`` on every target and return its first answer there; the programs keep
        running, with stdin open, until ``stop``."""
        ...

    async def stop(self) -> None:
        """End what ``start`` started: their stdin closes, they are killed if they linger."""
        ...


T = TypeVar("T")


async def every(steps: Iterable[Awaitable[T]]) -> list[T]:
    """Await every step, in order of the results. When one fails or the caller is cancelled
    (Ctrl-C), the others are cancelled and their cleanup runs to its end before this raises.
    ``asyncio.gather`` returns at the first cancelled step: ``asyncio.run`` then cancels the rest
    a second time, inside their cleanup, and processes not yet killed are left to the garbage
    collector ("Event loop is closed" tracebacks)."""
    tasks = [asyncio.ensure_future(s) for s in steps]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException as e:
        if not isinstance(e, asyncio.CancelledError):  # a cancelled gather has cancelled them once
            for task in tasks:
                task.cancel()
        pending = {t for t in tasks if not t.done()}
        for _ in range(100):  # bounded: each step's cleanup is (kills, 5 s waits)
            if not pending:
                break
            try:
                _, pending = await asyncio.wait(pending)
            except asyncio.CancelledError:  # cancelled again: the steps still end first
                continue
        for task in tasks:  # retrieved: no "exception was never retrieved"
            if task.done() and not task.cancelled():
                task.exception()
        raise


def release(proc: asyncio.subprocess.Process) -> None:
    """Close an ended process's pipes now. Left to the garbage collector after the event loop has
    closed (Ctrl-C ends ``asyncio.run`` at once), asyncio prints "Event loop is closed" tracebacks."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()  # kills the process if it still runs


FRAME = "cv:"  # prefix of the framed agent output's lines (see ``bootstrap``)
FRAME_END = "cv!end"  # the last framed line: this task's output is complete
FRAME_NODE = "cv@"  # first line under ``label``: the task's node name
FRAME_WIDTH = 900  # srun --label splits lines at 1024 bytes


def payload(job: Program, target: str = "", nodes: Sequence[str] | None = None, embedded: bool = False) -> str:
    """What ``bootstrap`` reads on stdin: one JSON line (the source's length, the target's
    arguments, input and environment), then the source unless it is ``embedded`` in the command
    line. ``nodes``: one entry per node, picked by SLURMD_NODENAME, for a step where every task
    reads the same stdin."""
    head: dict[str, Any] = {"n": 0 if embedded else len(job.source)}
    if nodes is None:
        head["all"] = job.entry(target)
    else:
        head["per"] = {node: job.entry(node) for node in nodes}
    return json.dumps(head) + "\n" + ("" if embedded else job.source)


def bootstrap(
    timeout_s: float, source: str | None = None, framed: bool = False, drop: tuple[str, ...] = (), label: bool = False
) -> str:
    """A ``python3 -c`` program that arms a watchdog (SIGALRM kills the process even when it is
    stuck in a C call), reads its ``payload`` from stdin and runs the program, read from stdin or
    embedded (``source``). The agent starts with a ``from __future__`` import, so the watchdog
    cannot simply be prepended to its source.

    ``framed``: the program's output comes back as lines of ``cv:`` + at most 900 characters
    (``unframe`` joins them) and a last ``cv!end`` line, for carriers that split long lines
    (srun --label) and to know each node's answer as soon as it is complete. ``label``: the first
    line names the node (``cv@`` + SLURMD_NODENAME).

    ``drop``: environment variables the program must not see (a trailing ``*`` is a prefix): the
    carrier's own, such as the scan step's SLURM_PROCID, which describe no job."""
    alarm = max(1, int(timeout_s + WATCHDOG_SLACK_S))
    names = tuple(d for d in drop if not d.endswith("*"))
    prefixes = tuple(d[:-1] for d in drop if d.endswith("*"))
    scrub = (
        f"[os.environ.pop(k) for k in list(os.environ) if k in {names!r} or k.startswith({prefixes!r})]\n"
        if drop
        else ""
    )
    node = "os.environ.get('SLURMD_NODENAME','')"
    read = (
        "h=json.loads(sys.stdin.readline() or '{}')\n"
        f"s=sys.stdin.read(h['n']) if h.get('n') else {source or ''!r}\n"
        f"e=h.get('per',{{}}).get({node}) or h.get('all') or {{}}\n"
        "os.environ.update(e.get('env') or {})\nsys.argv[1:]=e.get('argv') or []\n"
        "if e.get('input') is not None:\n sys.stdin=io.StringIO(e['input'])\n"
    )
    run = "exec(compile(s,'cluster-validator-agent','exec'),{'__name__':'__main__'})"
    head = f"import io,json,os,signal,sys\nsignal.alarm({alarm})\n{scrub}"
    head += f"print({FRAME_NODE!r}+{node},flush=True)\n" if label else ""
    if not framed:
        return f"{head}{read}{run}"
    return (
        f"{head}{read}out,sys.stdout=sys.stdout,io.StringIO()\n"
        f"try:\n {run}\nexcept SystemExit:\n pass\nfinally:\n"
        f" t,sys.stdout=sys.stdout.getvalue().replace(chr(10),''),out\n"
        f" [print({FRAME!r}+t[i:i+{FRAME_WIDTH}]) for i in range(0,len(t),{FRAME_WIDTH})]\n"
        f" print({FRAME_END!r},flush=True)"
    )


def unframe(lines: list[str]) -> str:
    """The agent's output from framed lines, other lines (banners, errors) kept after it."""
    framed = "".join(ln[len(FRAME) :].rstrip("\n") for ln in lines if ln.startswith(FRAME))
    rest = "\n".join(ln for ln in lines if not ln.startswith((FRAME, FRAME_END, FRAME_NODE)))
    return f"{rest}\n{framed}" if rest else framed


def remote_command(python: str, program: str) -> str:
    """One POSIX shell command line: ``python3 -c PROGRAM``. Nothing secret goes here: every
    user of the node can read a command line."""
    import shlex

    return " ".join(shlex.quote(p) for p in [python, "-c", program])


def last_json_line(text: str, answer: Callable[[Raw], bool] | None = None) -> Any:
    """The last line that parses as a JSON object (and is an ``answer``): login banners or
    rc-file chatter printed before it do not spoil the result."""
    from validator.safejson import JsonError, loads

    for line in reversed(text.splitlines()[-200:]):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = loads(line, max_bytes=MAX_OUTPUT)
            except JsonError:
                continue
            if answer is None or (isinstance(doc, dict) and answer(doc)):
                return doc
    return None


def _tail(text: str, limit: int = 300) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-3:])[-limit:]


def answer_of(
    target: str,
    stdout: str,
    stderr: str,
    exit_status: int | None,
    exit_signal: str | None,
    python: str = "python3",
    answer: Callable[[Raw], bool] = is_agent_doc,
) -> Result:
    """The program's answer, or why there is none, from what the remote command left behind."""
    if exit_signal == "ALRM":
        return Outcome(target, "timeout", "the agent was stopped by its own watchdog (a collector hung)")
    doc = last_json_line(stdout, answer)
    if isinstance(doc, dict):
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


async def _read_capped(stream: Any, limit: int) -> bytes:
    buf = bytearray()
    while len(buf) <= limit:  # bounded: at most limit + one chunk
        chunk = await stream.read(1 << 16)
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


async def read_output(stdout: Any, stderr: Any, timeout: float) -> tuple[bytes, bytes] | str | None:
    """(stdout, stderr) of a command, read to their end within ``timeout``: None when it did
    not finish in time, or why it was cut short (stdout over ``MAX_OUTPUT``, stderr over
    ``MAX_STDERR``), without waiting for an end of file that never comes. The caller kills the
    command in both cases."""
    streams = {"stdout": (stdout, MAX_OUTPUT), "stderr": (stderr, MAX_STDERR)}
    readers = {asyncio.ensure_future(_read_capped(stream, cap)): name for name, (stream, cap) in streams.items()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        pending = set(readers)
        while pending:  # asyncio.wait, not wait_for(gather): a cancelled gather logs "never retrieved"
            done, pending = await asyncio.wait(
                pending, timeout=max(deadline - loop.time(), 0), return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                return None
            over = [readers[r] for r in done if len(r.result()) > streams[readers[r]][1]]
            if over:
                return f"more than {streams[over[0]][1] >> 10:,} KiB on {over[0]}"
        out, err = (r.result() for r in readers)
        return out, err
    finally:
        for task in readers:
            task.cancel()


async def first_answer(stdout: Any, answer: Callable[[Raw], bool], timeout: float) -> tuple[Raw | None, str]:
    """Lines of a started program until its answer (bounded in lines and time): (answer or
    None, the text read)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    text = ""
    for _ in range(200):
        try:
            line = await asyncio.wait_for(stdout.readline(), max(deadline - loop.time(), 0.01))
        except (asyncio.TimeoutError, ValueError):
            break
        if isinstance(line, bytes):
            line = line.decode(errors="replace")
        if not line:
            break
        text += line[:2000]
        doc = last_json_line(line, answer)
        if isinstance(doc, dict):
            return doc, text
    return None, text
