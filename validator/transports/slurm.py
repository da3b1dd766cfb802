"""SLURM transport: inside an allocation, one ``srun --ntasks-per-node=1`` step runs a job on
every node at once (no SSH). Every task reads the same payload on stdin and picks its node's
entry; it prints its node's name first (``cv@``, SLURMD_NODENAME), then its JSON in framed lines
(srun --label splits long lines): the label tells whose lines they are. The net check runs two
overlapping steps: listeners (``start``), then probers.

Also the SLURM target sources: the allocation's nodelist and a partition's nodes (``sinfo``).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
from collections.abc import Callable, Mapping
from typing import Protocol

from validator.errors import UserError
from validator.model import Outcome
from validator.targets import expand, fold_hosts
from validator.transports import (
    FRAME_END,
    FRAME_NODE,
    MAX_OUTPUT,
    Gathered,
    OnDone,
    Program,
    Result,
    Transport,
    answer_of,
    bootstrap,
    last_json_line,
    payload,
    release,
    unframe,
)

START_SLACK_S = 15.0  # srun's own start-up (allocating the step, launching tasks) on top of the agent
# The scan step's own task identity: it describes no job, so the agent must not see it.
STEP_VARS = (
    "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_GTIDS",
    "SLURM_TASK_PID", "SLURM_TASKS_PER_NODE", "SLURM_STEP_*", "SLURM_SRUN_COMM_*", "SLURM_LAUNCH_NODE_IPADDR",
    "SLURM_CPU_BIND*", "SLURM_DISTRIBUTION", "SLURM_PRIO_PROCESS", "SLURM_UMASK", "SLURM_JOB_NAME",
)  # fmt: skip
LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
TASK_EXIT = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): (?:Exited with exit code (\d+)|Killed|(.+))")


def allocation_nodes(environ: Mapping[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    if not env.get("SLURM_JOB_ID"):
        raise UserError(
            "--slurm needs a SLURM allocation (run it inside salloc or sbatch); "
            "outside one, scan the nodes over SSH: `validator scan --partition P` or a hostlist"
        )
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise UserError("SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not; is this a SLURM allocation?")
    return expand(nodelist)


class Flags(Protocol):
    """What `validator scan --slurm` reads of the scan's options."""

    slurm_nodes: str | None  # --slurm-nodes
    python: str


def from_options(opts: Flags) -> tuple[Transport, list[str]]:  # mypy holds the class to Transport
    """The allocation's nodes (or the --slurm-nodes among them), one srun step a job."""
    nodes = allocation_nodes()
    if opts.slurm_nodes:
        wanted = expand(opts.slurm_nodes)
        outside = [n for n in wanted if n not in nodes]
        if outside:
            raise UserError(f"not in this allocation: {', '.join(outside[:5])}", "--slurm-nodes")
        nodes = wanted
    return Slurm(opts.python), nodes


def partition_nodes(partition: str, timeout: float = 30.0) -> list[str]:
    """Every node of a partition, as ``sinfo`` lists it (drained and down nodes included: the
    scan reports them as unreachable or failing)."""
    try:
        p = subprocess.run(
            ["sinfo", "--noheader", "--partition", partition, "--format", "%N"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise UserError("sinfo not found: --partition needs the SLURM client tools") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"sinfo did not answer within {timeout:g} s (slurmctld down?)") from None
    if p.returncode != 0:
        raise UserError(f"sinfo failed: {p.stderr.strip()[:300]}", f"partition {partition}")
    nodes = [h for line in p.stdout.split() for h in expand(line)]
    if not nodes:
        raise UserError("no nodes (unknown or empty partition)", f"partition {partition}")
    return list(dict.fromkeys(nodes))


def _task_exits(stderr: str, tasks: int) -> dict[int, tuple[str, int | None, str | None]]:
    """task -> (node, exit code, other reason) from srun's own error lines, for tasks 0 to
    ``tasks`` - 1 (a range in a line never makes more)."""
    out: dict[int, tuple[str, int | None, str | None]] = {}
    for m in TASK_EXIT.finditer(stderr):
        node, named, code, other = m.group(1), m.group(2), m.group(3), m.group(4)
        for part in named.split(","):
            lo, _, hi = part.partition("-")
            ok = lo.isdecimal() and (hi or lo).isdecimal() and len(lo) <= 9 and len(hi) <= 9
            for t in range(int(lo), min(int(hi or lo), tasks - 1) + 1) if ok else []:
                out[t] = (node, int(code) if code else None, other or ("killed" if code is None else None))
    return out


async def _read_lines(
    stream: asyncio.StreamReader,
    sink: list[str],
    each: Callable[[str], None] | None = None,
    budget: int | None = None,
) -> bool:
    """Lines until EOF (each bounded by the reader's limit); True when it stopped early because
    more than ``budget`` bytes came."""
    used = 0
    while True:
        try:
            line = await stream.readline()
        except ValueError:  # one line over the limit: skip it, the task becomes "unparsed"
            continue
        if not line:
            return False
        used += len(line)
        if budget is not None and used > budget:
            return True
        sink.append(line.decode(errors="replace"))
        if each is not None:
            each(sink[-1])


def _srun(nodes: list[str], python: str, program: str) -> list[str]:
    return [
        "srun",
        f"--nodes={len(nodes)}",
        f"--nodelist={fold_hosts(nodes)}",
        "--ntasks-per-node=1",
        "--overlap",  # the net check runs two steps at once on the same nodes
        "--label",
        "--input=all",  # every task reads the same payload and picks its node's entry
        "--kill-on-bad-exit=0",
        "--job-name=cluster-validator-scan",
        python,
        "-c",
        program,
    ]


async def _spawn(cmd: list[str], env: Mapping[str, str], stdin: bool = False) -> asyncio.subprocess.Process:
    try:
        return await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **env},
            limit=MAX_OUTPUT,
            start_new_session=True,  # Ctrl-C reaches us, not srun: we stop the step ourselves
        )
    except FileNotFoundError:
        raise UserError("srun not found: --slurm needs the SLURM client tools") from None


def _by_node(lines: list[str], job: Program) -> dict[str, Result]:
    """node -> its task's answer, from a step's labelled lines (each task names its node first)."""
    tasks: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    for line in lines:
        if m := LABEL.match(line):
            if m.group(2).startswith(FRAME_NODE):
                names[int(m.group(1))] = m.group(2)[len(FRAME_NODE) :].strip()
            else:
                tasks.setdefault(int(m.group(1)), []).append(m.group(2))
    out: dict[str, Result] = {}
    for task, chunks in tasks.items():
        doc = last_json_line(unframe(chunks), job.answer)
        if isinstance(doc, dict) and names.get(task):
            out[names[task]] = doc
    return out


class Slurm:
    """The SLURM transport: each job is one step of the current allocation, one task per node;
    every task reads the same stdin and picks its node's entry (``payload(nodes=...)``)."""

    name = "slurm"

    def __init__(self, python: str = "python3") -> None:
        self.python = python
        self.warnings: list[str] = []
        self.steps: list[asyncio.subprocess.Process] = []

    async def __aenter__(self) -> Slurm:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _step(self, job: Program, nodes: list[str], framed: bool) -> asyncio.subprocess.Process:
        program = bootstrap(job.timeout, job.source, framed=framed, drop=STEP_VARS, label=True)
        proc = await _spawn(_srun(nodes, self.python, program), {}, stdin=True)
        assert proc.stdin is not None
        proc.stdin.write(payload(job, nodes=nodes, embedded=True).encode())
        await proc.stdin.drain()
        return proc

    async def run(self, job: Program, targets: list[str], on_done: OnDone | None = None) -> Gathered:
        """Run ``job`` once per node in one step. Each node's answer is reported (``on_done``)
        as soon as its task finishes, so an interrupted scan keeps them."""
        nodes = targets
        report: OnDone = on_done or (lambda _t, _r: None)
        proc = await self._step(job, nodes, framed=True)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.close()
        out: list[str] = []
        err: list[str] = []
        early: Gathered = {}  # node -> answer, reported as soon as its task printed its end frame
        per_task: dict[int, list[str]] = {}
        names: dict[int, str] = {}

        def on_line(line: str) -> None:
            m = LABEL.match(line)
            if not m:
                return
            task, text = int(m.group(1)), m.group(2)
            if text.startswith(FRAME_NODE):
                names[task] = text[len(FRAME_NODE) :].strip()
            elif text.startswith(FRAME_END):
                doc = answer_of("", unframe(per_task.pop(task, [])), "", 0, None, self.python, job.answer)
                node = names.get(task, "")
                if isinstance(doc, dict) and node in nodes and node not in early:
                    early[node] = doc
                    report(node, doc)
            else:
                per_task.setdefault(task, []).append(text)

        # Output beyond what the agents can print (8 MiB, and 1 MiB a node) stops the step at once:
        # a node flooding its output must not hold memory, nor the scan until the timeout.
        budgets = {"stdout": MAX_OUTPUT + (1 << 20) * len(nodes), "stderr": (1 << 20) + (64 << 10) * len(nodes)}
        readers = {
            asyncio.ensure_future(_read_lines(proc.stdout, out, on_line, budgets["stdout"])): "stdout",
            asyncio.ensure_future(_read_lines(proc.stderr, err, None, budgets["stderr"])): "stderr",
        }
        loop = asyncio.get_running_loop()
        deadline = loop.time() + job.timeout + START_SLACK_S
        pending, overflow = set(readers), ""
        try:
            while pending and not overflow:
                left = max(deadline - loop.time(), 0)
                done, pending = await asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    break
                overflow = next(
                    (f"more than {budgets[readers[r]] >> 10:,} KiB on {readers[r]}" for r in done if r.result()), ""
                )
            if not pending:
                await asyncio.wait([asyncio.ensure_future(proc.wait())], timeout=10)
        finally:
            if proc.returncode is None:
                await _stop(proc)
            for r in readers:
                r.cancel()
            release(proc)
        timed_out = bool(pending) and not overflow
        return _collect(nodes, out, err, timed_out, job, self.python, report, early, names, overflow)

    async def start(self, job: Program, targets: list[str]) -> Gathered:
        """One step, one task per node; they run until ``stop`` (stdin closes) or the job's
        timeout. Waits for every node's first answer, at most the step's start slack."""
        nodes = targets
        proc = await self._step(job, nodes, framed=False)
        self.steps.append(proc)
        assert proc.stdout is not None
        lines: list[str] = []
        wait = START_SLACK_S + 10
        deadline = asyncio.get_running_loop().time() + wait
        while len(_by_node(lines, job)) < len(nodes) and len(lines) < 100 * len(nodes) + 100:  # bounded
            left = deadline - asyncio.get_running_loop().time()
            try:
                line = await asyncio.wait_for(proc.stdout.readline(), max(left, 0.01))
            except (asyncio.TimeoutError, ValueError):
                break
            if not line:
                break
            lines.append(line.decode(errors="replace"))
        got = _by_node(lines, job)
        return {n: got.get(n) or Outcome(n, "timeout", f"no answer within {wait:g} s") for n in nodes}

    async def stop(self) -> None:
        steps, self.steps = self.steps, []
        for proc in steps:
            await stop(proc)


async def stop(proc: asyncio.subprocess.Process | None) -> None:
    """End the listeners' step: stdin closes (they exit), else SIGTERM/SIGKILL to srun."""
    if proc is None:
        return
    if proc.returncode is None and proc.stdin is not None:
        proc.stdin.close()
    try:
        await asyncio.wait_for(proc.wait(), 10)
    except asyncio.TimeoutError:
        await _stop(proc)
    release(proc)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """srun ends the step's tasks on SIGTERM; SIGKILL if it lingers."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            proc.send_signal(sig)
            await asyncio.wait_for(proc.wait(), grace)
            return
        except ProcessLookupError:
            return
        except asyncio.TimeoutError:
            continue


def _collect(
    nodes: list[str],
    out_lines: list[str],
    err_lines: list[str],
    timed_out: bool,
    job: Program,
    python: str,
    on_done: OnDone,
    early: Gathered,
    names: dict[int, str],
    overflow: str = "",
) -> Gathered:
    """Each task's result under its node's name; ``early``: answers already reported;
    ``names``: task -> the node it named; ``overflow``: why the step was stopped for too much output."""
    task_out: dict[int, list[str]] = {}
    task_err: dict[int, list[str]] = {}
    srun_err: list[str] = []
    for lines, sink in ((out_lines, task_out), (err_lines, task_err)):
        for line in lines:
            m = LABEL.match(line)
            if m and not m.group(2).startswith(FRAME_NODE):
                sink.setdefault(int(m.group(1)), []).append(m.group(2))
            elif sink is task_err:
                srun_err.append(line.strip())
    exits = _task_exits("\n".join(srun_err), len(nodes))
    results = {
        task: answer_of(
            exits.get(task, ("", 0, None))[0],
            unframe(task_out.get(task, [])),
            "\n".join(task_err.get(task, []) + ([other] if (other := exits.get(task, ("", 0, None))[2]) else [])),
            exits[task][1] if task in exits else 0,
            None,
            python,
            job.answer,
        )
        for task in range(len(nodes))
    }
    # A task names its node first (SLURMD_NODENAME); a silent task is named by srun's error line,
    # else it takes the next node nobody answered for (block distribution: task i on node i).
    named = {task: node for task, node in names.items() if node in nodes}
    named.update({task: exits[task][0] for task in results if task not in named and task in exits})
    free = iter(n for n in nodes if n not in set(named.values()))
    gathered: Gathered = {}
    for task, result in results.items():
        node = named.get(task) or next(free, f"task {task}")
        if node in early:
            gathered[node] = early[node]
            continue
        if isinstance(result, Outcome):
            result = Outcome(node, result.status, result.detail)
            if overflow and result.status in ("unparsed", "error"):
                result = Outcome(node, "unparsed", f"too much output from the srun step ({overflow}); it was stopped")
            elif timed_out and result.status in ("unparsed", "error"):
                result = Outcome(node, "timeout", f"no answer from the srun step within {job.timeout:g} s")
            elif result.status == "unparsed" and not task_out.get(task) and srun_err:
                result = Outcome(node, "error", f"srun: {' | '.join(srun_err[-3:])[-300:]}")
        gathered[node] = result
        on_done(node, result)
    return gathered
