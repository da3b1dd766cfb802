"""Node-local aggregation in per-rank mode: the ranks of one node meet at its local rank 0 (the
node leader) over a Unix socket named after the job and the node, and the leader sends the
coordinator one frame with every rank's facts, then fans the verdict back out.

A member speaks to its leader exactly as it would to the coordinator (hello -> header -> body ->
verdict), so the coordinator's own node needs nothing new: the coordinator serves the same socket
with its usual connection. A leader that is not the coordinator forwards the coordinator's hello
(its nonce) to its members for each attempt upstream, so each member's MAC covers its own body
under the coordinator's nonce and the leader cannot sign for anyone. A member that cannot reach
its leader within LEADER_WAIT_S, or whose leader closes without a verdict, goes to the
coordinator directly. The socket is in the abstract namespace (no file left behind), and a leader
accepts only processes of its own user (SO_PEERCRED).
"""

from __future__ import annotations

import os
import socket
import struct
import time
import zlib

from validator.preflight import protocol as wire
from validator.preflight import sections
from validator.preflight.plan import Options, Plan, rdzv_job
from validator.preflight.sections import LOCAL_MAX, MAX_GROUP

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import Facts
    from validator.preflight.participant import Result

LEADER_WAIT_S = 2.0  # a member tries its leader this long, then goes to the coordinator directly
GATHER_S = 5.0  # a leader waits this long (at most) for its members before going upstream
LOCAL_IO_S = 1.0  # a member answers its leader's hello within this long, or is left out
CONFIRM_S = 3.0  # a node's members confirm a proposed pass within this long, all together


def grouped(facts: Facts, mode: str) -> bool:
    """Per-rank mode with 2..LOCAL_MAX ranks on this node: aggregation applies."""
    n = facts["launch"]["local_world_size"]
    return mode == "rank" and isinstance(n, int) and 2 <= n <= LOCAL_MAX


def job_key(p: Plan) -> str:
    """What tells this job from another on the same node: its id and its endpoint (two jobs that
    share an id, such as torchrun's default rdzv id, have different ports)."""
    return f"{p.job_id}@{p.host}:{p.port}"


def address(key: str, host: str) -> bytes:
    """The node's socket: abstract namespace, named after the user, the job and the node."""
    name = f"validator-preflight/{os.getuid()}/{key}/{host}".encode("utf-8", "surrogatepass")
    if len(name) > 100:
        name = name[:80] + b"/%08x" % zlib.crc32(name)
    return b"\0" + name


def bind_node(key: str, host: str) -> socket.socket | None:
    """The leader's (or the coordinator's) socket; None when another process holds it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(address(key, host))
        s.listen(LOCAL_MAX)
    except OSError:
        s.close()
        return None
    return s


def same_user(s: socket.socket) -> bool:
    creds = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


def connect(key: str, host: str, deadline: float) -> socket.socket | None:
    """A member: its leader's socket, retried for LEADER_WAIT_S, at most a quarter of the time left
    (as a leader waits for its members: the rest is for the coordinator); None when there is none,
    or when another user's process holds the name (it could fake a verdict)."""
    now = time.monotonic()
    until = min(deadline, now + min(LEADER_WAIT_S, (deadline - now) / 4))
    pause = 0.005  # the leader binds as it starts: look again soon, then less often
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(address(key, host))
            if same_user(s):  # an abstract name has no permissions: whoever holds it must be us
                return s
            s.close()
            return None
        except OSError:
            s.close()
        if time.monotonic() + pause >= until:
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


class Group:
    """A leader's members: accepted during the gather, asked to sign under each upstream hello,
    given the verdict at the end. A member that misbehaves or goes silent is dropped (it then
    goes to the coordinator itself)."""

    def __init__(self, sock: socket.socket, expected: int) -> None:
        self.listener: socket.socket | None = sock
        self.expected = expected  # members: the local world size less the leader
        self.socks: list[socket.socket] = []
        self.brief = True  # every member said the verdict's line is enough (participant.brief)
        self.tokens: dict[socket.socket, str] = {}  # each member's token, as its facts went upstream

    def gather(self, until: float) -> None:
        """Accept members until all have connected or ``until``; then stop listening (a later
        member finds no leader and goes to the coordinator directly)."""
        assert self.listener is not None
        while len(self.socks) < self.expected and (left := until - time.monotonic()) > 0:
            self.listener.settimeout(left)
            try:
                s, _ = self.listener.accept()
            except OSError:
                break
            if len(self.socks) < LOCAL_MAX and same_user(s):
                self.socks.append(s)
            else:
                s.close()
        self.listener.close()
        self.listener = None

    def sign(self, hello: dict[str, Any], own: int) -> list[tuple[object, str, sections.Pieces]]:
        """Forward the coordinator's hello; each member answers with its header and body, signed
        under it: (mac, token, its texts) each, within MAX_GROUP bytes in all with our ``own``."""
        kept, out, total = [], [], own
        frame = wire.encode(hello)
        for s in self.socks:
            try:
                s.settimeout(LOCAL_IO_S)
                s.sendall(frame)
                header = wire.recv_msg(s, wire.MAX_FACTS_HEADER)
                size = header.get("size")
                ours = header.get("type") == "facts" and header.get("job_id") == hello.get("job_id")
                if not ours or isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= wire.MAX_FACTS:
                    raise wire.ProtocolError("not a facts header")
                if wire.LEN.unpack(wire.recv_exact(s, wire.LEN.size))[0] != size:
                    raise wire.ProtocolError("facts size does not match the header")
                parts = sections.texts(header, wire.recv_exact(s, size))
                if len(parts) > 1 and hello.get("sections") != 1:  # (one document: a member of an older validator)
                    raise wire.ProtocolError("facts in texts to a coordinator that reads one document")
                self.brief = self.brief and header.get("brief") is True
                token, signs = header.get("token"), sum(len(t) for _, t in parts)
                if total + signs <= MAX_GROUP and sections.good_token(token):
                    total += signs
                    out.append((header.get("mac"), str(token), parts))
                    self.tokens[s] = str(token)
                kept.append(s)
            except (OSError, wire.ProtocolError):
                s.close()
        self.socks = kept
        return out

    def tell(self, body: bytes) -> None:
        """A frame passed on to every member as it came (the coordinator's keepalive), best effort."""
        for s in self.socks:
            try:
                s.settimeout(LOCAL_IO_S)
                s.sendall(wire.frame(body))
            except OSError:
                pass

    def propose(self, body: bytes) -> list[str]:
        """A proposed pass (two phases, protocol.py) to every member; the tokens of those that do
        not confirm within CONFIRM_S, all together: the coordinator names their ranks."""
        frame, lost = wire.frame(body), []
        until = time.monotonic() + CONFIRM_S
        for s in self.socks:
            try:
                s.settimeout(LOCAL_IO_S)
                s.sendall(frame)
            except OSError:
                pass
        for s in list(self.socks):
            try:
                s.settimeout(max(0.01, until - time.monotonic()))
                if wire.recv_msg(s).get("type") == "ready":
                    continue
            except (OSError, wire.ProtocolError):
                pass
            if s in self.tokens:
                lost.append(self.tokens[s])
            self.socks.remove(s)
            s.close()
        return lost

    def finish(self, verdict: dict[str, Any] | None) -> None:
        """The verdict to every member (None: close, so each goes to the coordinator itself)."""
        frame = wire.encode(verdict) if verdict is not None else b""
        for s in self.socks:
            try:
                if frame:
                    s.settimeout(LOCAL_IO_S)
                    s.sendall(frame)
            except OSError:
                pass
            finally:
                s.close()
        self.socks = []
        if self.listener is not None:
            self.listener.close()
            self.listener = None


def join(opts: Options, p: Plan, facts: Facts, listen: dict[str, Any] | None, timeout: float | None = None) -> Result:
    """Reach the coordinator. Per-rank mode with several ranks here: local rank 0 leads the node
    (carries its ranks' facts in one frame); the others go through it, or directly when it is not
    there (this module)."""
    from validator.preflight import k8s
    from validator.preflight.finish import brief
    from validator.preflight.participant import LOST, Attempts, Result, participate

    secret = wire.load_secret(opts.secret_file)
    patient, token, t0 = k8s.in_pod(facts), wire.new_nonce(), time.monotonic()
    fields = {"listen": listen, "brief": brief(opts), "rdzv_job": rdzv_job(opts, facts)}
    lrank = facts["launch"]["local_rank"]
    if not grouped(facts, p.mode) or lrank is None:
        return participate(facts, p.host, p.candidates, p.job_id, secret, timeout or opts.timeout, fields, patient)
    if lrank == 0 and (sock := bind_node(job_key(p), facts["host"])) is not None:
        group = Group(sock, int(facts["launch"]["local_world_size"] or 1) - 1)
        result = None
        try:
            group.gather(t0 + min(GATHER_S, opts.timeout / 4))
            left = opts.timeout - (time.monotonic() - t0)
            result = participate(facts, p.host, p.candidates, p.job_id, secret, left, fields, patient, token, group)
        finally:
            group.finish(result.verdict if result else None)
        return result
    if lrank != 0 and (got := via_leader(facts, p.job_id, secret, opts.timeout, fields, token, job_key(p))):
        if isinstance(got, str):  # our leader lost the coordinator after a proposed pass
            att = Attempts()
            att.gave_up = f"the coordinator {got[len(LOST) :]} (through the node's leader)"
            return Result(None, att)
        return Result(got, Attempts())
    left = opts.timeout - (time.monotonic() - t0)
    return participate(facts, p.host, p.candidates, p.job_id, secret, left, fields, patient, token)


def via_leader(
    facts: Facts,
    job_id: str,
    secret: bytes | None,
    timeout: float,
    fields: dict[str, Any],
    token: str,
    key: str,
) -> dict[str, Any] | str | None:
    """A member of a node (per-rank mode, local rank > 0): the verdict through the node's leader,
    or None (no leader within LEADER_WAIT_S, or it closed without a verdict): then the caller
    goes to the coordinator directly, before the deadline; or why a proposed pass was lost
    (``LOST``), which no retry can mend."""
    from validator.preflight.participant import LOST, _exchange

    deadline = time.monotonic() + timeout
    s = connect(key, facts["host"], deadline)
    if s is None:
        return None
    parts = sections.pieces(facts)
    try:  # the leader's hello waits for its members and the coordinator: up to the deadline
        got = _exchange(s, parts, job_id, secret, fields, deadline, token, hello_s=timeout, sealed=False)
    except (OSError, wire.ProtocolError):
        got = None
    finally:
        s.close()
    return got if isinstance(got, dict) or (isinstance(got, str) and got.startswith(LOST)) else None


def same_node(group: list[Facts]) -> str | None:
    """Why a leader's ranks cannot all be its node's (None when they can): each rank's host is
    the leader's, and there are no more than its local world size."""
    lead = group[0]
    n = lead["launch"]["local_world_size"]
    if not isinstance(n, int) or len(group) > min(n, LOCAL_MAX):
        return f"{len(group)} ranks from a node leader whose local world size is {wire.short(n)}"
    for f in group[1:]:
        if f["host"] != lead["host"]:
            return f"rank on host {wire.short(f['host'])} sent by the leader of {wire.short(lead['host'])}"
    if len({f["launch"]["rank"] for f in group}) != len(group):  # one pid twice is fine: containers of their own
        return f"one rank twice from the leader of {wire.short(lead['host'])}"
    return None
