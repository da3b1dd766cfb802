"""The net check's listener binds one port on each address NCCL and Gloo would use. The first
address's free port can be taken on a later one, by an outgoing connection's ephemeral port, on
any busy node (it failed a CI run as NET102, "127.0.0.1 could not be bound"): the listener must
take another port, not report the address as unbindable.

Real sockets in a network namespace of the test's own (``unshare -n``), whose ephemeral range is
narrowed to four ports so that the kernel's choice is known: bind(0) takes the odd ports first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import _root_with

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import json, socket
from validator.netcheck.probe import Listener
held = []
for port in (40001, 40003):  # both odd ports of the range, held on the second address only
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    held.append(s)
out = []
for _ in range(3):
    lst = Listener(["127.0.0.2", "127.0.0.1"])
    out.append({"port": lst.port, "bound": lst.bound, "errors": lst.errors})
    lst.close()
print(json.dumps(out))
"""


def test_a_port_taken_on_a_later_address_makes_the_listener_take_another() -> None:
    _root_with("unshare", "ip", "sysctl")
    setup = 'ip link set lo up && sysctl -qw net.ipv4.ip_local_port_range="40000 40003" && exec "$0" -c "$1"'
    done = subprocess.run(["unshare", "-n", "sh", "-c", setup, sys.executable, SCRIPT],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for got in json.loads(done.stdout):
        assert got["errors"] == {}
        assert got["bound"] == ["127.0.0.2", "127.0.0.1"]
        assert got["port"] in (40000, 40002)
