"""Node-side agent: collect raw facts and print them as one JSON document.

Standard library only and self-contained, so it runs on any node with ``python3`` and can be sent
over SSH as ``python3 - < probe.py``. It never imports torch (3+ s): versions come from package
metadata and from the NCCL library itself. Every collector records its own error and the probe
never crashes. Parsing is not done here: ``validator.facts`` turns this document into facts.

    python3 probe.py [--resolve NAME]... [--argv-json '["torchrun", ...]'] [--no-port-probe]
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import resource
import socket
import subprocess
import sys
import threading
import time

TYPE_CHECKING = False  # typing costs every preflight participant ~2 ms at start (tests/preflight/test_lean.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

AGENT_SCHEMA = 1
VERSION = "0.1.0"

ALLOW_PREFIXES = (
    "NCCL_", "TORCH_", "TORCHELASTIC_", "PET_", "GLOO_", "CUDA_", "NVIDIA_", "SLURM_", "OMPI_", "PMI_",
    "PMIX_", "MPI_", "LWS_", "MASTER_", "ROLE_", "GROUP_", "DLTS_", "UCX_", "FI_", "JOBSET_", "KUBEFLOW_",
    "VALIDATOR_", "DEEPSPEED_", "DS_", "FLUX_", "MEGATRON_LM_"
)  # fmt: skip
ALLOW_NAMES = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "NNODES", "SLURMD_NODENAME",
    "JOB_COMPLETION_INDEX", "POD_NAME", "POD_NAMESPACE", "POD_IP", "HOSTNAME", "CROSS_RANK", "CROSS_SIZE",
    "LOCAL_SIZE", "OMP_NUM_THREADS", "USE_LIBUV", "LD_LIBRARY_PATH", "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT", "PYTHONPATH"
}  # fmt: skip
SECRET = re.compile(r"TOKEN|SECRET|PASS|KEY|CREDENTIAL|AUTH|PRIVATE|COOKIE|JWT|BEARER", re.I)  # SLURM_JWT
SECRET_OPTION = re.compile(r"^--?[\w.-]*(" + SECRET.pattern + r")[\w.-]*$", re.I)  # the same words as names
# values that are secrets whatever they are called: a JWT, and the token formats of common services
SECRET_VALUE = re.compile(
    r"eyJ[\w-]{6,}\.[\w-]{6,}\.[\w-]*|\b(?:hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{30,}"
    r"|glpat-[\w-]{20,}|xox[abposr]-[\w-]{10,}|AKIA[0-9A-Z]{16}|sk-[\w-]{20,})"
)
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # NAME of NAME=VALUE (env HF_TOKEN=x torchrun ...)
URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@")  # scheme://user:pass@
# user:pass@host without a scheme, as pip's --proxy and the *_proxy variables take it: user, colon, then the
# password up to the last @ before the host (a password may hold an @ too)
BARE_CREDENTIALS = re.compile(r"(?<![\w.%+/:@-])[\w.%+-]+:[^\s/]*@(?=[\w\[])")
REDACTED = "<redacted>"
MASTER_ENV = ("MASTER_ADDR", "PET_MASTER_ADDR", "LWS_LEADER_ADDRESS")
MASTER_OPTS = ("--master-addr", "--master_addr", "--rdzv-endpoint", "--rdzv_endpoint")
PORT_ENV = ("MASTER_PORT", "PET_MASTER_PORT")
PORT_OPTS = ("--master-port", "--master_port")
RANK0_ENV = (
    "RANK", "NODE_RANK", "GROUP_RANK", "PET_NODE_RANK", "SLURM_NODEID", "SLURM_PROCID", "JOB_COMPLETION_INDEX",
    "LWS_WORKER_INDEX", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "FLUX_TASK_RANK", "CROSS_RANK"
)  # fmt: skip
NODE_RANK_OPTS = ("--node-rank", "--node_rank")
RESOLVE_TIMEOUT_S = 2.0


def filtered_env(environ: dict[str, str]) -> dict[str, str]:
    """The environment variables worth comparing across nodes; secrets are never collected
    (names that look secret are dropped, URL credentials in values are redacted)."""
    return {
        k: redact(v)
        for k, v in environ.items()
        if (k in ALLOW_NAMES or k.startswith(ALLOW_PREFIXES)) and not SECRET.search(k)
    }


def launch_env(argv: list[str], environ: dict[str, str]) -> dict[str, str]:
    """The environment the launched command gets: an ``env`` word in ``argv`` (``srun env
    NCCL_SOCKET_IFNAME=ib0 torchrun …``, or under another wrapper) changes it by its ``-i``, ``-u
    NAME`` and ``NAME=VALUE`` words, up to the command it runs. A form not read here (``-S``) ends it."""
    env, words = dict(environ), iter(argv)
    for word in words:
        if word.endswith(".py") or word == "-m":
            break  # the script's own arguments: an "env" there is not the command
        if os.path.basename(word) != "env":
            continue
        for a in words:
            name, eq, value = a.partition("=")
            if a in ("-i", "--ignore-environment", "-"):
                env = {}
            elif a in ("-u", "--unset"):
                env.pop(next(words, ""), None)
            elif name == "--unset" and eq:
                env.pop(value, None)
            elif a in ("-C", "--chdir"):
                next(words, None)
            elif a.startswith("-") and not a.startswith(("-S", "--split-string")):
                continue  # -0, -v, --debug, -C=DIR
            elif eq and ASSIGNMENT.match(name):
                env[name] = value
            else:
                break  # the command env runs (or -S, not read)
    return env


def redact(text: str) -> str:
    """``scheme://user:pass@host`` -> ``scheme://<redacted>@host`` (``user:pass@host`` without a
    scheme -> ``<redacted>@host``), and a value that is a secret by
    its form (SECRET_VALUE: a JWT, ``hf_…``, ``ghp_…``, ``AKIA…``), anywhere in ``text``."""
    if "://" in text:
        text = URL_CREDENTIALS.sub(r"\1" + REDACTED + "@", text)
    if "@" in text:
        text = BARE_CREDENTIALS.sub(REDACTED + "@", text)
    return SECRET_VALUE.sub(REDACTED, text)


def redact_argv(argv: list[str]) -> list[str]:
    """A command line with its secrets hidden, before it leaves the node (docs/facts.md,
    "Secrets"): the value of every option whose name contains token, key, secret, password,
    passwd or credential (``--hf-token V`` and ``--db-password=V``; the next word is taken as
    the value unless it starts with ``--``), of ``NAME=VALUE`` words whose name looks secret
    (``HF_TOKEN=V``), and URL credentials anywhere. Conservative: ``--key-file PATH`` loses its
    path too."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next and not word.startswith("--"):
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, _ = word.partition("=")
        if SECRET_OPTION.match(name):
            hide_next = not eq
            out.append(f"{name}={REDACTED}" if eq else word)
        elif eq and ASSIGNMENT.match(name) and SECRET.search(name):
            hide_next = False
            out.append(f"{name}={REDACTED}")
        elif " " in word.strip():  # a command as one word (bash -c '... --hf_token V'): its words too
            hide_next = False
            inner = " ".join(redact_argv(word.split(" ")))
            out.append(word if inner == word else inner)
        else:
            hide_next = False
            out.append(redact(word))
    return out


def redact_command(text: str) -> str:
    """``redact_argv`` for a command line quoted as one string, as ``port_owner`` writes it
    (``pid 7 (python3 own.py --db-password=x)``); words are split at spaces."""
    inner = re.fullmatch(r"(pid \d+ \()(.*)(\))", text, re.S)
    if inner:
        return inner.group(1) + redact_command(inner.group(2)) + inner.group(3)
    return " ".join(redact_argv(text.split(" ")))


def run(cmd: list[str], timeout: float = 10.0) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[:300]}")
    return p.stdout


def read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


# ----------------------------------------------------------------------------- network


def interfaces() -> dict[str, Any]:
    """`ip -j addr` output when iproute2 is there, else the same shape from ioctls."""
    try:
        links = json.loads(run(["ip", "-j", "-d", "addr", "show"], timeout=5))
        return {"ip_addr": [_slim(link) for link in links]}
    except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
        return {"ip_addr": _ifaddrs_fallback(), "ip_error": str(e)}


def _slim(link: dict[str, Any]) -> dict[str, Any]:
    """Keep what the facts use; `ip -d` prints dozens of fields per link."""
    out: dict[str, Any] = {k: link[k] for k in ("ifname", "flags", "mtu", "operstate") if k in link}
    kind = (link.get("linkinfo") or {}).get("info_kind")
    if kind:
        out["kind"] = kind
    out["addr_info"] = [
        {k: a[k] for k in ("family", "local", "prefixlen", "scope") if k in a} for a in link.get("addr_info", [])
    ]
    return out


def _ifaddrs_fallback() -> list[dict[str, Any]]:
    import fcntl
    import struct

    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            entry: dict[str, Any] = {"ifname": name, "addr_info": [], "flags": []}
            packed = struct.pack("256s", name.encode()[:15])
            try:
                flags = struct.unpack("H", fcntl.ioctl(s.fileno(), 0x8913, packed)[16:18])[0]
                entry["flags"] = [f for bit, f in ((1, "UP"), (8, "LOOPBACK"), (64, "RUNNING")) if flags & bit]
                entry["operstate"] = "UP" if flags & 64 else "DOWN"
            except OSError:
                pass
            try:
                addr = socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, packed)[20:24])
                mask = socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x891B, packed)[20:24])
                plen = bin(int.from_bytes(socket.inet_aton(mask), "big")).count("1")
                entry["addr_info"].append({"family": "inet", "local": addr, "prefixlen": plen})
            except OSError:
                pass
            out.append(entry)
    try:  # IPv6: /proc/net/if_inet6 = addr ifindex plen scope flags name
        for line in read("/proc/net/if_inet6").splitlines():
            hexaddr, _, plen_hex, scope, _, name = line.split()
            addr6 = socket.inet_ntop(socket.AF_INET6, bytes.fromhex(hexaddr))
            for e in out:
                if e["ifname"] == name:
                    e["addr_info"].append(
                        {
                            "family": "inet6",
                            "local": addr6,
                            "prefixlen": int(plen_hex, 16),
                            "scope": "link" if scope == "20" else "global",
                        }
                    )
    except OSError:
        pass
    return out


def sysfs_net() -> dict[str, dict[str, str | bool]]:
    out: dict[str, dict[str, str | bool]] = {}
    base = "/sys/class/net"
    for name in sorted(os.listdir(base)):
        d: dict[str, str | bool] = {"virtual": os.path.exists(f"/sys/devices/virtual/net/{name}")}
        for attr in ("mtu", "speed", "operstate", "flags", "type"):
            with contextlib.suppress(OSError):
                d[attr] = read(f"{base}/{name}/{attr}").strip()
        try:
            m = re.search(r"^DEVTYPE=(\S+)", read(f"{base}/{name}/uevent"), re.M)
            if m:
                d["devtype"] = m.group(1)
        except OSError:
            pass
        out[name] = d
    return out


def resolve(names: list[str], timeout: float = RESOLVE_TIMEOUT_S) -> dict[str, dict[str, Any]]:
    """getaddrinfo for each name in parallel daemon threads, each bounded by ``timeout``.

    Broken DNS must not stall the probe: a lookup that has not answered in time is recorded as
    timed out, and its thread is abandoned (daemon, so it cannot hold the process at exit).
    """
    results: dict[str, dict[str, Any]] = {}

    def one(name: str) -> None:
        try:
            infos = socket.getaddrinfo(_ascii_host(name), None, proto=socket.IPPROTO_TCP)
            addrs: list[str] = []
            for fam, *_, sa in infos:
                if fam in (socket.AF_INET, socket.AF_INET6) and sa[0] not in addrs:
                    addrs.append(str(sa[0]))
            results[name] = {"addrs": addrs}
        except OSError as e:
            results[name] = {"addrs": [], "error": f"{type(e).__name__}: {e}"}
        except (UnicodeError, ValueError) as e:  # "gpu..a01", a NUL or a non-UTF-8 byte: no lookup is made
            results[name] = {"addrs": [], "error": f"not a valid host name ({str(e)[:120]})"}

    threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in names]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    for n in names:
        results.setdefault(n, {"addrs": [], "error": f"lookup timed out after {timeout:g}s"})
    return dict(results)


def _ascii_host(name: str) -> str | bytes:
    """``name`` as bytes when the idna codec would pass it through unchanged (ASCII, labels of
    1-63 characters), which spares every rank loading that codec (1 ms); else ``name`` itself."""
    labels = name.split(".")
    ok = name.isascii() and all(0 < len(x) < 64 for x in labels[:-1]) and len(labels[-1]) < 64
    return name.encode("ascii") if ok else name


def route_src(addr: str) -> str:
    """The source address the kernel would use to reach ``addr`` (UDP connect sends nothing)."""
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        s.connect((addr, 9))
        return str(s.getsockname()[0])


def port_probe(port: int) -> dict[str, Any]:
    """Can this node bind ``port`` (as the master's TCPStore will)? If not, who holds it."""
    try:
        with socket.socket(socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as TCPStore does
            if s.family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.bind(("", port))
        return {"port": port, "free": True}
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            return {"port": port, "free": None, "error": str(e)}
        return {"port": port, "free": False, "owner": port_owner(port) or held_by(port)}


def held_by(port: int) -> str:
    """Who holds ``port`` where nothing listens on it (what the owner of a refused bind is then)."""
    owner = port_owner(port, listening=False)
    return f"{owner or 'a socket'} as a connection's own port, not a listener"


def port_owner(port: int, budget_s: float = 1.0, listening: bool = True) -> str | None:
    """pid and command line of the process listening on ``port``, from /proc (best effort). Not
    ``listening``: of one whose socket holds ``port`` as its own without listening (an outgoing
    connection's local port), which keeps a listener from binding it just the same."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            for line in read(table).splitlines()[1:]:
                f = line.split()
                # 0A = LISTEN; 06 TIME_WAIT has no owner (inode 0) and does not stop SO_REUSEADDR's bind
                held = f[3] == "0A" if listening else f[3] not in ("0A", "06") and f[9] != "0"
                if held and int(f[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f[9])
        except (OSError, IndexError, ValueError):
            continue
    if not inodes:
        return None
    targets = {f"socket:[{i}]" for i in inodes}
    deadline = time.monotonic() + budget_s
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if time.monotonic() > deadline:
            return "unknown (search timed out)"
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in targets:
                    cmd = " ".join(redact_argv(read(f"/proc/{pid}/cmdline").rstrip("\0").split("\0")))
                    return f"pid {pid} ({' '.join(cmd.split())[:200]})"  # with held_by's words: within 300
        except OSError:
            continue
    return "another user's process (not readable)"


# ----------------------------------------------------------------------------- GPUs


def nvml() -> dict[str, Any]:
    """GPU facts from libnvidia-ml through ctypes (no Python bindings needed)."""
    lib = ctypes.CDLL("libnvidia-ml.so.1")

    def check(rc: int, what: str) -> None:
        if rc != 0:
            lib.nvmlErrorString.restype = ctypes.c_char_p
            raise RuntimeError(f"{what}: {lib.nvmlErrorString(rc).decode()} ({rc})")

    def text(fn: Callable[..., int], *args: Any, size: int = 96) -> str:
        buf = ctypes.create_string_buffer(size)
        check(fn(*args, buf, ctypes.c_uint(size)), fn.__name__)
        return buf.value.decode()

    class Pci(ctypes.Structure):
        _fields_ = [
            ("busIdLegacy", ctypes.c_char * 16),
            ("domain", ctypes.c_uint),
            ("bus", ctypes.c_uint),
            ("device", ctypes.c_uint),
            ("pciDeviceId", ctypes.c_uint),
            ("pciSubSystemId", ctypes.c_uint),
            ("busId", ctypes.c_char * 32),
        ]

    class Mem(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

    check(lib.nvmlInit_v2(), "nvmlInit")
    try:
        out: dict[str, Any] = {"driver": text(lib.nvmlSystemGetDriverVersion), "devices": []}
        cuda = ctypes.c_int()
        if lib.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(cuda)) == 0:
            out["cuda_driver_version"] = cuda.value
        count = ctypes.c_uint()
        check(lib.nvmlDeviceGetCount_v2(ctypes.byref(count)), "nvmlDeviceGetCount")
        for i in range(count.value):
            h = ctypes.c_void_p()
            check(lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)), "GetHandleByIndex")
            pci, mem = Pci(), Mem()
            check(lib.nvmlDeviceGetPciInfo_v3(h, ctypes.byref(pci)), "GetPciInfo")
            dev: dict[str, Any] = {
                "index": i,
                "uuid": text(lib.nvmlDeviceGetUUID, h),
                "name": text(lib.nvmlDeviceGetName, h),
                "pci_bus_id": pci.busId.decode(),
                "mig": [],
            }
            if lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(mem)) == 0:
                dev["memory_total"] = mem.total
            cur, pend = ctypes.c_uint(), ctypes.c_uint()
            if lib.nvmlDeviceGetMigMode(h, ctypes.byref(cur), ctypes.byref(pend)) == 0 and cur.value:
                n = ctypes.c_uint()
                lib.nvmlDeviceGetMaxMigDeviceCount(h, ctypes.byref(n))
                for j in range(n.value):
                    mh = ctypes.c_void_p()
                    if lib.nvmlDeviceGetMigDeviceHandleByIndex(h, j, ctypes.byref(mh)) == 0:
                        dev["mig"].append(text(lib.nvmlDeviceGetUUID, mh))
            try:  # health never costs the inventory
                dev["health"] = nvml_health(lib, h)
            except Exception as e:  # noqa: BLE001 - a driver without a symbol or a lost GPU fails its own way
                dev["health"] = {"error": f"{type(e).__name__}: {e}"[:200]}
            out["devices"].append(dev)
        return out
    finally:
        lib.nvmlShutdown()


# GPU health, read through NVML by the signatures of nvml.h (NVIDIA/go-nvml gen/nvml/nvml.h, driver
# 580): nvmlDeviceGetTotalEccErrors(device, nvmlMemoryErrorType_t CORRECTED=0|UNCORRECTED=1,
# nvmlEccCounterType_t VOLATILE=0|AGGREGATE=1, unsigned long long *), nvmlDeviceGetRetiredPagesPendingStatus
# (device, nvmlEnableState_t *) (pre-Ampere), nvmlDeviceGetRemappedRows(device, unsigned int *corrRows,
# *uncRows, *isPending, *failureOccurred) (Ampere and newer), nvmlDeviceGetCurrentClocksEventReasons(device,
# unsigned long long *) (before driver 535: ...ClocksThrottleReasons, the same bits), and
# nvmlDeviceGetCurrPcieLinkGeneration/Width, nvmlDeviceGetMaxPcieLinkGeneration/Width(device, unsigned int *)
# (the max "possible with this device and system"). A call the device or driver does not support leaves
# its key out: unknown, never 0.
NVML_ECC = {
    "ecc_uncorrected_volatile": (1, 0), "ecc_corrected_volatile": (0, 0),
    "ecc_uncorrected_aggregate": (1, 1), "ecc_corrected_aggregate": (0, 1),
}  # fmt: skip
NVML_PCIE = {
    "pcie_gen": "nvmlDeviceGetCurrPcieLinkGeneration", "pcie_gen_max": "nvmlDeviceGetMaxPcieLinkGeneration",
    "pcie_width": "nvmlDeviceGetCurrPcieLinkWidth", "pcie_width_max": "nvmlDeviceGetMaxPcieLinkWidth",
}  # fmt: skip


def nvml_health(lib: Any, h: Any) -> dict[str, Any]:
    """One GPU's health counters, raw (parsed by validator.facts.gpu.parse_health)."""

    def call(name: str, *args: Any) -> bool:
        fn = getattr(lib, name, None)  # None: a driver older than the function
        return fn is not None and fn(h, *args) == 0

    out: dict[str, Any] = {}
    big, small = ctypes.c_ulonglong, ctypes.c_uint
    for key, (error_type, counter) in NVML_ECC.items():
        n = big()
        if call("nvmlDeviceGetTotalEccErrors", error_type, counter, ctypes.byref(n)):
            out[key] = n.value
    pending = small()
    if call("nvmlDeviceGetRetiredPagesPendingStatus", ctypes.byref(pending)):
        out["retired_pending"] = pending.value
    rows = [small() for _ in range(4)]
    if call("nvmlDeviceGetRemappedRows", *map(ctypes.byref, rows)):
        out["remapped_rows"] = [r.value for r in rows]  # correctable, uncorrectable, pending, failure
    reasons = big()
    if call("nvmlDeviceGetCurrentClocksEventReasons", ctypes.byref(reasons)) or call(
        "nvmlDeviceGetCurrentClocksThrottleReasons", ctypes.byref(reasons)
    ):
        out["clocks_event_reasons"] = reasons.value
    for key, name in NVML_PCIE.items():
        link = small()  # a generation or a lane count
        if call(name, ctypes.byref(link)):
            out[key] = link.value
    return out


SMI_FIELDS = "index,uuid,name,pci.bus_id,memory.total,driver_version"
# The health fields of `nvidia-smi --help-query-gpu` ([N/A] or [Not Supported] where the device has no
# such counter). A field an older nvidia-smi does not know fails the whole query, so these go in a
# query of their own, newest spelling first: clocks_event_reasons.active (driver 535 and newer) was
# clocks_throttle_reasons.active, and remapped_rows.* are not --query-gpu fields on older drivers.
SMI_HEALTH = (
    "index,ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.volatile.total,"
    "ecc.errors.uncorrected.aggregate.total,ecc.errors.corrected.aggregate.total,retired_pages.pending,"
    "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max"
)
SMI_HEALTH_QUERIES = (
    SMI_HEALTH + ",remapped_rows.pending,remapped_rows.failure,clocks_event_reasons.active",
    SMI_HEALTH + ",remapped_rows.pending,remapped_rows.failure,clocks_throttle_reasons.active",
    SMI_HEALTH + ",clocks_throttle_reasons.active",
)
SMI_MAX = 64 << 10  # bytes of one query's output kept


def nvidia_smi() -> dict[str, Any]:
    out = run(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv"], timeout=15)
    return {"query": SMI_FIELDS, "csv": out, "health": smi_health()}


def smi_health() -> dict[str, Any]:
    """The health query, by the first spelling this nvidia-smi accepts; its error, never raised."""
    error = ""
    for query in SMI_HEALTH_QUERIES:
        try:
            csv = run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"], timeout=10)
            return {"query": query, "csv": csv[:SMI_MAX]}
        except subprocess.TimeoutExpired:
            return {"error": "nvidia-smi timed out after 10s"}
        except (OSError, RuntimeError) as e:
            error = str(e)[:300]
    return {"error": error}


# Xid events: the NVIDIA driver's `NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the bus.`
# lines of the kernel log, read from /dev/kmsg without blocking (else `dmesg`), bounded in time and size.
XID_MARK = "NVRM: Xid"
XID_MAX = 64  # the most recent events kept
XID_TEXT = 300  # characters of one line kept
XID_BUDGET_S = 1.0
XID_RECORDS = 1 << 20  # kernel log records read at most


def xid_events(kmsg: str = "/dev/kmsg") -> dict[str, Any]:
    """The Xid lines of the kernel log as [age in seconds or null, line]; where the log cannot be
    read (dmesg_restrict without CAP_SYSLOG, no /dev/kmsg in a container), its error instead."""
    try:
        fd = os.open(kmsg, os.O_RDONLY | os.O_NONBLOCK)
        try:
            return {"source": kmsg, "events": kmsg_xids(fd)}
        finally:
            os.close(fd)
    except OSError as e:
        first = f"{kmsg}: {e.strerror or e}"
    try:
        text = run(["dmesg"], timeout=2)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
        return {"source": None, "error": f"{first}; dmesg: {e}"[:300]}
    now, events = time.monotonic(), []
    for line in text.splitlines():
        if XID_MARK in line:
            m = re.match(r"\[\s*(\d+(?:\.\d+)?)\]\s?(.*)", line)
            age = round(now - float(m.group(1)), 1) if m else None
            events.append([age, (m.group(2) if m else line)[:XID_TEXT]])
    return {"source": "dmesg", "events": events[-XID_MAX:]}


def kmsg_xids(fd: int) -> list[list[Any]]:
    """The Xid records of a non-blocking /dev/kmsg descriptor (one ``prio,seq,usec,flags;text``
    record a read), oldest first, read until EAGAIN: the last XID_MAX, within XID_BUDGET_S."""
    events: list[list[Any]] = []
    now_us, deadline = time.monotonic() * 1e6, time.monotonic() + XID_BUDGET_S
    for _ in range(XID_RECORDS):
        try:
            record = os.read(fd, 8192)
        except BlockingIOError:
            break  # the end of the log
        except BrokenPipeError:
            continue  # a record overwritten while we read: the next one follows
        if not record or time.monotonic() > deadline:
            break
        head, _, text = record.decode("utf-8", "replace").partition(";")
        if XID_MARK in text:
            fields = head.split(",")
            usec = fields[2] if len(fields) > 2 and fields[2].isdecimal() else None
            age = round((now_us - int(usec)) / 1e6, 1) if usec else None
            events.append([age, text.split("\n", 1)[0][:XID_TEXT]])
            if len(events) > XID_MAX:
                del events[0]
    return events


def proc_nvidia() -> dict[str, Any]:
    base = "/proc/driver/nvidia"
    gpus = {}
    if os.path.isdir(f"{base}/gpus"):
        for bus in sorted(os.listdir(f"{base}/gpus")):
            gpus[bus] = read(f"{base}/gpus/{bus}/information")
    return {"version": read(f"{base}/version"), "gpus": gpus}


GPU_SOURCES: dict[str, Callable[[], dict[str, Any]]] = {
    "nvml": nvml,
    "nvidia-smi": nvidia_smi,
    "proc": proc_nvidia,
}


def gpus(sources: list[str], errors: dict[str, str]) -> dict[str, Any] | None:
    """The first source that works, in order. None: no GPU stack on this node (a fact, not an
    error); a source that exists but fails is recorded in ``errors``."""
    for name in sources:
        try:
            found = {"source": name, "data": GPU_SOURCES[name]()}
        except (FileNotFoundError, NotADirectoryError):
            continue  # no nvidia-smi, no /proc/driver/nvidia: nothing to report
        except OSError as e:
            if "libnvidia-ml" in str(e):
                continue  # NVML library absent
            errors[f"gpu.{name}"] = f"{type(e).__name__}: {e}"[:300]
            continue
        except Exception as e:  # noqa: BLE001 - a broken GPU stack fails in its own ways; recorded, never raised
            errors[f"gpu.{name}"] = f"{type(e).__name__}: {e}"[:300]
            continue
        try:  # only where a GPU stack answered: a node without one reads no kernel log
            found["xid"] = xid_events()
        except Exception as e:  # noqa: BLE001 - never fails the agent
            found["xid"] = {"source": None, "error": f"{type(e).__name__}: {e}"[:300]}
        return found
    return None


# ----------------------------------------------------------------------------- software


DISTRIBUTIONS = ("torch", "deepspeed", "transformers", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-nccl-cu11",
                 "accelerate", "megatron-core")  # fmt: skip


def packages() -> dict[str, Any]:
    """Installed versions, from the first ``NAME-VERSION.dist-info`` on sys.path, as importlib.metadata
    finds them (without its 25 ms import: this runs once per rank at launch)."""
    from importlib import util

    wanted = {d.replace("-", "_").lower(): d for d in DISTRIBUTIONS}
    out: dict[str, Any] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info") and "-" in name:
                dist, version = name[: -len(".dist-info")].split("-", 1)
                key = wanted.get(dist.replace("-", "_").replace(".", "_").lower())
                if key and key not in out:
                    out[key] = version
    spec = util.find_spec("torch")  # locates the package without importing it
    if spec and spec.submodule_search_locations:
        base = next(iter(spec.submodule_search_locations))
        with contextlib.suppress(OSError):
            out["torch_version_py"] = read(os.path.join(base, "version.py"))[:4000]
    return out


def nccl_candidates() -> list[str]:
    """Where torch would load NCCL from: NCCL_LIB, the nvidia-nccl wheel, then the loader's own
    search (LD_LIBRARY_PATH, ld.so.cache). Not ctypes.util.find_library, which may spawn gcc."""
    from importlib import util

    paths = []
    if os.environ.get("NCCL_LIB"):
        paths.append(os.environ["NCCL_LIB"])
    spec = util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        paths.append(os.path.join(base, "nccl", "lib", "libnccl.so.2"))
    paths.append("libnccl.so.2")
    return paths


def nccl() -> dict[str, Any]:
    """Version of the NCCL library that would load, from ncclGetVersion (no CUDA init)."""
    tried = []
    for path in nccl_candidates():
        if os.path.isabs(path) and not os.path.exists(path):
            continue
        tried.append(path)
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        v = ctypes.c_int()
        if lib.ncclGetVersion(ctypes.byref(v)) == 0:
            return {"path": path, "code": v.value}
    return {"path": None, "code": None, "tried": tried}


# ----------------------------------------------------------------------------- system


def limits() -> dict[str, Any]:
    def pair(which: int) -> list[int]:
        soft, hard = resource.getrlimit(which)
        return [-1 if x == resource.RLIM_INFINITY else x for x in (soft, hard)]

    out: dict[str, Any] = {"memlock": pair(resource.RLIMIT_MEMLOCK), "nofile": pair(resource.RLIMIT_NOFILE)}
    st = os.statvfs("/dev/shm")
    out["shm_bytes"] = st.f_blocks * st.f_frsize
    return out


def sysctl() -> dict[str, str]:
    return {"somaxconn": read("/proc/sys/net/core/somaxconn").strip()}


def ib_devices() -> list[str]:
    try:
        return sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        return []


IB_ROOT = "/sys/class/infiniband"
IB_MAX = {"devices": 64, "ports": 4, "gid_slots": 128, "gap": 16, "gids": 16, "files": 4096}
ZERO_GIDS = ("0000:0000:0000:0000:0000:0000:0000:0000", "fe80:0000:0000:0000:0000:0000:0000:0000")


def _natural(name: str) -> tuple[str, int]:
    """``mlx5_2`` before ``mlx5_10``, ``2`` before ``10``."""
    stem = name.rstrip("0123456789")
    return stem, int(name[len(stem) :] or -1)


def ib_sysfs(root: str = IB_ROOT, budget_s: float = 1.0) -> dict[str, Any]:
    """RDMA devices and ports as sysfs shows them (what `ibstat`/`ibstatus`/`show_gids` print):
    each port's state, phys_state, rate, link_layer and its populated GIDs with their RoCE type
    and netdev. Bounded (IB_MAX devices, ports, GID slots, files read; ``budget_s``); a file that
    cannot be read is an entry of ``errors``, never an exception."""
    errors: dict[str, str] = {}
    deadline, reads = time.monotonic() + budget_s, [0]

    def text(path: str, quiet: bool = False) -> str | None:
        if reads[0] >= IB_MAX["files"] or time.monotonic() > deadline:
            errors.setdefault("limit", f"stopped after {reads[0]} files or {budget_s:g}s")
            return None
        reads[0] += 1
        try:
            with open(path, "rb") as f:
                return f.read(256).decode("utf-8", "replace").strip()
        except OSError as e:  # EINVAL: a GID slot not mapped into this container (NCCL skips it too)
            if not quiet and not isinstance(e, FileNotFoundError) and e.errno != errno.EINVAL and len(errors) < 8:
                errors[os.path.relpath(path, root)] = (e.strerror or type(e).__name__)[:80]
            return None

    def names(path: str, limit: int) -> list[str]:
        try:
            found = os.listdir(path)
        except FileNotFoundError:
            return []
        except OSError as e:
            errors[os.path.relpath(path, root)] = (e.strerror or type(e).__name__)[:80]
            return []
        return sorted(found, key=_natural)[:limit]

    devices = []
    for dev in names(root, IB_MAX["devices"]):
        d = os.path.join(root, dev)
        ports = []
        for p in names(os.path.join(d, "ports"), IB_MAX["ports"]):
            pd = os.path.join(d, "ports", p)
            port: dict[str, Any] = {"port": p}
            port.update({k: text(os.path.join(pd, k)) for k in ("state", "phys_state", "rate", "link_layer")})
            gids: list[list[Any]] = []
            slots = 2 if port["link_layer"] == "InfiniBand" else IB_MAX["gid_slots"]  # IB: NCCL uses index 0 (or 1)
            seen = gap = 0  # stop after IB_MAX["gap"] empty slots in a row: tables fill from the start
            for g in names(os.path.join(pd, "gids"), slots):
                if gap >= IB_MAX["gap"] or len(gids) >= IB_MAX["gids"]:
                    break
                seen += 1
                gid = text(os.path.join(pd, "gids", g), quiet=True)
                gap = gap + 1 if not gid or gid in ZERO_GIDS else 0
                if not gap:
                    attrs = [text(os.path.join(pd, "gid_attrs", a, g), quiet=True) for a in ("types", "ndevs")]
                    gids.append([int(g) if g.isdecimal() else g, gid, *attrs])
            port["gids"], port["gid_slots"] = gids, seen
            ports.append(port)
        devices.append({
            "name": dev,
            "node_guid": text(os.path.join(d, "node_guid")),
            "fw_ver": text(os.path.join(d, "fw_ver")),
            "netdevs": names(os.path.join(d, "device", "net"), 8),
            "ports": ports,
        })  # fmt: skip
    return {"devices": devices, "errors": errors}


# ----------------------------------------------------------------------------- driver


# ----------------------------------------------------------------------------- job configuration

# Files the job's command line names that say its parallel layout (docs/layout.md): read here, on
# the node, where the job will read them. Only the layout's keys leave the node, never the file.
CONFIG_OPTS = {
    "--deepspeed_config": "deepspeed", "--deepspeed-config": "deepspeed", "--deepspeed": "deepspeed",
    "--ds_config": "deepspeed", "--ds-config": "deepspeed", "--job.config_file": "torchtitan",
    "--job.config-file": "torchtitan", "--config_file": "accelerate", "--config-file": "accelerate",
}  # fmt: skip
CONFIG_KEYS = {
    "deepspeed": (
        "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
        "zero_optimization.stage", "tensor_parallel.autotp_size", "tensor_parallel.tp_size",
    ),
    "torchtitan": (
        "parallelism.data_parallel_replicate_degree", "parallelism.data_parallel_shard_degree",
        "parallelism.tensor_parallel_degree", "parallelism.pipeline_parallel_degree",
        "parallelism.context_parallel_degree", "parallelism.expert_parallel_degree",
        "parallelism.expert_tensor_parallel_degree", "training.local_batch_size", "training.global_batch_size",
        "parallelism.pipeline_parallel_microbatch_size",
    ),
    # accelerate's config, one level flattened (accelerate copies megatron_lm_config.x, ... to its options)
    "accelerate": (
        "distributed_type", "num_processes", "num_machines", "fsdp_version", "megatron_lm_tp_degree",
        "megatron_lm_pp_degree", "megatron_lm_context_parallel_size", "megatron_lm_expert_model_parallel_size",
        "megatron_lm_expert_tensor_parallel_size", "parallelism_config_dp_replicate_size",
        "parallelism_config_dp_shard_size", "parallelism_config_tp_size", "parallelism_config_cp_size",
        "parallelism_config_sp_size", "fsdp_sharding_strategy",
        # its launch values (facts/launch.py _from_accelerate): the command line's, else these
        "machine_rank", "main_process_ip", "main_process_port", "compute_environment",
    ),
}  # fmt: skip
CONFIG_MAX = 256 << 10  # bytes of one configuration file
CONFIG_FILES = 4  # files read at most


def accelerate_options(argv: list[str]) -> int:
    """How many words of ``argv`` are `accelerate launch` and its options (up to the script); 0:
    not accelerate. Only there is ``--config_file`` accelerate's (the controller parses exactly)."""
    prog = os.path.basename(argv[0]) if argv else ""
    start = 2 if prog == "accelerate" and argv[1:2] == ["launch"] else 1 if prog == "accelerate-launch" else 0
    if not start:
        return 0
    return next((i for i in range(start, len(argv)) if argv[i].endswith(".py") or argv[i - 1] in ("-m", "--module")),
                len(argv))  # fmt: skip


def accelerate_default(env: dict[str, str]) -> str:
    """accelerate's default config (commands/config/config_args.py: default_config_file)."""
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return os.path.join(os.path.expanduser(home), "accelerate", "default_config.yaml")


def job_configs(argv: list[str], env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The layout keys of the configuration files named on the command line, each with its error;
    for `accelerate launch` without --config_file (nor --cpu), its default config if there is one."""
    out: list[dict[str, Any]] = []
    acc = accelerate_options(argv)
    named = [(w.partition("=")[0], i) for i, w in enumerate(argv)]
    for name, i in named:
        word = argv[i]
        kind = CONFIG_OPTS.get(name)
        path = word.partition("=")[2] if "=" in word else argv[i + 1] if i + 1 < len(argv) else ""
        if kind is None or not path or path.startswith("-") or len(out) >= CONFIG_FILES:
            continue
        if name == "--deepspeed" and not path.endswith(".json"):
            continue  # DeepSpeed's own --deepspeed is a flag; HF's takes the config's path
        if kind == "accelerate" and i >= acc:
            continue  # a --config_file of the script, not accelerate's
        out.append(config_entry(name, path, kind))
    default = accelerate_default(dict(os.environ) if env is None else env)
    given = any(n in ("--config_file", "--config-file", "--cpu") for n, _ in named[:acc])
    if acc and not given and os.path.isfile(default) and len(out) < CONFIG_FILES:  # read only if it exists
        out.append(config_entry("default", default, "accelerate"))
    return out


def config_entry(option: str, path: str, kind: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"option": option, "path": redact(path)[:200], "kind": kind, "values": {}, "error": None}
    try:
        entry["values"] = config_values(read_config(path, kind), CONFIG_KEYS[kind])
    except (OSError, ValueError, UnicodeDecodeError) as e:
        entry["error"] = (e.strerror or str(e) if isinstance(e, OSError) else str(e))[:200]
    return entry


YAML_KEY = re.compile(r"^[ ]*([A-Za-z_][A-Za-z0-9_]*)[ ]*:[ ]+(.+?)[ ]*$")


def yaml_scalars(text: str) -> dict[str, str]:
    """The ``key: value`` lines of a block-style YAML mapping (what accelerate's ``yaml.safe_dump``
    writes), at any depth, the first of each key, the value as written without its comment. Not a
    YAML parser (the agent has only the standard library): the controller reads each value as YAML."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = YAML_KEY.match(line)
        if m and m.group(1) not in out:
            value = m.group(2)
            out[m.group(1)] = value if value[:1] in "'\"" else value.partition(" #")[0].rstrip()
    return out


def read_config(path: str, kind: str = "") -> Any:
    """One JSON or TOML document, at most CONFIG_MAX bytes; accelerate's YAML or JSON, flattened."""
    with open(path, "rb") as f:
        data = f.read(CONFIG_MAX + 1)
    if len(data) > CONFIG_MAX:
        raise ValueError(f"larger than {CONFIG_MAX >> 10} KiB")
    text = data.decode("utf-8")
    if kind == "accelerate":  # commands/config/config_args.py: JSON if it ends in .json, else YAML
        if not path.endswith(".json"):
            return yaml_scalars(text)
        doc = read_json(text)
        flat: dict[str, Any] = {}
        for key, value in doc.items() if isinstance(doc, dict) else ():
            flat.update(value if isinstance(value, dict) else {key: value})
        return flat
    if path.endswith(".toml"):
        try:  # Python 3.11+; the agent runs on older interpreters too
            tomllib: Any = __import__("tomllib")
        except ImportError:
            raise ValueError("unreadable: no tomllib (Python < 3.11)") from None
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"not TOML: {e}") from None
    return read_json(text)


def read_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError(f"not JSON: {e}") from None


def config_values(doc: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """The dotted ``keys`` of ``doc`` whose values are numbers or short words ("auto")."""
    out: dict[str, Any] = {}
    for key in keys:
        node = doc
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, (int, float)) or (isinstance(node, str) and len(node) <= 16):
            out[key] = node
    return out


def option(argv: list[str], names: tuple[str, ...]) -> str | None:
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def master_names(env: dict[str, str], argv: list[str]) -> list[str]:
    """Every name that could be the master's address, for resolution."""
    names = [env[k] for k in MASTER_ENV if env.get(k)]
    for v in (
        option(argv, MASTER_OPTS[:2]),
        option(argv, MASTER_OPTS[2:]),
        env.get("PET_RDZV_ENDPOINT"),
    ):
        if v:
            names.append(endpoint_host(v))
    return list(dict.fromkeys(n for n in names if n))


def endpoint_host(endpoint: str) -> str:
    """The host torch reads from a rendezvous endpoint (facts/launch.py split_endpoint, which the
    agent cannot import): ``[v6]`` alone, else what is before the last colon."""
    v = endpoint.strip()
    host = v if v[:1] == "[" and v[-1:] == "]" else v.rpartition(":")[0] or v
    return host[1:-1] if len(host) > 1 and host[0] == "[" and host[-1] == "]" else host


def is_master_candidate(env: dict[str, str], argv: list[str]) -> bool:
    ranks = [env[k] for k in RANK0_ENV if k in env]
    nr = option(argv, NODE_RANK_OPTS)
    if nr is not None:
        ranks = [nr]
    return all(r.strip() == "0" for r in ranks)


def local_addrs(ip_addr: list[dict[str, Any]]) -> set[str]:
    return {a.get("local", "") for link in ip_addr for a in link.get("addr_info", [])}


def is_loopback(addr: str) -> bool:
    """127.0.0.0/8, ::1 and IPv4-mapped ::ffff:127.x (with or without a %zone or [brackets]), and
    the name localhost (RFC 6761: it always resolves to loopback). Other names are not resolved
    here: False. The package uses this one (validator.facts.network re-exports it)."""
    import ipaddress

    text = addr.strip().split("%", 1)[0].strip("[]").lower().rstrip(".")
    if text == "localhost" or text.endswith(".localhost"):
        return True
    if "/" in text:  # ipaddress refuses it; a prefix length comes up per node at 12,500 nodes
        return False
    octets = text.split(".")
    if len(octets) == 4 and all(o.isascii() and o.isdigit() and str(int(o)) == o and int(o) <= 255 for o in octets):
        return octets[0] == "127"  # plain IPv4 (no leading zeros): decided without ipaddress
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return (mapped or ip).is_loopback


def collect(
    argv: list[str] | None = None,
    resolve_names: tuple[str, ...] = (),
    environ: dict[str, str] | None = None,
    port_check: bool = True,
    port: int | None = None,
    gpu_sources: tuple[str, ...] = ("nvml", "nvidia-smi", "proc"),
) -> dict[str, Any]:
    """Raw facts of this node. ``port``: the master port to test when this node is the master
    (default: from MASTER_PORT or the command line)."""
    t0 = time.monotonic()
    argv = list(argv or [])
    env = launch_env(argv, dict(os.environ if environ is None else environ))
    errors: dict[str, str] = {}
    doc: dict[str, Any] = {
        "kind": "raw",
        "agent_schema": AGENT_SCHEMA,
        "validator": VERSION,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "time": time.time(),
        "python": sys.version.split()[0],
        "env": filtered_env(env),
        "argv": redact_argv(argv) or None,  # the raw argv stays here: master names, ports
    }

    def attempt(key: str, fn: Callable[[], Any]) -> Any:
        try:
            doc[key] = fn()
        except Exception as e:  # noqa: BLE001 - a collector never crashes the probe; the error is recorded
            errors[key] = f"{type(e).__name__}: {e}"[:300]
            doc[key] = None
        return doc[key]

    attempt("interfaces", interfaces)
    attempt("sysfs_net", sysfs_net)
    doc["gpus"] = gpus(list(gpu_sources), errors)
    attempt("packages", packages)
    attempt("nccl", nccl)
    attempt("limits", limits)
    attempt("sysctl", sysctl)
    attempt("ib_devices", ib_devices)
    attempt("ib", ib_sysfs)
    attempt("configs", lambda: job_configs(argv, env))
    names = master_names(env, argv) + list(resolve_names)
    names.append(doc["hostname"])  # Gloo binds to what the hostname resolves to
    resolved = attempt("resolve", lambda: resolve(list(dict.fromkeys(names))))
    routes: dict[str, Any] = {}
    for res in (resolved or {}).values():
        for a in res.get("addrs", [])[:1]:
            try:
                routes[a] = route_src(a)
            except OSError as e:
                routes[a] = {"error": str(e)}
    doc["routes"] = routes
    if port is None:
        text = next((env[k] for k in PORT_ENV if env.get(k)), None) or option(argv, PORT_OPTS)
        port = int(text) if text and text.isdecimal() else None
    ours = local_addrs((doc.get("interfaces") or {}).get("ip_addr") or [])
    master_here = any(
        a in ours or is_loopback(a) for n in names[:-1] for a in (resolved or {}).get(n, {}).get("addrs", [])[:1]
    )
    if port_check and port and 0 < port < 65536 and master_here and is_master_candidate(env, argv):
        probe_port = port
        attempt("port_probe", lambda: port_probe(probe_port))
    doc["errors"] = errors
    doc["probe_ms"] = round((time.monotonic() - t0) * 1000, 1)
    return doc


def main(args: list[str]) -> int:
    argv: list[str] = []
    names: list[str] = []
    port_check = True
    port: int | None = None
    sources: tuple[str, ...] = tuple(GPU_SOURCES)
    it = iter(args)
    for a in it:
        if a == "--argv-json":
            argv = json.loads(next(it))
        elif a == "--resolve":
            names.append(next(it))
        elif a == "--no-port-probe":
            port_check = False
        elif a == "--port":
            port = int(next(it))
        elif a == "--gpu-sources":  # e.g. "nvidia-smi,proc" to exercise the fallbacks
            sources = tuple(next(it).split(","))
    json.dump(collect(argv, tuple(names), port_check=port_check, port=port, gpu_sources=sources), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
