"""OpenSSH transport: the system ``ssh`` client in front of ``python3 -c PROGRAM``, one ``ssh``
process per host (``validator scan --openssh``). The scan logs in exactly as ``ssh HOST`` does
there, also where asyncssh cannot: a ControlMaster socket, GSSAPI/Kerberos (asyncssh needs the
gssapi package), options asyncssh lacks (KnownHostsCommand), a site-built or wrapped ssh.

It is ``Local`` with ``ssh -T -o BatchMode=yes [-F FILE] [-l USER] -- HOST`` in front: bounded
fan-out, each ``ssh`` in its own session, killed by process group on timeout or Ctrl-C. The
program and its input travel on stdin, as over the asyncssh transport. BatchMode: ssh never
prompts (a password or an unknown host key is a failure, not a question); host keys are checked
as the user's ssh config says (``--accept-new-host-keys``: ``StrictHostKeyChecking=accept-new``).
A host is never an option: ``--`` ends ssh's options, and a host starting with ``-`` is refused.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path
from typing import Protocol

from validator.errors import UserError
from validator.model import Outcome
from validator.transports import Program, Result, Transport, _tail, remote_command
from validator.transports.local import Local

CHECK_TIMEOUT_S = 30.0  # `ssh -G`: reading the config, no connection
HOSTKEY = ("host key verification failed", "host identification has changed", "host key is known")


class Flags(Protocol):
    """What `validator scan --openssh` reads of the scan's options."""

    targets: list[str]  # hostlists and @files, as over SSH
    partition: str | None
    fanout: int
    connect_timeout: float
    ssh_config: list[str] | None  # one file, ssh's -F; None: ssh's own (~/.ssh/config, /etc/ssh/ssh_config)
    user: str | None
    accept_new_host_keys: bool
    python: str


def from_options(opts: Flags) -> tuple[Transport, list[str]]:  # mypy holds the class to Transport
    """The hosts of TARGETS and --partition, each through the system ssh client."""
    hosts = ssh_targets(opts.targets, opts.partition)
    bad = next((h for h in hosts if h.startswith("-")), None)
    if bad is not None:
        raise UserError(f"host {bad!r} starts with '-': ssh would read it as an option", "--openssh")
    if opts.connect_timeout <= 0:
        raise UserError("--fanout, --connect-timeout and --timeout must be positive")
    configs = list(opts.ssh_config or [])
    if len(configs) > 1:
        raise UserError("--openssh takes one --ssh-config FILE (ssh -F reads one; use Include in it)")
    config = configs[0] if configs else None
    check_config(config)
    t = OpenSsh(config, opts.user, opts.accept_new_host_keys, math.ceil(opts.connect_timeout), opts.python, opts.fanout)
    return t, hosts


def ssh_targets(targets: list[str], partition: str | None) -> list[str]:
    """The hosts of TARGETS (hostlists, @files) and --partition (sinfo): what both SSH transports
    (ssh, openssh) scan."""
    from validator.targets import expand_targets
    from validator.transports.slurm import partition_nodes

    hosts = expand_targets(targets)
    if partition:
        hosts = list(dict.fromkeys(hosts + partition_nodes(partition)))
    if not hosts:
        raise UserError("nothing to scan: give a hostlist, @file, --partition, --slurm or --k8s")
    for host in hosts:
        host_port(host)  # a bad port is refused before any connection
    return hosts


def host_port(target: str) -> tuple[str, int | None]:
    """``host:port`` (a name or IPv4 address, then 1-65535) is that host on that port; anything else
    (a bare name, an IPv6 address, which has colons of its own) is the host on ssh config's port."""
    host, sep, port = target.rpartition(":")
    if not sep or ":" in host or not host or not port.isascii() or not port.isdigit():
        return target, None
    if not 1 <= int(port) <= 65535:
        raise UserError(f"target {target!r}: port {port} is not in 1-65535")
    return host, int(port)


def check_config(config: str | None) -> None:
    """ssh on PATH, and its configuration readable and valid (``ssh -G``, which connects nowhere):
    the user's error (exit 2, ssh's own line naming the file and line), not every host's."""
    if shutil.which("ssh") is None:
        raise UserError("ssh not found: --openssh needs OpenSSH's client on PATH")
    if config is not None and not Path(config).is_file():
        raise UserError("ssh config: no such file", config)
    argv = ["ssh", "-G", *(["-F", config] if config else []), "--", "validator-config-check"]
    try:
        p = subprocess.run(argv, capture_output=True, timeout=CHECK_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise UserError(f"ssh -G did not answer within {CHECK_TIMEOUT_S:g} s", config or "ssh config") from None
    if p.returncode != 0:
        lines = [ln.strip() for ln in p.stderr.decode(errors="replace").splitlines() if ln.strip()]
        raise UserError(f"bad ssh config: {(lines or ['ssh -G failed'])[0][:300]}")  # ssh's FILE: line N: ...


class OpenSsh(Local):
    name = "openssh"

    def __init__(
        self,
        config: str | None = None,
        user: str | None = None,
        accept_new_host_keys: bool = False,
        connect_timeout: int = 10,
        python: str = "python3",
        fanout: int = 64,
    ) -> None:
        super().__init__(python, fanout)
        self.options = [
            "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout}",
            *(["-F", config] if config else []), *(["-l", user] if user else []),
            *(["-o", "StrictHostKeyChecking=accept-new"] if accept_new_host_keys else []),
        ]  # fmt: skip

    def command(self, target: str) -> list[str]:
        if target.startswith("-"):  # from_options refuses it; never an option, whoever calls
            raise UserError(f"host {target!r} starts with '-': ssh would read it as an option")
        host, port = host_port(target)
        return ["ssh", *self.options, *(["-p", str(port)] if port else []), "--", host]

    def argv(self, target: str, program: str) -> list[str]:
        return [*self.command(target), remote_command(self.python, program)]  # one line for the remote shell

    def outcome(self, target: str, out: str, err: str, rc: int | None, job: Program) -> Result:
        answered = super().outcome(target, out, err, rc, job)
        if isinstance(answered, dict):
            return answered
        if rc == 255 and err.strip():  # ssh's own failure: its last lines say which
            low = err.lower()
            if "permission denied" in low:
                return Outcome(target, "auth", f"{_tail(err, 200)}: no key offered was accepted; check User, "
                               "IdentityFile and ssh-agent for this host (`ssh -v HOST true` shows what is tried)")  # fmt: skip
            if any(k in low for k in HOSTKEY):
                return Outcome(target, "hostkey", f"{_tail(err, 250)} (ssh never asks here: check known_hosts, "
                               "or rerun with --accept-new-host-keys for keys not yet recorded)")  # fmt: skip
            said = _tail(err, 250)
            said = said if said.startswith("ssh:") else f"ssh: {said}"
            timeout = " (connect timeout)" if "timed out" in low else ""  # the scan-side failure's kind
            return Outcome(target, "unreachable", f"{said}{timeout}")
        if rc is not None and 128 < rc <= 128 + 64:  # the remote shell's 128 + signal (SIGALRM: the watchdog)
            return super().outcome(target, out, err, -(rc - 128), job)
        return answered
