"""SSH transport on asyncssh: run one command on many hosts with a bounded fan-out.

OpenSSH's client configuration is honoured through asyncssh's own support (User, Port, HostName,
IdentityFile, IdentitiesOnly, ProxyJump, UserKnownHostsFile, ConnectTimeout, KexAlgorithms...),
and so are ssh-agent (SSH_AUTH_SOCK, IdentityAgent) and known_hosts. Unknown and changed host
keys are refused unless ``accept_new_host_keys`` (then new keys are accepted and recorded,
changed ones still refused), like OpenSSH's ``StrictHostKeyChecking accept-new``.

Every failure becomes an ``Outcome`` for its host; nothing here raises for one bad host.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import resource
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import asyncssh

from validator.errors import UserError
from validator.model import Outcome
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
    remote_command,
)
from validator.transports.executor import DaemonExecutor
from validator.transports.openssh import host_port, ssh_targets  # the hosts both SSH transports read

DROPPED = (ConnectionResetError, BrokenPipeError, asyncssh.ConnectionLost)  # sshd MaxStartups drops
CONNECT_TRIES = 6


def default_config_paths() -> list[str]:
    """The files OpenSSH's client reads, in its order (the first value found wins)."""
    return [str(p) for p in (Path("~/.ssh/config").expanduser(), Path("/etc/ssh/ssh_config")) if p.is_file()]


@dataclass
class SshOptions:
    fanout: int = 64
    connect_timeout: float = 10.0
    command_timeout: float = 60.0
    config: list[str] = field(default_factory=default_config_paths)
    username: str | None = None
    accept_new_host_keys: bool = False

    def check(self) -> None:
        """Config files that do not parse are the user's error (exit 2), not every host's."""
        for path in self.config:
            try:
                asyncssh.SSHClientConnectionOptions(config=[path], host="validator-config-check")
            except asyncssh.config.ConfigParseError as e:
                raise UserError(f"bad ssh config: {e}") from None
            except OSError as e:
                raise UserError(f"ssh config: {e.strerror}: {e.filename}", path) from None
        if self.fanout < 1 or self.connect_timeout <= 0 or self.command_timeout <= 0:
            raise UserError("--fanout, --connect-timeout and --timeout must be positive")


class Flags(Protocol):
    """What `validator scan` over SSH (no transport flag) reads of the scan's options."""

    targets: list[str]  # hostlists and @files
    partition: str | None
    fanout: int
    connect_timeout: float
    timeout: float
    ssh_config: list[str] | None  # None: the files OpenSSH's client reads
    user: str | None
    accept_new_host_keys: bool
    python: str
    net_check: bool  # with --net-check or --probes, connections stay open for the next jobs
    probes: bool


def from_options(opts: Flags) -> tuple[Transport, list[str]]:  # mypy holds the class to Transport
    """The hosts of TARGETS and --partition (sinfo), over SSH."""

    hosts = ssh_targets(opts.targets, opts.partition)
    ssh = SshOptions(
        fanout=opts.fanout,
        connect_timeout=opts.connect_timeout,
        command_timeout=opts.timeout,
        config=default_config_paths() if opts.ssh_config is None else list(opts.ssh_config),
        username=opts.user,
        accept_new_host_keys=opts.accept_new_host_keys,
    )
    ssh.check()
    return Fleet(ssh, opts.python, keep=opts.net_check or opts.probes), hosts


@dataclass
class Exec:
    stdout: str
    stderr: str
    exit_status: int | None
    exit_signal: str | None
    overflow: str = ""  # set when the output went over its cap and the command was stopped


class HostKeyPolicy(asyncssh.SSHClient):
    """Decides on host keys that known_hosts does not already trust, and says why it refused."""

    def __init__(self, target: str, opts: SshOptions) -> None:
        self.target = target
        self.opts = opts
        self.verdict = ""
        self.learned: tuple[Path, str, str] | None = None  # file, host pattern, key line

    def known_hosts_files(self, port: int) -> list[str]:
        o = asyncssh.SSHClientConnectionOptions(config=self.opts.config, host=self.target, port=port)
        files = o.known_hosts
        if isinstance(files, list) and files and all(isinstance(f, str) for f in files):
            return [str(f) for f in files]
        return [str(Path("~/.ssh/known_hosts").expanduser())]

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        files = self.known_hosts_files(port)
        readable = [f for f in files if Path(f).is_file()]
        trusted = asyncssh.match_known_hosts(readable, host, addr, None if port == 22 else port)[0] if readable else []
        fp = key.get_fingerprint()
        if trusted:
            self.verdict = (
                f"host key CHANGED: {host} offers {fp}, which is not the key recorded in {', '.join(readable)} "
                "(reinstalled node, or someone in the middle); if the change is expected, remove the old entry: "
                f"ssh-keygen -R {host if port == 22 else f'[{host}]:{port}'}"
            )
            return False
        if not self.opts.accept_new_host_keys:
            self.verdict = (
                f"unknown host key: {host} offers {fp}, which is not in {', '.join(files)}; "
                "rerun with --accept-new-host-keys to accept and record new keys"
            )
            return False
        pattern = host if port == 22 else f"[{host}]:{port}"
        line = " ".join(key.export_public_key("openssh").decode().split()[:2])
        self.learned = (Path(files[0]), pattern, line)
        return True


def _record_key(learned: tuple[Path, str, str]) -> str | None:
    path, pattern, line = learned
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(f"{pattern} {line}\n")
    except OSError as e:
        return f"could not record the new host key of {pattern} in {path}: {e.strerror}"
    return None


def _failure(target: str, exc: BaseException, policy: HostKeyPolicy, opts: SshOptions, tries: int) -> Outcome:
    """One line a person can act on, per kind of connection failure."""
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return Outcome(target, "hostkey", policy.verdict or str(exc))
    if isinstance(exc, asyncssh.PermissionDenied):
        return Outcome(
            target,
            "auth",
            f"permission denied ({exc.reason}): no key offered was accepted; check User, IdentityFile "
            "and ssh-agent for this host (`ssh -v HOST true` shows what is tried)",
        )
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return Outcome(target, "unreachable", f"no SSH session within {opts.connect_timeout:g} s (connect timeout)")
    if isinstance(exc, ConnectionRefusedError):
        return Outcome(target, "unreachable", "connection refused: no sshd listening on the SSH port")
    if isinstance(exc, socket.gaierror):
        return Outcome(target, "unreachable", f"name does not resolve: {exc.strerror}")
    if isinstance(exc, DROPPED):
        return Outcome(
            target,
            "unreachable",
            f"connection dropped during the handshake {tries} times (sshd MaxStartups, or a firewall): {exc}",
        )
    if isinstance(exc, asyncssh.DisconnectError):
        return Outcome(target, "unreachable", f"disconnected by the server: {exc.reason}")
    if isinstance(exc, OSError):
        return Outcome(target, "unreachable", exc.strerror or str(exc))
    return Outcome(target, "error", f"{type(exc).__name__}: {exc}")


class Fleet:
    """The SSH transport: connections to many hosts, opened with a bounded fan-out; with
    ``keep``, the connections of the hosts that answered stay open for later jobs on the same
    hosts (the net check)."""

    name = "ssh"

    def __init__(self, opts: SshOptions, python: str = "python3", keep: bool = False) -> None:
        self.opts = opts
        self.python = python
        self.keep = keep
        self.sem = asyncio.Semaphore(opts.fanout)
        self.conns: dict[str, asyncssh.SSHClientConnection] = {}
        self.warnings: list[str] = []
        self._closing: list[asyncssh.SSHClientConnection] = []
        self.started: dict[str, asyncssh.SSHClientProcess[bytes]] = {}

    async def __aenter__(self) -> Fleet:
        loop = asyncio.get_running_loop()
        # asyncssh resolves names and loads keys in the default executor (6 threads on 2 cores):
        # a stalled DNS lookup would hold one and starve the others into false timeouts.
        loop.set_default_executor(DaemonExecutor(self.opts.fanout + 8))
        _raise_nofile(2 * self.opts.fanout + 64)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        for conn in self.conns.values():
            conn.close()
        self._closing += self.conns.values()
        self.conns.clear()
        waits = [c.wait_closed() for c in self._closing]
        self._closing = []
        if waits:
            await asyncio.wait([asyncio.ensure_future(w) for w in waits], timeout=5)

    async def connect(self, target: str) -> asyncssh.SSHClientConnection | Outcome:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.opts.connect_timeout
        policy = HostKeyPolicy(target, self.opts)
        kwargs: dict[str, Any] = {"username": self.opts.username} if self.opts.username else {}
        host, port = host_port(target)
        if port:
            kwargs["port"] = port
        for attempt in range(1, CONNECT_TRIES + 1):
            left = deadline - loop.time()
            policy.verdict, policy.learned = "", None
            try:
                conn = await asyncio.wait_for(
                    asyncssh.connect(
                        host,
                        config=self.opts.config,
                        connect_timeout=max(left, 0.1),
                        client_factory=lambda: policy,
                        **kwargs,
                    ),
                    timeout=max(left, 0.1) + 1,
                )
            except DROPPED as e:
                backoff = 0.05 * 2**attempt * (1 + random.random())
                if attempt == CONNECT_TRIES or deadline - loop.time() < backoff:
                    return _failure(target, e, policy, self.opts, attempt)
                await asyncio.sleep(backoff)
                continue
            except (asyncssh.Error, OSError, ValueError, EOFError, asyncio.TimeoutError) as e:
                return _failure(target, e, policy, self.opts, attempt)
            if policy.learned and (warning := _record_key(policy.learned)):
                self.warnings.append(warning)
            return conn
        raise AssertionError("unreachable: the loop returns")  # pragma: no cover

    async def execute(self, conn: asyncssh.SSHClientConnection, job: Program, target: str) -> Exec | None:
        """Run ``job``; None when it did not finish in time. Output beyond the caps ends it at
        once: the command is killed and the result says so."""
        proc = await conn.create_process(remote_command(self.python, bootstrap(job.timeout)), encoding=None)
        try:
            # a command that exits before reading its input (no python3 there) closes the channel
            # first: its stderr and exit status say why, not the write that found it closed
            with contextlib.suppress(BrokenPipeError, ConnectionError):
                proc.stdin.write(payload(job, target).encode())
                proc.stdin.write_eof()
            got = await read_output(proc.stdout, proc.stderr, job.timeout)
            if not isinstance(got, tuple):
                with contextlib.suppress(asyncssh.Error, OSError):
                    proc.send_signal("KILL")  # OpenSSH >= 7.9 honours signal requests
                return None if got is None else Exec("", "", None, None, got)
            await asyncio.wait([asyncio.ensure_future(proc.wait_closed())], timeout=5)
        finally:
            proc.close()
        sig = proc.exit_signal[0] if proc.exit_signal else None
        return Exec(got[0].decode(errors="replace"), got[1].decode(errors="replace"), proc.exit_status, sig)

    async def _session(self, target: str) -> asyncssh.SSHClientConnection | Outcome:
        return self.conns.get(target) or await self.connect(target)

    def _release(self, target: str, conn: asyncssh.SSHClientConnection, answered: bool) -> None:
        if self.keep and answered:
            self.conns[target] = conn
        elif self.conns.get(target) is not conn:
            conn.close()
            self._closing.append(conn)

    async def run_one(self, target: str, job: Program) -> Result:
        async with self.sem:
            conn = await self._session(target)
            if isinstance(conn, Outcome):
                return conn
            result: Result
            try:
                ex = await self.execute(conn, job, target)
                if ex is None:
                    result = Outcome(target, "timeout", f"the agent did not finish within {job.timeout:g} s")
                elif ex.overflow:
                    result = Outcome(target, "unparsed", f"too much output ({ex.overflow}); the agent was stopped")
                else:
                    result = answer_of(target, ex.stdout, ex.stderr, ex.exit_status, ex.exit_signal, self.python,
                                      job.answer)  # fmt: skip
            except (asyncssh.Error, OSError) as e:
                result = Outcome(target, "error", f"session failed: {type(e).__name__}: {e}")
            except BaseException:  # cancelled (Ctrl-C): close the session, then let it propagate
                conn.close()
                raise
            self._release(target, conn, isinstance(result, dict))
            return result

    async def run(self, job: Program, targets: list[str], on_done: OnDone | None = None) -> Gathered:
        out: Gathered = {}
        if self.keep:  # every reached host keeps its connection open for the net check
            _raise_nofile(len(targets) + 2 * self.opts.fanout + 64)

        async def one(target: str) -> None:
            result = await self.run_one(target, job)
            out[target] = result
            if on_done is not None:
                on_done(target, result)

        await every(one(t) for t in targets)
        return out

    async def start(self, job: Program, targets: list[str]) -> Gathered:
        limit = self.opts.command_timeout

        async def one(target: str) -> tuple[str, Result]:
            async with self.sem:
                conn = await self._session(target)
                if isinstance(conn, Outcome):
                    return target, conn
                try:
                    proc = await conn.create_process(remote_command(self.python, bootstrap(job.timeout)), encoding=None)
                    proc.stdin.write(payload(job, target).encode())
                    doc, text = await first_answer(proc.stdout, job.answer, limit)
                except (asyncssh.Error, OSError) as e:
                    return target, Outcome(target, "error", f"could not start: {type(e).__name__}: {e}")
            if doc is not None:
                self.started[target] = proc
                return target, doc
            proc.close()
            if not text:
                return target, Outcome(target, "timeout", f"no answer within {limit:g} s")
            return target, answer_of(target, text, "", None, None, self.python, job.answer)

        return dict(await every(one(t) for t in targets))

    async def stop(self) -> None:
        procs, self.started = list(self.started.values()), {}
        for proc in procs:
            with contextlib.suppress(asyncssh.Error, OSError):
                proc.stdin.write_eof()
        if procs:
            await asyncio.wait([asyncio.ensure_future(p.wait_closed()) for p in procs], timeout=5)
        for proc in procs:
            proc.close()


def _raise_nofile(want: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < want:
        target = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
