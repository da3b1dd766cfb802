"""Secrets never leave a node: the wrapped command line, the command line of the process holding
MASTER_PORT and URL credentials are redacted by the agent itself, on a real process tree; RDZ006
redacts facts written by older agents too. The redaction rule is in docs/facts.md ("Secrets")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR, free_port
from tests.factories import check, master, node_job
from validator.agent.probe import REDACTED, redact_argv, redact_command

SECRETS = ("hf_tok_5b1e", "pw_9c33", "k3y_77aa", "urlpass_e1f0", "envtok_aa12")


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["--hf-token", "hf_x"], ["--hf-token", REDACTED]),
        (["--db-password=y"], [f"--db-password={REDACTED}"]),
        (["--api_key", "K", "--AWS-SECRET-ACCESS-KEY=Z"], ["--api_key", REDACTED, f"--AWS-SECRET-ACCESS-KEY={REDACTED}"]),
        (["--passwd", "-starts-with-dash"], ["--passwd", REDACTED]),
        (["--credentials-file", "/etc/c.json"], ["--credentials-file", REDACTED]),
        (["--key-file", "/home/u/.ssh/id"], ["--key-file", REDACTED]),  # conservative: paths go too
        (["--use-token", "--next", "1"], ["--use-token", "--next", "1"]),  # a flag: the next option is kept
        (["HF_TOKEN=abc", "torchrun"], [f"HF_TOKEN={REDACTED}", "torchrun"]),
        (["--rdzv-endpoint=https://u:p@ss@etcd:2379/x"], [f"--rdzv-endpoint=https://{REDACTED}@etcd:2379/x"]),
        (["git+ssh://git@github.com/o/r"], [f"git+ssh://{REDACTED}@github.com/o/r"]),
        # user:pass@host without a scheme (pip --proxy, *_proxy values); a password may hold an @
        (["pip", "--proxy", "me:s3cr3t@proxy:3128", "--proxy=me:p@ss@proxy.corp:8080", "x:y@[fd00::1]:80"],
         ["pip", "--proxy", f"{REDACTED}@proxy:3128", f"--proxy={REDACTED}@proxy.corp:8080", f"{REDACTED}@[fd00::1]:80"]),
        (["ssh", "me@host", "-p", "22", "host:29500", "fe80::1%eth0", "[::1]:29500"],
         ["ssh", "me@host", "-p", "22", "host:29500", "fe80::1%eth0", "[::1]:29500"]),  # no password: kept
        # the same words as secret variable names (the env rule): --passphrase, --auth, --cookie, --pass
        (["--passphrase", "a", "--auth=b", "--pass", "c", "--cookie=d"],
         ["--passphrase", REDACTED, f"--auth={REDACTED}", "--pass", REDACTED, f"--cookie={REDACTED}"]),
        # a command given as one word (bash -c '...'): its own words are redacted
        (["bash", "-c", "cd /w && HF_TOKEN=t1 torchrun x.py --hf_token t2 --db-password=t3"],
         ["bash", "-c", f"cd /w && HF_TOKEN={REDACTED} torchrun x.py --hf_token {REDACTED} --db-password={REDACTED}"]),
        # a value that is a secret by its form, whatever its option is called
        (["--header", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln", "--x=hf_" + "a" * 34],
         ["--header", REDACTED, f"--x={REDACTED}"]),
        # harmless options keep their values
        (["--master-port", "29500", "--master_addr=10.0.0.1", "--nproc-per-node", "8", "--rdzv-id", "job"],
         ["--master-port", "29500", "--master_addr=10.0.0.1", "--nproc-per-node", "8", "--rdzv-id", "job"]),
        (["NCCL_SOCKET_IFNAME=eth0", "--keep", "3", "http://host:80/path"],
         ["NCCL_SOCKET_IFNAME=eth0", "--keep", "3", "http://host:80/path"]),
    ],
)  # fmt: skip
def test_redact_argv(argv: list[str], want: list[str]) -> None:
    assert redact_argv(argv) == want


def test_redact_a_quoted_command_line() -> None:
    text = "pid 4242 (python3 own.py --db-password=hunter2 --url http://a:b@h)"
    assert redact_command(text) == f"pid 4242 (python3 own.py --db-password={REDACTED} --url http://{REDACTED}@h)"


def _probe(tmp_path: Path, *command: str, env: dict[str, str]) -> tuple[str, dict[str, object]]:
    p = subprocess.run(
        [*VALIDATOR, "probe", "--json", "--", *command],
        capture_output=True,
        text=True,
        timeout=120,
        env={**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}, **env},
        check=False,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout + p.stderr, json.loads(p.stdout)


def test_wrapped_command_line_is_redacted_by_the_agent(tmp_path: Path) -> None:
    """`validator probe --json -- torchrun ... train.py --hf-token X --password=Y`: the facts
    (what `check` reads and the preflight sends) carry neither value, and the launch options
    are still parsed from the same command."""
    out, facts = _probe(
        tmp_path,
        "torchrun", "--nnodes=2", "--nproc-per-node=4", "--master-addr=127.0.0.1", f"--master-port={free_port()}",
        "train.py", "--hf-token", SECRETS[0], f"--password={SECRETS[1]}", "--api-key", SECRETS[2],
        f"--data=s3://user:{SECRETS[3]}@bucket/x", f"WANDB_API_KEY={SECRETS[4]}",
        env={"NODE_RANK": "1"},
    )  # fmt: skip
    assert not [s for s in SECRETS if s in out], out
    launch = facts["launch"]
    assert isinstance(launch, dict)
    assert (launch["nnodes"], launch["local_world_size"], launch["world_size"]) == (2, 4, 8)
    argv = launch["command"]["argv"]
    assert (
        sum(REDACTED in w for w in argv) == 5
        and f"--password={REDACTED}" in argv
        and f"--data=s3://{REDACTED}@bucket/x" in argv
    )


def test_slurm_jwt_and_a_shell_string_are_redacted_by_the_agent(tmp_path: Path) -> None:
    """sbatch exports the submitting shell's SLURM_JWT (`scontrol token`) to every task; the README runs
    srun through `bash -c '...'`: neither the token nor the secrets inside the string reach the facts."""
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdW" + SECRETS[4] + ".c2lnbmF0dXJl"
    out, facts = _probe(
        tmp_path, "bash", "-c", f"cd /w && HF_TOKEN={SECRETS[0]} torchrun --nnodes=1 x.py --hf_token {SECRETS[1]}",
        env={"SLURM_JWT": jwt, "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_ID": "7"},
    )  # fmt: skip
    assert not [s for s in SECRETS if s in out], out
    env = facts["env"]
    assert isinstance(env, dict) and "SLURM_JWT" not in env and env.get("SLURM_JOB_ID") == "7"


def test_port_owner_command_line_is_redacted_by_the_agent(tmp_path: Path) -> None:
    """A real process holds MASTER_PORT with a password on its command line: the agent names
    it (pid and command) without the password, and so does RDZ006 in `check`."""
    port = free_port()
    own = tmp_path / "own.py"
    own.write_text(
        "import socket, sys, time\n"
        "s = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
        "s.listen()\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    argv = [sys.executable, str(own), str(port), f"--db-password={SECRETS[1]}", "--token", SECRETS[0]]
    holder = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "1"}
        out, facts = _probe(tmp_path, env=env)
        network = facts["network"]
        assert isinstance(network, dict)
        owner = network["master"]["port_owner"]
        assert owner.startswith(f"pid {holder.pid} (") and f"--db-password={REDACTED}" in owner, owner
        assert not [s for s in SECRETS if s in out], out
        path = tmp_path / "facts.json"
        path.write_text(json.dumps(facts))
        p = subprocess.run(
            [*VALIDATOR, "check", str(path), "-f", "json"], capture_output=True, text=True, timeout=60, check=False
        )
        found = [f for f in json.loads(p.stdout)["findings"] if f["code"] == "RDZ006"]
        assert found and f"pid {holder.pid}" in found[0]["message"], p.stdout
        assert not [s for s in SECRETS if s in p.stdout + p.stderr]
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_rdz006_redacts_facts_written_by_older_agents() -> None:
    job = node_job(2, 8)
    leaky = "pid 77 (python3 own.py --db-password=hunter2 --dsn postgres://app:s3cr3t@db/x)"
    job[0]["network"]["master"] = master(port_free=False, owner=leaky)
    text = json.dumps([f.to_json() for f in check(job, "RDZ006")])
    assert "RDZ006" in text and "pid 77" in text
    assert "hunter2" not in text and "s3cr3t" not in text and REDACTED in text


def test_redaction_is_idempotent() -> None:
    once = redact_argv(["--token", "x", "--password=y", "http://u:p@h", "HF_TOKEN=z"])
    assert redact_argv(once) == once and all(v not in once for v in ("x", "y", "z"))
