"""The net check on an interface whose only address is IPv6 link-local (an IPoIB or a bridge port
without IPv4: NCCL takes the first address getifaddrs gives, with its scope). Such an address binds
and connects only through its interface. The net check said NET102 "cannot listen on the address
NCCL would use" for an address NCCL itself listens on: a gate that was wrong. Now each node's
listener binds it on its interface and each prober reaches it through its own.

Real parts: two `validator preflight` processes in a network namespace of the test's own
(``unshare -n``) with a veth pair, one end carrying only ``fe80::1`` (no duplicate address detection,
so it is usable at once), NCCL_SOCKET_IFNAME naming it; a launch command naming the nccl backend
makes it a GPU job, so the net check takes NCCL's address (GPU001 says the node has no GPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, _root_with

DRIVER = """
import json, sys
from pathlib import Path
from tests.preflight.conftest import preflight, ranks
runs = preflight(Path(sys.argv[1]), ranks(2, 29500, NCCL_SOCKET_IFNAME="cvll"), "--timeout", "30", "--net-check",
                 command=["true", "--backend", "nccl"], limit=60)
print(json.dumps([{"rc": r.rc, "err": r.err, "report": r.report} for r in runs]))
"""
SETUP = ("ip link set lo up && ip link add cvll type veth peer name cvll-peer && "
         "ip link set cvll addrgenmode none && ip link set cvll-peer addrgenmode none && "
         "ip link set cvll-peer up && ip link set cvll up && ip addr add fe80::1/64 dev cvll nodad && "
         "exec \"$0\" -c \"$1\" \"$2\"")  # fmt: skip


def test_a_link_local_address_is_listened_on_and_probed_through_its_interface(tmp_path: Path) -> None:
    _root_with("unshare", "ip")
    done = subprocess.run(["unshare", "-n", "sh", "-c", SETUP, sys.executable, DRIVER, str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    for run in runs:
        assert run["report"] is not None, run["err"]
        codes = {f["code"] for f in run["report"]["findings"]}
        assert codes == {"GPU001"}, run["err"]  # no NET102: the address binds on its interface
    net = runs[0]["report"]["preflight"]["net_check"]
    assert (net["nodes"], net["probes"], net["failed"], net["measured"]) == (2, 2, 0, 1), net
    assert net["line"].startswith("net check: 2 links ok"), net


ALLREDUCE = """
import json, subprocess, sys, time
program, python = "validator/netcheck/allreduce.py", sys.executable
serve = subprocess.Popen([python, program, "serve", "fe80::1%cvll", "cvll", "20"], stdout=subprocess.PIPE, text=True)
try:
    first = json.loads(serve.stdout.readline())
    join = subprocess.run([python, program, "join", "fe80::1%cvll", str(first["port"]), first["backend"], "cvll", "20"],
                          capture_output=True, text=True, timeout=60)
    print(json.dumps({"first": first, "joined": json.loads(join.stdout.strip().splitlines()[-1])}))
finally:
    serve.kill()
    serve.wait()
"""


def test_a_named_pairs_all_reduce_runs_on_a_link_local_address() -> None:
    """The all_reduce the net check runs for a named pair (netcheck/allreduce.py, gloo here): its store and its
    connection through the scoped address, as collective.serve_argv and join_argv now give it."""
    _root_with("unshare", "ip")
    pytest.importorskip("torch")
    done = subprocess.run(["unshare", "-n", "sh", "-c", SETUP, sys.executable, ALLREDUCE, ""],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["first"]["backend"] == "gloo", got
    assert got["joined"]["allreduce"]["ranks"] == 2 and got["joined"]["allreduce"]["busbw_gbps"] > 0, got
