"""Local transport: each target's program is a ``python3 -c`` subprocess of this machine
(``validator scan --local``: this node as a scanned node sees it). Subclasses reach other
machines by putting a command in front (``kubectl exec -i POD --``: validator.transports.kubectl).

Each subprocess starts in its own session: Ctrl-C reaches the scan, which kills them by process
group; a run that overruns its timeout or its output caps is killed the same way. What escaped its
session (a descendant that started its own) is ended when ``run`` returns, and for ``start``'s
programs at ``stop``: every subprocess belongs to a ``procs.Tree``. Inside ``async with``, this
process adopts the orphans of its descendants (``Tree(adopt=True)``), and leaving it ends them:
also one that cleared its environment, left its session and lost its parent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from typing import Protocol

from validator.errors import UserError
from validator.model import Outcome
from validator.procs import Tree
from validator.transports import (
    Gathered,
    OnDone,
    Program,
    Result,
    Transport,
    answer_of,
    bootstrap,
    every,
    first_answer,
    payload,
    read_output,
    release,
)

Proc = asyncio.subprocess.Process
START_SLACK_S = 10.0  # the carrier's own start-up (kubectl reaching the API server) on top of the program


def this_host() -> str:
    return socket.gethostname()


class Flags(Protocol):
    """What `validator scan --local` reads of the scan's options."""

    python: str
    fanout: int


def from_options(opts: Flags) -> tuple[Transport, list[str]]:  # mypy holds the class to Transport
    """This machine, through a local python3."""
    return Local(opts.python, opts.fanout), [this_host()]


class Local:
    name = "local"

    def __init__(self, python: str = "python3", fanout: int = 64) -> None:
        if fanout < 1:
            raise UserError("--fanout must be positive")
        self.python = python
        self.sem = asyncio.Semaphore(fanout)
        self.warnings: list[str] = []
        self.started: dict[str, Proc] = {}
        self.listening = Tree()  # what start() started, ended at stop()
        self.orphans: Tree | None = None

    # ------------------------------------------------------------------ what a subclass changes

    def command(self, target: str) -> list[str]:
        """What runs ``python3 -c PROGRAM`` on ``target``, put in front of it."""
        return []

    def argv(self, target: str, program: str) -> list[str]:
        """The command line running ``program`` (a ``python3 -c`` bootstrap) for ``target``: a
        carrier whose command reaches a remote shell (ssh) quotes it into one word instead."""
        return [*self.command(target), self.python, "-c", program]

    def skip(self, target: str) -> Outcome | None:
        """An outcome known without running anything (a pod that is not running)."""
        return None

    def outcome(self, target: str, out: str, err: str, rc: int | None, job: Program) -> Result:
        """The program's answer, or why there is none, from what the command left behind."""
        signame = None
        if rc is not None and rc < 0:
            try:
                signame = signal.Signals(-rc).name[3:]
            except ValueError:
                signame = str(-rc)
        return answer_of(target, out, err, None if signame else rc, signame, self.python, job.answer)

    # ------------------------------------------------------------------ the Transport protocol

    async def __aenter__(self) -> Local:
        self.orphans = Tree(adopt=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        if self.orphans is not None:
            self.orphans.end(grace=0)

    async def _spawn(self, target: str, job: Program, tree: Tree) -> Proc | Outcome:
        argv = self.argv(target, bootstrap(job.timeout))
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=tree.env(),
                start_new_session=True,  # Ctrl-C reaches the scan, which ends them by process group
            )
        except FileNotFoundError:
            if self.command(target):
                raise UserError(f"{argv[0]} not found on this machine") from None
            return Outcome(target, "no-python", f"{self.python} not found on this machine")
        tree.add(proc.pid)
        if self.orphans is not None:
            self.orphans.add(proc.pid)  # asyncio's to reap
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionError):
            proc.stdin.write(payload(job, target).encode())
            await proc.stdin.drain()
        return proc

    async def run(self, job: Program, targets: list[str], on_done: OnDone | None = None) -> Gathered:
        out: Gathered = {}
        tree = Tree()

        async def one(target: str) -> None:
            async with self.sem:
                result = self.skip(target) or await self._run_one(target, job, tree)
            out[target] = result
            if on_done is not None:
                on_done(target, result)

        try:
            await every(one(t) for t in targets)
        finally:
            tree.end(grace=0)  # each was killed by its group: this ends what left its session
        return out

    async def _run_one(self, target: str, job: Program, tree: Tree) -> Result:
        proc = await self._spawn(target, job, tree)
        if isinstance(proc, Outcome):
            return proc
        assert proc.stdin is not None
        try:
            with contextlib.suppress(BrokenPipeError, ConnectionError):
                proc.stdin.close()  # a command that exits before reading: its stderr says why
            got = await read_output(proc.stdout, proc.stderr, job.timeout + START_SLACK_S)
            if got is None:
                return Outcome(target, "timeout", f"the agent did not finish within {job.timeout:g} s")
            if isinstance(got, str):
                return Outcome(target, "unparsed", f"too much output ({got}); the agent was stopped")
            await asyncio.wait([asyncio.ensure_future(proc.wait())], timeout=10)
            return self.outcome(target, got[0].decode(errors="replace"), got[1].decode(errors="replace"),
                                proc.returncode, job)  # fmt: skip
        finally:
            await _kill(proc)

    async def start(self, job: Program, targets: list[str]) -> Gathered:
        async def one(target: str) -> tuple[str, Result]:
            if skipped := self.skip(target):
                return target, skipped
            async with self.sem:
                proc = await self._spawn(target, job, self.listening)
                if isinstance(proc, Outcome):
                    return target, proc
                try:
                    doc, text = await first_answer(proc.stdout, job.answer, START_SLACK_S + 10)
                except BaseException:
                    await _kill(proc)
                    raise
            if doc is not None:
                self.started[target] = proc
                return target, doc
            await _kill(proc)
            assert proc.stderr is not None
            err = (await proc.stderr.read(1 << 16)).decode(errors="replace")
            return target, self.outcome(target, text, err, proc.returncode, job)

        return dict(await every(one(t) for t in targets))

    async def stop(self) -> None:
        procs, self.started = list(self.started.values()), {}
        for proc in procs:
            if proc.stdin is not None:
                with contextlib.suppress(OSError, RuntimeError):
                    proc.stdin.close()
        if procs:
            await asyncio.wait([asyncio.ensure_future(p.wait()) for p in procs], timeout=5)
        for proc in procs:
            await _kill(proc)
        self.listening.end(grace=0)


async def _kill(proc: Proc) -> None:
    """The command and whatever it started (its session), by process group, then reaped."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    try:
        with contextlib.suppress(ProcessLookupError):
            await asyncio.wait([asyncio.ensure_future(proc.wait())], timeout=5)
    finally:
        release(proc)  # even when cancelled while waiting
