"""Node-side helpers of the net check. Standard library only and self-contained: the source is
sent to ``python3 -c`` like the agent.

    netprobe.py listen ADDR          bind ADDR on a free port, print {"port", "token"} (or
                                     {"error"}), answer every connection with the token, and
                                     exit when stdin closes
    netprobe.py probe TIMEOUT        stdin: [[label, addr, port, token], ...]; connect to each,
                                     print {"results": [{"label", "ok", "error"}]} on one line

ADDR may be a JSON object and stdin's list may be wrapped in one, keyed by node name: in a
SLURM step every task receives the same input and picks its own entry (SLURMD_NODENAME).

The token proves that the prober reached this listener, not whatever else holds the port.
"""

from __future__ import annotations

import binascii
import json
import os
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

PROBE_THREADS = 64
NODE = os.environ.get("SLURMD_NODENAME", "")  # names the output in a SLURM step


def mine(value: Any) -> Any:
    """This node's entry of a per-node map (SLURM steps), or the value itself."""
    if isinstance(value, dict):
        return value.get(os.environ.get("SLURMD_NODENAME", ""), value.get("*"))
    return value


def listen(addr: str) -> int:
    if addr.startswith("{"):
        addr = str(mine(json.loads(addr)) or "")
    host = addr.split("/", 1)[0]
    token = binascii.hexlify(os.urandom(8)).decode()
    try:
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        srv = socket.socket(fam, socket.SOCK_STREAM)
        srv.bind((host, 0))
        srv.listen(128)
    except OSError as e:
        print(json.dumps({"error": f"cannot listen on {host}: {e.strerror or e}", "node": NODE}), flush=True)
        return 0
    print(json.dumps({"port": srv.getsockname()[1], "token": token, "node": NODE}), flush=True)

    def until_stdin_closes() -> None:
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    while True:  # ends when stdin closes (os._exit above) or the bootstrap's watchdog fires
        conn, _ = srv.accept()
        try:
            conn.sendall(token.encode() + b"\n")
        except OSError:
            pass
        finally:
            conn.close()


def probe_one(addr: str, port: int, token: str, timeout: float) -> dict[str, Any]:
    host = addr.split("/", 1)[0]
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            got = b""
            while not got.endswith(b"\n") and len(got) < 64:  # bounded read of one short line
                chunk = s.recv(64)
                if not chunk:
                    break
                got += chunk
    except TimeoutError:
        return {"ok": False, "error": f"no answer from {host}:{port} within {timeout:g} s (filtered or no route)"}
    except OSError as e:
        return {"ok": False, "error": f"{host}:{port}: {e.strerror or e}"}
    if got.decode(errors="replace").strip() != token:
        return {"ok": False, "error": f"{host}:{port} answered, but not with the listener's token (another service?)"}
    return {"ok": True, "error": None}


def probe(targets: list[list[Any]], timeout: float) -> list[dict[str, Any]]:
    if not targets:
        return []

    def one(t: list[Any]) -> dict[str, Any]:
        label, addr, port, token = t
        return {"label": label, **probe_one(str(addr), int(port), str(token), timeout)}

    with ThreadPoolExecutor(min(PROBE_THREADS, len(targets))) as pool:
        return list(pool.map(one, targets))


def main(args: list[str]) -> int:
    if args[:1] == ["listen"] and len(args) == 2:
        return listen(args[1])
    if args[:1] == ["probe"] and len(args) == 2:
        targets = mine(json.loads(sys.stdin.read())) or []
        print(json.dumps({"results": probe(targets, float(args[1])), "node": NODE}), flush=True)
        return 0
    print(json.dumps({"error": f"usage: netprobe.py listen ADDR | probe TIMEOUT, got {args}"}), flush=True)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
