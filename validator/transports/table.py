"""The transports `validator scan` can open, one entry each, by the name the report shows
(``scan.transport``). An entry says which option chooses it, which options only it reads (given
while another transport is chosen, they are a usage error: its ``misplaced`` text), and the module
whose ``from_options`` checks its own options and returns (transport, targets). Modules load when
chosen: a Slurm scan never imports asyncssh. As torch's rendezvous handler registry does, ``table``
refuses a name given twice. Adding a transport: docs/architecture.md."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    name: str  # the report's scan.transport, the class's ``name``
    module: str  # has ``from_options(options) -> (transport, targets)`` and ``Flags``, what it reads
    flag: str | None = None  # the option that chooses it; None: the default, when no flag is given
    owns: tuple[str, ...] = ()  # ScanOptions fields only it reads, or only the transports whose Flags read them too
    misplaced: str = ""  # the usage error when one of ``owns`` is given but not this transport ({chosen}: its flag)

    @property
    def chosen_by(self) -> str:
        """The ScanOptions field of its flag (``--k8s`` -> ``k8s``)."""
        return (self.flag or "").removeprefix("--").replace("-", "_")


def table(*entries: Entry) -> dict[str, Entry]:
    """Name -> entry, in the order given (the order usage errors are looked for); a name or a
    flag given twice, or two defaults, is a programming error."""
    out: dict[str, Entry] = {}
    for e in entries:
        if e.name in out:
            raise ValueError(f"transport {e.name!r} is registered twice")
        if any(e.flag == o.flag for o in out.values()):
            raise ValueError(f"transport {e.name!r}: {e.flag or 'the default'} already chooses another transport")
        out[e.name] = e
    return out


TRANSPORTS = table(
    Entry("ssh", "validator.transports.ssh", None, ("targets", "partition"),
          "{chosen} chooses its own targets; give no TARGETS or --partition with it"),
    Entry("slurm", "validator.transports.slurm", "--slurm", ("slurm_nodes",),
          "--slurm-nodes needs --slurm (it selects nodes of the current allocation)"),
    Entry("kubectl", "validator.transports.kubectl", "--k8s", ("selector", "namespace", "context"),
          "--selector, --namespace and --context need --k8s"),
    Entry("local", "validator.transports.local", "--local"),
    Entry("openssh", "validator.transports.openssh", "--openssh", ("ssh_config", "user", "accept_new_host_keys"),
          "--ssh-config, --user and --accept-new-host-keys are for SSH: the default transport or --openssh"),
)  # fmt: skip
