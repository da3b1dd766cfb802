"""Record every torch.distributed collective and point-to-point call of this rank to a file.

    torchrun --nproc-per-node=4 -m validator.trace train.py --steps 3
    python -m validator.trace [-m module | script.py] [args...]

Each rank appends JSON lines to ``$VALIDATOR_TRACE_DIR/trace_rank<RANK>.jsonl`` (default
directory ``./validator-trace``): a header, one line per process group it uses, one line per
call (op, group, per-group number, shapes, dtypes, peer, call site), and how the script ended.
``validator diagnose`` and ``validator rehearse`` compare these files across ranks.

Cost: the call path only builds a tuple and appends it to a list (a few microseconds); a daemon
thread writes the file every 0.1 s, so a rank that hangs inside a collective has its last call
on disk, and a rank that is killed loses at most 0.1 s of calls. Standard library and torch only:
this module runs inside the user's training processes.

With ``$VALIDATOR_TRACE_GROUPS`` (``validator rehearse`` of a job with a parallel layout), each rank
first rehearses the layout's process groups (``rehearse_groups``), before the recorder and the script.
"""

from __future__ import annotations

import atexit
import inspect
import json
import os
import runpy
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

FORMAT = "validator-trace"
GROUPS = "VALIDATOR_TRACE_GROUPS"  # a JSON file: {"world": N, "groups": {kind: [[ranks], ...]}}
VERSION = 1
COLLECTIVES = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base", "all_gather_object",
    "all_gather_coalesced", "all_reduce_coalesced", "broadcast", "broadcast_object_list", "reduce",
    "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base", "all_to_all", "all_to_all_single",
    "gather", "gather_object", "scatter", "scatter_object_list", "barrier", "monitored_barrier", "new_group",
)  # fmt: skip
P2P = ("send", "recv", "isend", "irecv", "batch_isend_irecv")
_SKIP = (os.sep + "torch" + os.sep, __file__, "<frozen ", os.sep + "runpy.py")


class Recorder:
    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.pending: deque[tuple[Any, ...]] = deque()  # append/popleft are thread-safe
        self.lock = threading.Lock()
        self.depth = threading.local()
        self.seq: dict[str, int] = {}
        self.groups: dict[int, str] = {}
        self.internal: dict[Any, bool] = {}  # code object -> inside torch or the recorder
        self.n = 0
        self.file: Any = None
        self.rank = os.environ.get("RANK")
        self.cwd = os.getcwd()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._flusher, name="validator-trace", daemon=True)

    # ----------------------------------------------------------------- hot path
    def record(self, op: str, fn_args: tuple[Any, ...], info: tuple[Any, ...]) -> None:
        self.n += 1
        self.pending.append(("call", self.n, op, time.time(), fn_args, info, self._site()))

    def _site(self) -> tuple[str, int, str]:
        f = sys._getframe(3)
        internal = self.internal
        while f is not None:
            code = f.f_code
            skip = internal.get(code)
            if skip is None:
                skip = internal[code] = any(s in code.co_filename for s in _SKIP)
            if not skip:
                break
            f = f.f_back  # type: ignore[assignment]
        if f is None:
            return ("?", 0, "?")
        path = f.f_code.co_filename
        if path.startswith(self.cwd + os.sep):
            path = path[len(self.cwd) + 1 :]
        return (path, f.f_lineno, f.f_code.co_name)

    # ----------------------------------------------------------------- writing
    def _open(self) -> None:
        if self.file is not None:
            return
        import torch.distributed as dist

        rank = self.rank if self.rank is not None else str(dist.get_rank() if dist.is_initialized() else os.getpid())
        os.makedirs(self.dir, exist_ok=True)
        self.file = open(os.path.join(self.dir, f"trace_rank{rank}.jsonl"), "w", buffering=1 << 16)  # noqa: SIM115
        header = {
            "kind": "header", "format": FORMAT, "version": VERSION, "rank": int(rank) if rank.isdecimal() else None,
            "world_size": _int_env("WORLD_SIZE"), "local_rank": _int_env("LOCAL_RANK"), "host": socket.gethostname(),
            "pid": os.getpid(), "argv": sys.argv, "t": time.time(),
        }  # fmt: skip
        self.file.write(json.dumps(header) + "\n")

    def _line(self, item: tuple[Any, ...]) -> dict[str, Any]:
        if item[0] != "call":
            return dict(item[1])
        _, n, op, t, (group, peer, tensors), info, (path, line, fn) = item
        pg = self._group(group)
        self.seq[pg] = self.seq.get(pg, 0) + 1
        shapes, dtypes = _describe(tensors)
        out = {"kind": "call", "n": n, "op": op, "pg": pg, "seq": self.seq[pg], "shapes": shapes, "dtypes": dtypes}
        out.update(peer=peer, site=f"{path}:{line}", fn=fn, t=round(t, 6))
        if info:
            out["info"] = info
        return out

    def _group(self, group: Any) -> str:
        if group is None:
            return "0"
        name = self.groups.get(id(group))
        if name is None:
            import torch.distributed as dist

            try:
                name = str(dist.distributed_c10d._get_process_group_name(group))
                ranks = dist.get_process_group_ranks(group)
            except Exception:  # noqa: BLE001 - a group this rank is not in, or an older torch
                name, ranks = f"g{id(group)}", []
            self.groups[id(group)] = name
            self.file.write(json.dumps({"kind": "group", "pg": name, "ranks": ranks}) + "\n")
        return name

    def flush(self) -> None:
        with self.lock:
            if not self.pending:
                return
            try:
                self._open()
                while self.pending:
                    self.file.write(json.dumps(self._line(self.pending.popleft()), default=str) + "\n")
                self.file.flush()
            except Exception as e:  # noqa: BLE001 - tracing must never break the training script
                print(f"validator.trace: cannot write trace: {e}", file=sys.stderr)

    def note(self, **fields: Any) -> None:
        self.pending.append(("note", fields))

    def _flusher(self) -> None:
        while not self.stop.wait(0.1):
            self.flush()


def _int_env(name: str) -> int | None:
    v = os.environ.get(name, "")
    return int(v) if v.isdecimal() else None


def _describe(obj: Any) -> tuple[list[Any], list[str]]:
    shapes: list[Any] = []
    dtypes: list[str] = []
    for t in obj:
        if hasattr(t, "shape") and hasattr(t, "dtype"):
            shapes.append(list(t.shape))
            dtypes.append(str(t.dtype).replace("torch.", ""))
        elif isinstance(t, (list, tuple)):
            inner = [list(x.shape) for x in t if hasattr(x, "shape")]
            shapes.append(inner)
            dtypes += sorted({str(x.dtype).replace("torch.", "") for x in t if hasattr(x, "dtype")})
    return shapes, dtypes


def _tensorish(a: Any) -> bool:
    return hasattr(a, "shape") or (isinstance(a, (list, tuple)) and any(hasattr(x, "shape") for x in a))


def _param_index(fn: Callable[..., Any], *names: str) -> dict[str, int]:
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {}
    return {n: params.index(n) for n in names if n in params}


def _wrap(rec: Recorder, op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    idx = _param_index(fn, "group", "dst", "src", "group_dst", "group_src", "ranks")
    plain = op.endswith(("_object", "_object_list")) or op == "new_group"  # objects: no shapes to compare

    def get(args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
        if name in kwargs:
            return kwargs[name]
        i = idx.get(name)
        return args[i] if i is not None and i < len(args) else None

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(rec.depth, "n", 0)
        if depth == 0:
            tensors = [] if plain else [a for a in (*args, *kwargs.values()) if _tensorish(a)][:3]
            peer = get(args, kwargs, "dst")
            peer = get(args, kwargs, "src") if peer is None else peer
            info: tuple[Any, ...] = ()
            if op == "new_group":
                info = (list(get(args, kwargs, "ranks") or []),)
            elif op == "batch_isend_irecv" and args:
                info = tuple((getattr(p.op, "__name__", str(p.op)), p.peer, list(p.tensor.shape)) for p in args[0])
            rec.record(op, (get(args, kwargs, "group"), peer, tensors), info)
        rec.depth.n = depth + 1
        try:
            return fn(*args, **kwargs)
        finally:
            rec.depth.n = depth

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(fn, "__name__", op)
    wrapper.__doc__ = fn.__doc__
    return wrapper


def install(directory: str | None = None) -> Recorder:
    """Patch torch.distributed (both namespaces) and start the writer thread."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    rec = Recorder(directory or os.environ.get("VALIDATOR_TRACE_DIR") or "validator-trace")
    for op in COLLECTIVES + P2P:
        fn = getattr(c10d, op, None) or getattr(dist, op, None)
        if fn is None:
            continue
        wrapped = _wrap(rec, op, fn)
        for mod in (c10d, dist):
            if getattr(mod, op, None) is fn:
                setattr(mod, op, wrapped)
    _force_backend(dist, c10d)
    rec.thread.start()
    atexit.register(_at_exit, rec)
    return rec


def _at_exit(rec: Recorder) -> None:
    rec.note(kind="end", t=time.time())
    rec.flush()


def _force_backend(dist: Any, c10d: Any) -> None:
    """VALIDATOR_TRACE_BACKEND=gloo rehearses an NCCL script on CPU."""
    backend = os.environ.get("VALIDATOR_TRACE_BACKEND")
    if not backend:
        return
    orig = c10d.init_process_group

    def init(*args: Any, **kwargs: Any) -> Any:
        kwargs["backend"] = backend
        return orig(*args[1:], **kwargs) if args else orig(**kwargs)

    dist.init_process_group = c10d.init_process_group = init


def _on_term(rec: Recorder) -> None:
    def handler(signum: int, _frame: Any) -> None:
        rec.note(kind="signal", signal=signum, t=time.time())
        rec.flush()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)


def _exception_site(tb: Any) -> str | None:
    site = None
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename
        if not any(s in path for s in _SKIP):
            site = f"{os.path.relpath(path) if path.startswith(os.getcwd()) else path}:{tb.tb_lineno}"
        tb = tb.tb_next
    return site


def rehearse_groups(path: str) -> bool:
    """Before the script and the recorder (which records the script's calls alone), this rank creates
    the layout's process groups and runs a collective in each, as ``preflight --groups`` does
    (validator.preflight.groups: the same code, the same decision on every rank); under torchrun on
    its agent's store, as a client. The answer goes beside ``path`` as ``.groups-rank<R>.json``
    (diagnose reads no dot file). False: a group failed, and this rank stops before the script."""
    import datetime

    import torch
    import torch.distributed as dist

    from validator.preflight.groups import decision

    rank, world = _int_env("RANK") or 0, _int_env("WORLD_SIZE") or 1
    with open(path) as f:
        spec = json.load(f)
    if spec.get("world") != world:
        got = {"error": f"the layout's groups are for {spec.get('world')} ranks, this run has {world}", "lines": []}
    else:
        addr, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), _int_env("MASTER_PORT") or 29500
        local = _int_env("LOCAL_RANK")  # NCCL when each rank of the node has a GPU: every rank alike
        on_gpu = os.environ.get("VALIDATOR_TRACE_BACKEND") != "gloo" and local is not None
        gpu = local if on_gpu and torch.cuda.device_count() >= (_int_env("LOCAL_WORLD_SIZE") or 1) else None
        try:
            store = None
            if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":  # torchrun's agent holds MASTER_PORT
                client = dist.TCPStore(addr, port, world, False, timeout=datetime.timedelta(seconds=30))  # type: ignore[attr-defined]
                restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
                store = dist.PrefixStore(f"validator-rehearse/{restart}/", client)  # type: ignore[attr-defined]
            got = decision(addr, port, rank, world, spec["groups"], socket.gethostname(), gpu, store=store)
        except RuntimeError as e:  # torchrun's store unreachable, or rank 0's port taken
            got = {"error": f"no store at {addr}:{port} for the process groups: {str(e)[:200]}", "lines": []}
    with open(os.path.join(os.path.dirname(path), f".groups-rank{rank}.json"), "w") as f:
        json.dump(got, f)
    return not got["error"]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    directory = None
    if args[:1] == ["--dir"] and len(args) >= 2:
        directory, args = args[1], args[2:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    if os.environ.get(GROUPS) and not rehearse_groups(os.environ[GROUPS]):
        return 1  # a group failed (its answer is in the trace directory): the script would fail the same way
    rec = install(directory)
    _on_term(rec)
    module = args[0] == "-m"
    target = args[1] if module else args[0]
    sys.argv = [target, *args[(2 if module else 1) :]]
    if not module:
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        rec.note(kind="exit", code=e.code if isinstance(e.code, int) else 0 if e.code is None else 1, t=time.time())
        raise
    except BaseException as e:
        site = _exception_site(e.__traceback__)
        rec.note(kind="exception", type=type(e).__name__, msg=str(e)[:500], site=site, t=time.time())
        rec.flush()
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
