"""Preflight coordinator at scale, beside PyTorch's own TCPStore doing the same gather.

    python benchmarks/preflight_scale.py [N ...]        (default: 1000 5000 12500)
    python benchmarks/preflight_scale.py --missing [N]  (default 12500: 1 node in 10 never starts)
    python benchmarks/preflight_scale.py --faults [N]   (default 12500: 3 nodes carry a fault each)
    python benchmarks/preflight_scale.py --per-rank [N] (default 12500: N node leaders x 8 ranks' facts)
    python benchmarks/preflight_scale.py --checks [N]   (default 12500: the verdict's checks and report alone)

For each N: one coordinator (the real validator.preflight Coordinator and the full checks) and N
simulated participants (asyncio clients in 2 forked processes, each sending realistic 8-GPU node
facts, ~4-6 KB, differing per node as real ones do) on 127.0.0.1; time from the clients' start to
the verdict reaching every client, the coordinator's CPU a node and peak RSS, the clients' CPU. Then the same gather done by torch.distributed.TCPStore (libuv):
N clients each `set` a 2 KB blob, the master reads them all and sets a verdict every client waits
for (needs torch). Both sides run in a private mount namespace whose resolver fails fast
(tests/harness/nodns.sh) when this runs as root, because TCPStore's reverse lookups would
otherwise stall 5 s each on this machine's unreachable resolver. The last line is one JSON object:
{"ratios": {N: validator seconds / TCPStore seconds}, "runs": [...]}. With --per-rank, each
simulated participant is a node leader (validator/preflight/local.py) sending one frame with its
8 ranks' facts (rank mode, 8 x N + 8 ranks, the coordinator's own node's 7 others over one more
connection), beside the TCPStore gather of N clients; last line {"ratio": r, "runs": [...]}.
--checks: no sockets (it can run beside other tests): N + 1 nodes' facts read as the coordinator
reads them (sections.Parsed, the schema, facts.share), then what the coordinator does at the last
arrival, timed, median of 5: the checks (gate.Gate), and the report (the MISSING outcome from the
keys counted as they came, the table, the JSON, the verdict frames); last line {"checks_s": c,
"report_s": r, "seconds": c + r}.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import multiprocessing as mp
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.usage import counts, measured  # noqa: E402
from validator.preflight.coordinator import paused_gc as coord_paused_gc  # noqa: E402
from validator.preflight.coordinator import raise_nofile as coord_raise_nofile  # noqa: E402

CLIENT_PROCS = 2
CONNECTING = 256  # connects in flight per client process (nodes never all arrive in the same microsecond)


def node_facts(template: dict[str, Any], i: int, n: int, port: int) -> dict[str, Any]:
    f = copy.deepcopy(template)
    f["host"] = f["hostname"] = f"gpu{i:05d}"
    f["pid"] = 1000 + i
    launch = f["launch"]
    launch.update(launcher="torchrun", mode="node", rank=None, local_rank=None, node_rank=i, nnodes=n,
                  local_world_size=8, world_size=8 * n, master_addr="127.0.0.1", master_port=port,
                  rdzv_backend="static", rdzv_id="none", job_id="bench", nodelist=f"gpu[00000-{n - 1:05d}]")  # fmt: skip
    addr = f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"  # what differs between real nodes: addresses, clock
    for iface in f["network"]["interfaces"]:
        if not iface["loopback"] and iface["addrs"]:
            iface["addrs"] = [f"{addr}/8", *iface["addrs"][1:]]
    if f["network"]["nccl"]["addr"]:
        f["network"]["nccl"]["addr"] = f"{addr}/8"
    f["system"]["time"] += i * 1e-4
    for g in f["gpus"]["devices"]:
        g["uuid"] = f"GPU-{i:08x}-{g['index']:04x}-2222-3333-444455556666"
    f["env"].update(SLURM_NODEID=str(i), SLURMD_NODENAME=f["host"], SLURM_PROCID=str(i))
    return f


def template() -> dict[str, Any]:
    from validator import pipeline

    f: dict[str, Any] = pipeline.probe_local([], environ={}, port_check=False)
    f["gpus"] = {"source": "nvml", "driver": "550.54.15", "cuda": "12.4", "visible": None, "visible_error": None,
                 "devices": [{"index": g, "uuid": f"GPU-{g:08x}-1111-2222-3333-444455556666", "name": "NVIDIA H100 80GB HBM3",
                              "pci_bus_id": f"0000:{0x18 + g:02x}:00.0", "memory_mib": 81559, "mig_uuids": []}
                             for g in range(8)]}  # fmt: skip
    f["gpus"]["health"] = {"xid": [], "xid_source": "/dev/kmsg", "xid_error": None, "devices": [
        {"index": g, "ecc_uncorrected_volatile": 0, "ecc_corrected_volatile": 0, "ecc_uncorrected_aggregate": 0,
         "ecc_corrected_aggregate": 0, "retired_pending": None, "remap_pending": False, "remap_failure": False,
         "clock_reasons": ["gpu_idle"], "pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": 16, "pcie_width_max": 16}
        for g in range(8)]}  # fmt: skip
    f["software"].update(torch="2.13.0+cu124", torch_cuda="12.4", nccl="2.21.5", nccl_path="nvidia-nccl wheel")
    f["system"].update(somaxconn=1 << 20, nofile_soft=1048576, nofile_hard=1048576, memlock_soft=-1, memlock_hard=-1)
    f["errors"] = {}  # a healthy cluster's nodes: the findings are then exactly the injected faults
    f["env"] = {f"NCCL_VAR_{k}": "1" for k in range(10)} | {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5",
               "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "1", "OMP_NUM_THREADS": "8"}  # fmt: skip
    current(f)
    return f


def current(f: dict[str, Any]) -> None:
    """The simulated facts must be what this version's participants send, field for field: else
    the coordinator takes its slower path for an older participant's facts, and the figure
    measures that (it did, 1.2x, when the GPUs' health field was new)."""
    try:
        from validator.preflight import sections
    except ImportError:  # a validator from before the texts (to measure "before" with this same script)
        return
    ((_, exact),) = sections.Parsed().documents([sections.pieces(f)])
    if not exact:
        raise SystemExit("preflight_scale.py: the simulated facts do not match this version's facts schema exactly")


# --------------------------------------------------------------------------- validator side


def faulty(n: int, gone: set[int]) -> dict[int, str]:
    """Three nodes of a ``--faults`` run that carry a fault each: node index -> which."""
    picks = [next(i for i in range(k * n // 4, n + 1) if i not in gone) for k in (1, 2, 3)]
    return dict(zip(picks, ("nccl", "gpu", "env"), strict=True))


def inject(doc: dict[str, Any], fault: str) -> None:
    """A node's NCCL, its GPUs, or its environment made to differ from the others'."""
    if fault == "nccl":
        doc["software"] = dict(doc["software"], nccl="2.18.5")
    elif fault == "gpu":
        doc["gpus"] = dict(doc["gpus"], devices=doc["gpus"]["devices"][:7])
    else:
        doc["env"] = dict(doc["env"], NCCL_IB_DISABLE="1")


def expected(faults: dict[int, str]) -> set[tuple[str, str]]:
    """The findings the faults must produce, as (code, host): all the verdict may say."""
    codes = {"nccl": ("SW002",), "gpu": ("GPU001", "GPU003"), "env": ("ENV002",)}
    return {(code, f"gpu{i:05d}") for i, fault in faults.items() for code in codes[fault]}


def bodies_for(spec: tuple[Any, ...]) -> list[bytes]:
    """One client process's share of the simulated nodes, built in that process (the
    coordinator's process never holds them): what each sends after the hello."""
    tpl, n, port, per_rank, gone, faults, part = spec
    out = []
    for i in range(part if per_rank else part + 1, n + 1, CLIENT_PROCS):
        if i in gone:
            continue
        node = node_facts(tpl, i, n + 1, port)
        if i in faults:
            inject(node, faults[i])
        out.append(sent([rank_facts(node, i, r, n + 1) for r in range(1 if i == 0 else 0, 8)] if per_rank else [node]))
    return out


def rank_facts(node: dict[str, Any], i: int, local: int, n: int) -> dict[str, Any]:
    """Rank ``local`` of node ``i`` (per-rank mode): the node's facts with the rank's launch."""
    f = dict(node)
    f["pid"] = 1000 + 8 * i + local
    f["launch"] = dict(node["launch"], mode="rank", rank=8 * i + local, local_rank=local, node_rank=i,
                       world_size=8 * n, rdzv_backend=None)  # fmt: skip
    return f


def sent(docs: list[dict[str, Any]]) -> bytes:
    """What a participant (one doc) or a node leader (its ranks' docs) sends after the hello, as
    participant._send_facts does (no secret; a real one adds a MAC per rank): the facts header
    and the body, in sections (validator/preflight/sections.py)."""
    from validator.preflight import protocol as wire

    try:
        from validator.preflight import sections
    except ImportError:  # a validator from before the texts (to measure "before" with this same script)
        bodies = [json.dumps(d, separators=(",", ":")).encode() for d in docs]
        fields: dict[str, Any] = {"size": sum(map(len, bodies))}
        if len(docs) > 1:
            fields["ranks"] = [
                {"size": len(b), "mac": "", "token": f"t{d['pid']}"} for b, d in zip(bodies, docs, strict=True)
            ]
        body = b"".join(bodies)
    else:
        ranks = [("", f"t{d['pid']}", sections.pieces(d)) for d in docs]
        fields, body = sections.frame(ranks, True, leader=len(docs) > 1)  # type: ignore[arg-type]
    header = {"type": "facts", "proto": 1, "job_id": "bench", "mac": "", "token": f"t{docs[0]['pid']}", "quiet": True,
              "brief": True, **fields}  # fmt: skip  # brief: `validator preflight -- CMD` (participant.brief)
    return wire.encode(header) + wire.frame(body)


READY = b'\x00\x00\x00\x10{"type":"ready"}'  # protocol.encode({"type": "ready"}), framed


def clients(port: int, spec: tuple[Any, ...], q: Any, go: Any) -> None:
    """Simulated participants as asyncio Protocols (streams cost ~2x the CPU): the nodes are other
    machines in reality, so what they cost here is kept as small as TCPStore's C++ clients'. Their
    facts are built first; they start when the coordinator says ``go``."""
    from validator.preflight import protocol as wire

    class Client(asyncio.Protocol):
        def __init__(self, body: bytes, done: asyncio.Future[float], sent: asyncio.Semaphore) -> None:
            self.body, self.done, self.sent, self.buf = body, done, sent, bytearray()
            self.transport: Any = None

        def connection_made(self, transport: Any) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            self.buf += data
            while len(self.buf) >= 4 and len(self.buf) >= 4 + (size := wire.LEN.unpack_from(self.buf)[0]):
                frame = bytes(self.buf[4 : 4 + size])
                del self.buf[: 4 + size]
                # the verdict (the whole report) is not parsed here: 2 processes stand in for
                # thousands of machines that each parse their own, in parallel
                msg = {"type": "verdict"} if frame.startswith(b'{"type":"verdict"') else json.loads(frame)
                if msg["type"] == "hello":  # header and body, framed already: "quiet", no ack
                    self.transport.write(self.body)
                    self.sent.release()
                elif msg["type"] == "verdict" and frame.endswith(b'"pending":true}'):  # a pass proposed
                    self.transport.write(READY)
                elif msg["type"] != "ack":  # an older coordinator acks even so
                    assert msg["type"] in ("verdict", "go"), msg["type"]
                    self.done.set_result(time.time())
                    self.transport.close()

    async def one(body: bytes, sem: asyncio.Semaphore) -> float:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[float] = loop.create_future()
        await sem.acquire()  # released once the facts are sent
        for _ in range(200):
            try:
                await loop.create_connection(lambda: Client(body, done, sem), "127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.05)
        return await done

    async def main() -> float:
        sem = asyncio.Semaphore(CONNECTING)
        return max(await asyncio.gather(*(one(b, sem) for b in bodies)))

    coord_raise_nofile()
    gc.disable()  # thousands of simulated nodes share one process here; real participants are one each
    bodies = bodies_for(spec)
    q.put((len(bodies), sum(map(len, bodies))))
    go.wait()
    cpu0 = time.process_time()
    q.put((asyncio.run(main()), time.process_time() - cpu0))


def start_clients(spec: tuple[Any, ...]) -> tuple[list[Any], Any, Any, float]:
    """The simulated participants' processes, their facts built: (processes, their queue, the
    event that starts them, facts bytes a participant)."""
    q: Any = mp.Queue()
    go = mp.Event()
    procs = [mp.Process(target=clients, args=(spec[2], (*spec, k), q, go)) for k in range(CLIENT_PROCS)]
    for p in procs:
        p.start()
    built = [q.get() for _ in procs]  # (bodies, bytes) each: the clients' facts are ready
    return procs, q, go, sum(b for _, b in built) / sum(k for k, _ in built)


def run_floor(n: int, parse: int = 0) -> dict[str, Any]:
    """What one asyncio connection a node costs before anything is read into Python objects: the
    same clients and frames, a server that sends the hello, waits for every header and body
    (framing only: nothing parsed, checked or stored), then sends each a one-line verdict. The
    coordinator's CPU a node beside this is what parsing, checking and bookkeeping add. ``parse``
    (the "parse floor" side): the same, and each header and each text of each body through
    ``json.loads`` and nothing else, the least that any one Python process reading every node's
    facts must do (a node's texts differ from every other node's, so none is parsed once for all)."""
    from validator.preflight import coordinator as coord
    from validator.preflight import protocol as wire

    coord_raise_nofile()
    port = free_port()
    sock = coord.bind(port)
    procs, q, go, _ = start_clients((template(), n, port, 0, set(), {}))
    hello = wire.hello("bench", wire.new_nonce(), 300.0)
    verdict = wire.encode({"type": "verdict", "exit_code": 0, "text": "preflight PASSED"})

    async def serve() -> tuple[float, float]:
        done = asyncio.Event()
        arrived: list[asyncio.Transport] = []

        class Bare(asyncio.Protocol):
            def connection_made(self, transport: Any) -> None:
                self.transport, self.buf, self.frames = transport, bytearray(), 0
                transport.write(hello)

            def data_received(self, data: bytes) -> None:
                self.buf += data
                while len(self.buf) >= 4 and len(self.buf) >= 4 + (size := wire.LEN.unpack_from(self.buf)[0]):
                    if parse and self.frames == 0:
                        self.header = json.loads(self.buf[4 : 4 + size])
                    elif parse:
                        at = 4
                        for k in self.header["chunks"]:
                            json.loads(self.buf[at : at + k])
                            at += k
                    del self.buf[: 4 + size]
                    self.frames += 1
                    if self.frames == 2:  # the header, then the body
                        arrived.append(self.transport)
                        if len(arrived) == n:
                            done.set()

        server = await asyncio.get_running_loop().create_server(Bare, sock=sock, backlog=65535)
        cpu0, t0 = time.process_time(), time.time()
        go.set()
        await done.wait()
        for t in arrived:
            t.write(verdict)
            t.close()
        server.close()
        return t0, time.process_time() - cpu0

    with coord.paused_gc():
        t0, cpu = asyncio.run(serve())
    ends = [q.get() for _ in procs]
    for p in procs:
        p.join()
    return {"side": "parse floor" if parse else "floor", "n": n, "seconds": round(max(e[0] for e in ends) - t0, 2),
            "cpu_us_per_node": round(cpu / n * 1e6), "clients_cpu_s": round(sum(e[1] for e in ends), 2)}  # fmt: skip


def run_validator(
    n: int, missing_every: int = 0, deadline: float = 300.0, per_rank: int = 0, with_faults: int = 0
) -> dict[str, Any]:
    """``missing_every``: every such node (1 in 10: 10 %) never starts; the verdict must come at
    ``deadline`` (seconds after the coordinator starts) and name exactly those nodes, folded.
    ``per_rank``: per-rank mode, each simulated node a leader carrying its 8 ranks' facts.
    ``with_faults``: three nodes carry a fault each; the findings must be exactly theirs."""
    from validator import pipeline
    from validator.preflight import coordinator as coord
    from validator.preflight import protocol as wire
    from validator.preflight.gate import Gate
    from validator.preflight.plan import Options, Plan, key, missing

    class Quiet(Gate):
        """The coordinator's own policy, silent. With nodes missing it checks the arrivals while
        it waits for them, as validator.preflight.run.coordinate does (the verdict at the deadline
        reuses those findings); otherwise the bench measures the gather alone: no early verdict."""

        def decisive(self, facts: list[Any]) -> bool:
            if not missing_every:
                return False
            cpu = time.process_time()
            try:
                return super().decisive(facts)
            finally:  # not the gather's CPU: reported on its own
                phases["waiting_checks_cpu_s"] = phases.get("waiting_checks_cpu_s", 0.0) + time.process_time() - cpu

        def waiting(self, c: Any) -> None:
            return None

    from validator.targets import fold_hosts

    coord_raise_nofile()
    port = free_port()
    tpl = template()
    own = node_facts(tpl, 0, n + 1, port)
    absent = [i for i in range(1, n + 1) if missing_every and i % missing_every == missing_every // 2]
    gone = set(absent)
    faults = faulty(n, gone) if with_faults else {}
    if per_rank:
        own = rank_facts(own, 0, 0, n + 1)
    sock = coord.bind(port)
    procs, q, go, size = start_clients((tpl, n, port, per_rank, gone, faults))
    t0 = time.time()
    go.set()

    phases: dict[str, float] = {}
    names = [f"gpu{i:05d}" for i in range(n + 1)]
    seen: dict[str, Any] = {}

    async def serve() -> int:
        expected = 8 * (n + 1) if per_rank else n + 1
        plan = Plan("127.0.0.1", [port], "rank" if per_rank else "node", True, expected, expected, 0.0, "bench", names)
        c = coord.Coordinator(own, coord.expectation(plan), key(plan), "bench", None, timeout=deadline)  # type: ignore[arg-type]
        phases["deadline_at"] = time.time() + deadline
        cpu0 = time.process_time()
        gate = Quiet(Options(), plan, None)
        gathered = await c.gather(sock, gate)
        phases["gather_done_s"] = time.time() - t0
        phases["gather_cpu_s"] = time.process_time() - cpu0 - phases.get("waiting_checks_cpu_s", 0.0)
        facts = [a.facts for a in gathered.arrivals]
        outcomes = missing(plan, facts, own, gathered.seconds)  # as run.coordinate names the absent
        report = pipeline.check(facts, None, context="preflight", outcomes=outcomes, found=gate.findings(facts))
        seen.update(outcomes=[o.to_json() for o in outcomes], codes=sorted({f.code for f in report.findings}),
                    found={(f.code, fold_hosts(f.hosts)) for f in report.findings if f.code != "RNK007"})  # fmt: skip
        from validator.report.options import RenderOptions
        from validator.report.text import render_table

        text = render_table(report, RenderOptions())
        try:  # as validator.preflight.run.coordinate sends it: whole, and its line alone
            from validator.preflight.run import verdicts
        except ImportError:  # a validator from before brief verdicts (to measure "before" with this script)
            frames: Any = [wire.encode({"type": "verdict", "exit_code": report.exit_code(), "report": report.to_json(),
                                        "text": text})]  # fmt: skip
        else:
            frames = verdicts(report, report.to_json(), report.exit_code(), text, port)
        phases["checks_s"] = time.time() - t0 - phases["gather_done_s"]
        seen["connections"] = c.links()[0]
        if report.exit_code() == 0 and hasattr(c, "confirm"):  # two phases: proposed, confirmed by all, go
            t_confirm = time.time()
            lost = await c.confirm(*verdicts(report, report.to_json(), 0, text, port, pending=True))
            phases["confirm_s"] = time.time() - t_confirm
            assert not lost, f"{len(lost)} simulated participants did not confirm"
            await c.go()
        else:
            await c.deliver(*frames, linger=False)
        return len(gathered.arrivals)

    with coord.paused_gc():  # as validator.preflight.run.coordinate does
        arrived = asyncio.run(serve())
    ends = [q.get() for _ in procs]
    done, clients_cpu = max(e[0] for e in ends), sum(e[1] for e in ends)
    for p in procs:
        p.join()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    extra: dict[str, Any] = {"findings": seen["codes"], "connections": seen["connections"]}
    if missing_every:
        from validator.targets import expand, expand_ranks

        (out,) = seen["outcomes"]  # one line, folded
        hosts = out["detail"].split("expected on ", 1)[1].split("; ", 1)[0]
        ranks = out["target"].split(": ", 1)[1]
        exact = expand(hosts) == [names[i] for i in absent] and expand_ranks(ranks) == absent
        extra.update(missing=len(absent), named_exactly=exact, verdict_after_deadline_s=round(done - phases["deadline_at"], 2),
                     missing_line=f"{out['target'][:60]}... {out['detail'][:80]}...")  # fmt: skip
    if with_faults:
        want = expected(faults)
        extra.update(faults_exact=seen["found"] == want, faults=sorted(" ".join(f) for f in want))
    return {"side": "validator", "n": n, "seconds": round(done - t0, 2), "arrived": arrived, **extra,
            "coordinator_peak_rss_mib": round(rss), "facts_bytes": round(size), "clients_cpu_s": round(clients_cpu, 2),
            "coordinator_cpu_us_per_node": round(phases["gather_cpu_s"] / n * 1e6),
            **{k: round(v, 2) for k, v in phases.items() if k != "deadline_at"}}  # fmt: skip


# --------------------------------------------------------------------------- TCPStore side


def store_clients(port: int, ids: list[int], q: Any, world: int) -> None:
    from datetime import timedelta

    import torch.distributed as dist

    blob = "x" * 2048
    stores = [(i, dist.TCPStore("127.0.0.1", port, is_master=False, world_size=world, timeout=timedelta(seconds=600)))
              for i in ids]  # fmt: skip
    for i, s in stores:
        s.set(f"facts/{i}", blob)
    for _, s in stores:
        s.wait(["verdict"])
    q.put((time.time(), time.process_time()))


def run_tcpstore(n: int) -> dict[str, Any]:
    from datetime import timedelta

    import torch.distributed as dist

    coord_raise_nofile()
    port = free_port()
    q: Any = mp.Queue()
    t0 = time.time()
    procs = [mp.Process(target=store_clients, args=(port, list(range(k, n, CLIENT_PROCS)), q, n + 1))
             for k in range(CLIENT_PROCS)]  # fmt: skip
    for p in procs:
        p.start()
    master = dist.TCPStore("127.0.0.1", port, world_size=n + 1, is_master=True, wait_for_workers=True,
                           timeout=timedelta(seconds=600))  # fmt: skip
    keys = [f"facts/{i}" for i in range(n)]
    master.wait(keys)
    master.multi_get(keys)
    master.set("verdict", "pass")
    ends = [q.get() for _ in procs]
    done, clients_cpu = max(e[0] for e in ends), sum(e[1] for e in ends)
    for p in procs:
        p.join()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "side": "tcpstore",
        "n": n,
        "seconds": round(done - t0, 2),
        "master_peak_rss_mib": round(rss),
        "clients_cpu_s": round(clients_cpu, 2),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one(side: str, n: int, *more: str) -> dict[str, Any]:
    """Run one measurement in a fresh process (so peak RSS is that side's alone)."""
    cmd = [sys.executable, __file__, "--one", side, str(n), *more]
    nodns = ROOT / "tests" / "harness" / "nodns.sh"
    if os.geteuid() == 0 and shutil.which("unshare"):
        cmd = ["bash", str(nodns), *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if p.returncode != 0:
        return {"side": side, "n": n, "error": p.stderr.strip().splitlines()[-1:] or ["failed"]}
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def run_checks_alone(n: int) -> dict[str, Any]:
    """--checks: the coordinator's work at the last arrival over n + 1 nodes, without the gather."""
    import statistics

    from validator import pipeline
    from validator.facts.schema import validate_facts
    from validator.facts.share import Shared
    from validator.preflight import sections
    from validator.preflight.gate import Gate
    from validator.preflight.plan import Options, Plan, key, missing
    from validator.preflight.run import render, verdicts

    tpl, parsed, shared = template(), sections.Parsed(), Shared(across_hosts=False)
    facts = []
    for i in range(n + 1):
        ((doc, ok),) = parsed.documents([sections.pieces(node_facts(tpl, i, n + 1, 29500))])
        facts.append(shared.add(validate_facts(doc, "bench", matched=ok)))
    names = [f"gpu{i:05d}" for i in range(n + 1)]
    plan = Plan("127.0.0.1", [29500], "node", True, n + 1, n + 1, 0.0, "bench", names)
    present = set(map(key(plan), facts))  # what Coordinator.register counted as they came
    checks, report_s = [], []
    with coord_paused_gc():
        for _ in range(5):
            t0 = time.perf_counter()
            found = Gate(Options(), plan, None).findings(facts)
            t1 = time.perf_counter()
            outcomes = missing(plan, facts, facts[0], 1.0, present=present)
            report = pipeline.check(facts, None, context="preflight", outcomes=outcomes, found=found)
            text = render(report, report.exit_code(), facts, plan, 1.0, [], present)
            verdicts(report, report.to_json(), report.exit_code(), text, 29500, pending=True)
            checks.append(t1 - t0)
            report_s.append(time.perf_counter() - t1)
    c, r = statistics.median(checks), statistics.median(report_s)
    print(f"{n + 1} nodes: checks {c:.3f} s, report {r:.3f} s (median of 5; findings "
          f"{sorted({f.code for f in found}) or 'none'})", flush=True)  # fmt: skip
    return {"checks_s": round(c, 3), "report_s": round(r, 3), "seconds": round(c + r, 3), "n": n}


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        fn = {"validator": run_validator, "tcpstore": run_tcpstore, "floor": run_floor, "parse": run_floor}[argv[1]]
        argv = [*argv, "1"] if argv[1] == "parse" else argv
        print(json.dumps(fn(*(float(a) if "." in a else int(a) for a in argv[2:]))))  # type: ignore[operator]
        return
    flag, ns = counts(argv, __doc__, ("--per-rank", "--faults", "--missing", "--checks"))
    if flag == "--checks":
        measured(run_checks_alone(ns[0] if ns else 12500), ratios=False)
        return
    argv = [flag, *map(str, ns)] if flag else [str(n) for n in ns]
    if argv[:1] == ["--per-rank"]:  # issue 14 item 1: 12,500 node leaders x 8 ranks vs TCPStore of 12,500
        n = int(argv[1]) if len(argv) > 1 else 12500
        v, t = one("validator", n, "0", "300.0", "1"), one("tcpstore", n)
        ratio = round(v["seconds"] / t["seconds"], 2) if "seconds" in v and "seconds" in t else None
        print(f"{8 * (n + 1)} ranks over {v.get('connections', '?')} connections: validator {v.get('seconds', v.get('error'))} s "
              f"(coordinator RSS {v.get('coordinator_peak_rss_mib', '-')} MiB), TCPStore of {n} clients "
              f"{t.get('seconds', t.get('error'))} s", flush=True)  # fmt: skip
        measured({"ratio": ratio, "runs": [v, t]})
        return
    if argv[:1] == ["--faults"]:  # issue 14 item 5: the findings at scale are exactly the injected faults
        n = int(argv[1]) if len(argv) > 1 else 12500
        print(json.dumps(one("validator", n, "0", "300.0", "0", "1")))
        return
    if argv[:1] == ["--missing"]:  # issue 14 item 5: 10 % of nodes missing, deadline 20 s
        n = int(argv[1]) if len(argv) > 1 else 12500
        print(json.dumps(one("validator", n, "10", "20.0")))
        return
    sizes = [int(a) for a in argv] or [1000, 5000, 12500]
    ratios: dict[str, float | None] = {}
    runs: list[dict[str, Any]] = []
    print(f"{'N':>6} {'validator s':>12} {'TCPStore s':>11} {'ratio':>6} {'coord RSS MiB':>14} {'store RSS MiB':>14}")
    for n in sizes:
        v, t, f, pf = one("validator", n), one("tcpstore", n), one("floor", n), one("parse", n)
        ratio = v["seconds"] / t["seconds"] if "seconds" in v and "seconds" in t and t["seconds"] else float("nan")
        ratios[str(n)] = None if ratio != ratio else round(ratio, 2)
        runs += [v, t, f, pf]
        print(f"{n:>6} {v.get('seconds', v.get('error'))!s:>12} {t.get('seconds', t.get('error'))!s:>11} {ratio:>6.2f} "
              f"{v.get('coordinator_peak_rss_mib', '-')!s:>14} {t.get('master_peak_rss_mib', '-')!s:>14}", flush=True)  # fmt: skip
        if "gather_done_s" in v:
            print(f"        validator: all facts in at {v['gather_done_s']} s (coordinator CPU {v['gather_cpu_s']} s), "
                  f"checks+report {v['checks_s']} s, facts {v['facts_bytes']} B/node; "
                  f"{v['coordinator_cpu_us_per_node']} us CPU a node", flush=True)  # fmt: skip
        if "cpu_us_per_node" in f:
            print(f"        asyncio floor (frames only, nothing parsed): {f['seconds']} s, "
                  f"{f['cpu_us_per_node']} us CPU a node", flush=True)  # fmt: skip
        if "cpu_us_per_node" in pf and t.get("seconds"):
            print(f"        parse floor (frames, and every text through json.loads): {pf['seconds']} s, "
                  f"{pf['cpu_us_per_node']} us CPU a node, {pf['seconds'] / t['seconds']:.2f}x TCPStore", flush=True)  # fmt: skip
        if "arrived" in v and v["arrived"] != n + 1:
            print(f"  validator: only {v['arrived']} of {n + 1} participants arrived", flush=True)
    measured({"ratios": ratios, "runs": runs})


if __name__ == "__main__":
    main(sys.argv[1:])
