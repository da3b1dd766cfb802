#!/usr/bin/env python3
"""nfdelay.py QUEUE DELAY_MS (from shared/harness/fabric-lab) — hold every packet of netfilter queue QUEUE for DELAY_MS, then accept
it, in order: a one-way delay line for kernels without sch_netem. Standard library only. Run it in
the namespace whose iptables rule feeds the queue (-j NFQUEUE --queue-num QUEUE --queue-bypass: when
this process is gone, packets pass undelayed). Stops on SIGTERM; bound it with timeout(1)."""

import collections
import os
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
SUBSYS_QUEUE = 3
MSG_PACKET, MSG_VERDICT, MSG_CONFIG, MSG_VERDICT_BATCH = 0, 1, 2, 3
CFG_CMD, CFG_PARAMS, CFG_QUEUE_MAXLEN, CFG_MASK, CFG_FLAGS = 1, 2, 3, 4, 5
CMD_BIND, CMD_UNBIND = 1, 2
COPY_META = 1
F_FAIL_OPEN, F_GSO = 1, 4
PACKET_HDR, VERDICT_HDR = 1, 2
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
SOL_NETLINK, NETLINK_NO_ENOBUFS = 270, 5


def attr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def msg(kind: int, queue: int, attrs: bytes, flags: int = NLM_F_REQUEST, seq: int = 0) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (SUBSYS_QUEUE << 8) | kind, flags, seq, 0) + body


def configure(s: socket.socket, queue: int) -> None:
    steps = [
        attr(CFG_CMD, struct.pack("!BxH", CMD_BIND, 0)),
        attr(CFG_PARAMS, struct.pack("!IB", 0, COPY_META)),
        attr(CFG_QUEUE_MAXLEN, struct.pack("!I", 20000)),
        attr(CFG_MASK, struct.pack("!I", F_GSO | F_FAIL_OPEN))
        + attr(CFG_FLAGS, struct.pack("!I", F_GSO | F_FAIL_OPEN)),
    ]
    for seq, a in enumerate(steps, 1):
        s.send(msg(MSG_CONFIG, queue, a, NLM_F_REQUEST | NLM_F_ACK, seq))
        data = s.recv(65536)
        _length, kind = struct.unpack_from("=IH", data)
        if kind == NLMSG_ERROR and struct.unpack_from("=i", data, 16)[0] != 0:
            err = -struct.unpack_from("=i", data, 16)[0]
            raise OSError(err, f"nfqueue config step {seq}: {os.strerror(err)}")


def packet_ids(data: bytes) -> list[int]:
    out, off = [], 0
    while off + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, off)
        if length < 16:
            break
        if kind == (SUBSYS_QUEUE << 8) | MSG_PACKET:
            a = off + 20
            while a + 4 <= off + length:
                alen, atype = struct.unpack_from("=HH", data, a)
                if alen < 4:
                    break
                if atype & 0x3FFF == PACKET_HDR:
                    out.append(struct.unpack_from("!I", data, a + 4)[0])
                    break
                a += (alen + 3) & ~3
        off += (length + 3) & ~3
    return out


def main() -> int:
    queue, delay = int(sys.argv[1]), float(sys.argv[2]) / 1000.0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    s.bind((0, 0))
    for opt, val in ((33, 8 << 20), (socket.SO_RCVBUF, 8 << 20)):  # SO_RCVBUFFORCE as root
        try:
            s.setsockopt(socket.SOL_SOCKET, opt, val)
            break
        except OSError:
            continue
    s.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
    configure(s, queue)
    print(f"nfdelay: queue {queue}, {delay * 1000:g} ms", flush=True)
    held: collections.deque[tuple[float, int]] = collections.deque()
    s.setblocking(False)
    while True:
        wait = max(0.0, held[0][0] - time.monotonic()) if held else 1.0
        ready, _, _ = select.select([s], [], [], wait)
        now = time.monotonic()
        if ready:
            while True:
                try:
                    data = s.recv(1 << 20)
                except BlockingIOError:
                    break
                held.extend((now + delay, pid) for pid in packet_ids(data))
        last = None
        while held and held[0][0] <= now:
            last = held.popleft()[1]
        if last is not None:  # accept every packet up to `last` (ids rise; FIFO, so all are due)
            s.send(msg(MSG_VERDICT_BATCH, queue, attr(VERDICT_HDR, struct.pack("!II", NF_ACCEPT, last))))


if __name__ == "__main__":
    sys.exit(main())
