"""node-check never waits on DNS: with a resolver that receives the lookups and never answers (a
real UDP socket on a loopback address of its own) and a hostname that is not in /etc/hosts, the
verdict still arrives within the default 5 s budget (the agent gives a lookup 2 s)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from tests.conftest import PYTHON, ROOT, unavailable

pytestmark = [pytest.mark.root]
SILENT = "127.0.0.153"  # not nodns.sh's 127.0.0.1: tests sharing the machine keep their fast failures


def test_verdict_arrives_while_the_resolver_never_answers(tmp_path: Path) -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        unavailable("needs root and unshare (mount and UTS namespaces)")
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind((SILENT, 53))
    server.settimeout(0.2)
    queries: list[bytes] = []
    stop = threading.Event()

    def swallow() -> None:  # receive, never reply; bounded by the test's own end
        while not stop.is_set():
            try:
                queries.append(server.recv(512))
            except TimeoutError:
                continue

    t = threading.Thread(target=swallow, daemon=True)
    t.start()
    conf = tmp_path / "resolv.conf"
    conf.write_text(f"nameserver {SILENT}\noptions timeout:30 attempts:1\n")
    script = f'mount --bind {conf} /etc/resolv.conf && hostname cv-no-such-host-{os.getpid()} && exec "$@"'
    try:
        p = subprocess.run(["unshare", "-m", "-u", "sh", "-c", script, "sh", PYTHON, "-m", "validator", "node-check",
                            "--mode", "npd"], env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                           text=True, timeout=60, check=False)  # fmt: skip
    finally:
        stop.set()
        t.join(2)
        server.close()
    assert queries, "the resolver was never asked: the test did not exercise DNS"
    assert p.returncode == 0 and p.stdout.startswith("OK: node-check of "), p.stdout + p.stderr
