"""Who printed each event: the global rank and host, from every clue the files give.

Clues, strongest first: a ``[rankN]:``/mpirun/template prefix; ``[Rank N]`` inside a c10d
message; the NCCL ``host:pid`` of a line whose pid an NCCL ``Init`` line tied to a rank; the
file name (``rank3.log``); torchrun's rendezvous result (local -> global ranks, LOGLEVEL=INFO).
An event that none of them places keeps rank None: it is never guessed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from validator.diagnose.events import Event
from validator.diagnose.filescan import FileResult
from validator.diagnose.inputs import file_rank


def _ints(text: str) -> list[int]:
    try:
        v = ast.literal_eval(text[:4096])
        return [int(x) for x in v] if isinstance(v, (list, tuple)) else []
    except (ValueError, TypeError, SyntaxError, OverflowError, RecursionError, MemoryError):
        return []


class RankMap:
    def __init__(self, results: Iterable[FileResult]) -> None:
        self.pid_rank: dict[tuple[str | None, int | None], int] = {}
        self.local: dict[tuple[str, str | None, int], int] = {}  # (file, node, local) -> global
        self.ambiguous: set[tuple[str, str | None, int]] = set()  # two nodes' output in one file
        self.hosts: dict[int, str] = {}
        self.world: int | None = None
        self._taught: dict[tuple[str, str | None], list[tuple[int, int]]] | None = None
        for res in results:
            self._learn(res)

    def _learn(self, res: FileResult) -> None:
        best: dict[tuple[str | None, int | None], tuple[int, int]] = {}
        for fact in res.facts:
            if fact[0] == "nccl_init":
                _, host, pid, rank, nranks, _bus = fact
                # the comm with the most ranks is the default group: its rank is the global one
                if nranks >= best.get((host, pid), (-1, -1))[1]:
                    best[(host, pid)] = (rank, nranks)
                self.world = max(self.world or 0, nranks)
            elif fact[0] == "rdzv":
                _, node, local_ranks, global_ranks = fact
                for lr, gr in zip(_ints(local_ranks), _ints(global_ranks), strict=False):
                    self._teach((res.path, node, lr), gr)
        for key, (rank, _n) in best.items():
            self.pid_rank[key] = rank
            if key[0]:
                self.hosts.setdefault(rank, key[0])
        for ev in res.events:
            pid, node = ev.data.get("pid"), ev.data.get("node")
            if ev.kind == "agent.child_failed" and ev.ident.rank is not None and str(pid).isdecimal() and node:
                # mpirun's "process rank R with PID P on node N": that node's process P is rank R
                self.pid_rank.setdefault((str(node), int(str(pid))), ev.ident.rank)
            # [default1]:[rank3]: teaches local 1 -> rank 3 for this stream
            if ev.ident.rank is not None and ev.ident.local_rank is not None:
                self._teach((res.path, ev.ident.node, ev.ident.local_rank), ev.ident.rank)

    def _teach(self, key: tuple[str, str | None, int], rank: int) -> None:
        """local -> global for one stream; a local rank seen with two global ranks (torchrun --tee
        logs of two nodes in one file, without srun labels) is ambiguous and places nobody."""
        if key in self.ambiguous:
            return
        if self.local.setdefault(key, rank) != rank:
            del self.local[key]
            self.ambiguous.add(key)

    def stream_ranks(self, res: FileResult) -> set[int]:
        """The ranks whose streams a combined ``--tee`` log holds, as a ``--log-dir`` tree holds
        their files: torchrun's local ranks run from 0, so ``[default3]:`` means locals 0-3 ran,
        also the one that printed no error. Only where every ``[defaultN]:[rankM]:`` line of that
        node says N = M (one node, or the first): elsewhere a local rank names no global one."""
        seen: dict[str | None, set[int]] = {}
        for node, lr in res.streams | {(e.ident.node, e.ident.local_rank) for e in res.events}:
            if lr is not None:
                seen.setdefault(node, set()).add(lr)
        if self._taught is None:  # (file, node) -> its local -> global pairs, built once
            self._taught = {}
            for (path, n, lr), g in self.local.items():
                self._taught.setdefault((path, n), []).append((lr, g))
        out: set[int] = set()
        for node, locals_ in seen.items():
            pairs = self._taught.get((res.path, node), [])
            tangled = any(path == res.path and n == node for path, n, _ in self.ambiguous)
            if pairs and not tangled and all(lr == g for lr, g in pairs) and max(locals_) < 1 << 12:
                out |= set(range(max(locals_) + 1))
        return out

    def resolve(self, res: FileResult) -> None:
        rank = file_rank(res.path)
        for ev in res.events:
            self.place(ev, res.path, rank)

    def place(self, ev: Event, path: str, file_rank: int | None) -> None:
        ident = ev.ident
        if ident.rank is None and isinstance(ev.data.get("msg_rank"), int) and not ev.kind.startswith("summary"):
            ident.rank = ev.data["msg_rank"]
        if ident.host is None and isinstance(ev.data.get("task_host"), str):  # srun: error: HOST: task N: ...
            ident.host = ev.data["task_host"]
        if ident.rank is None and ident.pid is not None and (ident.host, ident.pid) in self.pid_rank:
            ident.rank = self.pid_rank[(ident.host, ident.pid)]
        if ident.rank is None and ident.local_rank is not None:
            ident.rank = self.local.get((path, ident.node, ident.local_rank))
        if ident.rank is None and file_rank is not None and not ev.kind.startswith(("summary", "agent")):
            ident.rank = file_rank
        if ident.rank is not None and ident.host:
            self.hosts.setdefault(ident.rank, ident.host)
        elif ident.rank is not None and ident.host is None:
            ident.host = self.hosts.get(ident.rank)
