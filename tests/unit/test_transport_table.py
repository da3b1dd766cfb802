"""The transports' table (validator/transports/table.py): a name is registered once; each entry
opens from its own options, and an option only one transport reads, given with another, is the
same usage error as before the table (tests/scan/test_cli_errors.py runs them through the CLI)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from validator.errors import UserError
from validator.scan import ScanOptions, open_transport
from validator.transports.openssh import OpenSsh
from validator.transports.table import TRANSPORTS, Entry, table

K8S = Path(__file__).resolve().parents[1] / "k8s"  # the fake kubectl (tests/k8s/kubectl)
FIELDS = {f.name: f.type for f in dataclasses.fields(ScanOptions)}
OWN = {"targets": ["127.0.0.1"], "partition": "gpu", "slurm_nodes": "n1", "selector": "job-name=train",
       "namespace": "ml", "context": "prod", "ssh_config": ["cfg"], "user": "u", "accept_new_host_keys": True}  # fmt: skip
# the usage errors, word for word as open_transport's if-chain wrote them
MISPLACED = {
    "ssh": "{chosen} chooses its own targets; give no TARGETS or --partition with it",
    "slurm": "--slurm-nodes needs --slurm (it selects nodes of the current allocation)",
    "kubectl": "--selector, --namespace and --context need --k8s",
    "openssh": "--ssh-config, --user and --accept-new-host-keys are for SSH: the default transport or --openssh",
}


def test_a_name_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="transport 'ssh' is registered twice"):
        table(Entry("ssh", "validator.transports.ssh"), Entry("ssh", "validator.transports.local", "--local"))
    with pytest.raises(ValueError, match="--local already chooses another transport"):
        table(Entry("a", "validator.transports.local", "--local"), Entry("b", "validator.transports.local", "--local"))
    with pytest.raises(ValueError, match="the default already chooses"):
        table(Entry("a", "validator.transports.ssh"), Entry("b", "validator.transports.local"))
    assert list(table(Entry("a", "m"), Entry("b", "n", "--b"))) == ["a", "b"]


@pytest.mark.parametrize("entry", TRANSPORTS.values(), ids=list(TRANSPORTS))
def test_each_entry_reads_options_the_scan_has(entry: Entry) -> None:
    """Its ``Flags`` are fields of ScanOptions, of the same type; what it owns it reads; its flag
    is a switch of ScanOptions."""
    module = importlib.import_module(entry.module)
    flags = module.Flags.__annotations__
    assert flags and all(FIELDS.get(name) == kind for name, kind in flags.items()), (flags, FIELDS)
    assert set(entry.owns) <= set(flags)
    assert entry.flag is None or FIELDS[entry.chosen_by] == "bool"
    assert callable(module.from_options)
    assert (entry.misplaced == "") == (not entry.owns)
    assert entry.misplaced == MISPLACED.get(entry.name, "")


@pytest.mark.parametrize("owner", TRANSPORTS.values(), ids=list(TRANSPORTS))
@pytest.mark.parametrize("chosen", TRANSPORTS.values(), ids=list(TRANSPORTS))
def test_an_option_of_one_transport_with_another_is_a_usage_error(owner: Entry, chosen: Entry) -> None:
    """Unless the chosen transport reads it too (ssh and openssh share the SSH options)."""
    if owner is chosen or not owner.owns:
        return
    reads = importlib.import_module(chosen.module).Flags.__annotations__
    for name in (n for n in owner.owns if n not in reads):
        opts = ScanOptions(**{name: OWN[name]}, **({chosen.chosen_by: True} if chosen.flag else {}))
        with pytest.raises(UserError) as e:
            open_transport(opts)
        assert str(e.value) == owner.misplaced.format(chosen=chosen.flag), (name, chosen.name)


def test_the_ssh_options_are_read_by_both_ssh_transports() -> None:
    shared = {"targets": ["127.0.0.1"], "ssh_config": [], "user": "u", "accept_new_host_keys": True}
    assert open_transport(ScanOptions(**shared))[0].name == "ssh"  # type: ignore[arg-type]
    assert open_transport(ScanOptions(openssh=True, **shared))[0].name == "openssh"  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"^--ssh-config, --user and --accept-new-host-keys are for SSH"):
        open_transport(ScanOptions(slurm=True, user="u"))


def test_two_transport_flags_exclude_each_other_in_table_order() -> None:
    with pytest.raises(UserError, match=r"^--slurm and --k8s exclude each other: choose one transport$"):
        open_transport(ScanOptions(k8s=True, slurm=True))
    with pytest.raises(UserError, match=r"^--slurm and --k8s and --local exclude each other"):
        open_transport(ScanOptions(local=True, k8s=True, slurm=True))


def test_ssh_opens_from_its_own_options() -> None:
    transport, targets = open_transport(ScanOptions(targets=["127.0.0.[1-3]"], ssh_config=[], user="u", fanout=7))
    assert (transport.name, targets) == ("ssh", ["127.0.0.1", "127.0.0.2", "127.0.0.3"])
    assert transport.opts.username == "u" and transport.opts.fanout == 7 and transport.opts.config == []
    with pytest.raises(UserError, match=r"^nothing to scan: give a hostlist"):
        open_transport(ScanOptions(ssh_config=[]))
    with pytest.raises(UserError, match="must be positive"):
        open_transport(ScanOptions(targets=["127.0.0.1"], ssh_config=[], fanout=0))


def test_openssh_opens_from_its_own_options(tmp_path: Path) -> None:
    """The system ssh client (OpenSSH, installed here): the command line a host gets, and every
    option it refuses, before anything connects (``ssh -G`` reads the config, connects nowhere)."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n  Port 2222\n")
    transport, targets = open_transport(ScanOptions(openssh=True, targets=["h[1-2]"], ssh_config=[str(cfg)],
                                                    user="u", connect_timeout=2.5, fanout=3))  # fmt: skip
    assert isinstance(transport, OpenSsh) and targets == ["h1", "h2"] and transport.name == "openssh"
    argv = transport.argv("h1", "print(1)")
    assert argv[:7] == ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3", "-F"]
    assert argv[7:] == [str(cfg), "-l", "u", "--", "h1", "python3 -c 'print(1)'"]  # the host after --, one word
    assert not [a for a in argv if a.startswith("StrictHostKeyChecking")]  # left to the user's config
    accepting = open_transport(
        ScanOptions(openssh=True, targets=["h1"], ssh_config=[str(cfg)], accept_new_host_keys=True)
    )[0]
    assert isinstance(accepting, OpenSsh) and "StrictHostKeyChecking=accept-new" in accepting.argv("h1", "")
    hostile = tmp_path / "hosts"
    hostile.write_text("h1\n-oProxyCommand=touch pwned\n")
    with pytest.raises(UserError, match=r"^--openssh: host '-oProxyCommand=touch pwned' starts with '-'"):
        open_transport(ScanOptions(openssh=True, targets=[f"@{hostile}"], ssh_config=[str(cfg)]))
    assert not (tmp_path / "pwned").exists()
    with pytest.raises(UserError, match=r"^--openssh takes one --ssh-config FILE"):
        open_transport(ScanOptions(openssh=True, targets=["h1"], ssh_config=[str(cfg), str(cfg)]))
    cfg.write_text("Host *\n  NoSuchOption yes\n")
    with pytest.raises(UserError, match=rf"^bad ssh config: {cfg}: line 2: Bad configuration option"):
        open_transport(ScanOptions(openssh=True, targets=["h1"], ssh_config=[str(cfg)]))
    with pytest.raises(UserError, match=r"^nothing to scan: give a hostlist"):
        open_transport(ScanOptions(openssh=True))


def test_local_opens_this_machine() -> None:
    transport, targets = open_transport(ScanOptions(local=True, python="/usr/bin/python3"))
    assert (transport.name, targets, transport.python) == ("local", [socket.gethostname()], "/usr/bin/python3")


def test_slurm_opens_the_allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(UserError, match=r"^--slurm needs a SLURM allocation"):
        open_transport(ScanOptions(slurm=True))
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n[1-3]")
    transport, targets = open_transport(ScanOptions(slurm=True))
    assert (transport.name, targets) == ("slurm", ["n1", "n2", "n3"])
    assert open_transport(ScanOptions(slurm=True, slurm_nodes="n[2-3]"))[1] == ["n2", "n3"]
    with pytest.raises(UserError, match=r"^--slurm-nodes: not in this allocation: n9$"):
        open_transport(ScanOptions(slurm=True, slurm_nodes="n[1,9]"))


def test_kubectl_opens_the_selected_pods(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Through the fake kubectl (no API server can run here): ``get pods`` as kubectl answers it."""

    def pod(name: str, job: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ml", "labels": {"job-name": job}},
                "status": {"phase": "Running"}}  # fmt: skip

    state = tmp_path / "state.json"
    state.write_text(json.dumps({"contexts": {"prod": {"pods": [pod("a-0", "train"), pod("b-0", "eval")]}}}))
    config = tmp_path / "kubeconfig"
    config.write_text(json.dumps({"current-context": "prod"}))
    monkeypatch.setenv("PATH", f"{K8S}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_KUBECTL_STATE", str(state))
    monkeypatch.setenv("KUBECONFIG", str(config))
    transport, targets = open_transport(ScanOptions(k8s=True, selector="job-name=train", namespace="ml"))
    assert (transport.name, targets) == ("kubectl", ["a-0"])
    with pytest.raises(UserError, match="no pods match"):
        open_transport(ScanOptions(k8s=True, selector="job-name=none", namespace="ml"))
