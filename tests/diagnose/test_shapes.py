"""Golden tests: real log shapes (issue 11 item 3) read the same as the plain log would be.

Fixtures in tests/fixtures/diagnose/shapes/ are excerpts as posted (SOURCES.md); where a shape
has no public sample with a failure in it (ANSI with ESC, CRLF, ``kubectl --prefix``, ``cat -n``),
the test applies the shape to a real excerpt exactly as the tool would print it and checks that
the events are the same as without it.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from validator.diagnose.anchors import ANCHORS
from validator.diagnose.filescan import FileResult, scan_file
from validator.diagnose.logs import line_cleaner, parse_line, stream_of
from validator.diagnose.run import diagnose_paths

SHAPES = Path(__file__).parent.parent / "fixtures" / "diagnose" / "shapes"
YEAR = 2026


def _events(res: FileResult) -> list[tuple[str, int, int | None, str]]:
    return [(e.kind, int(e.source.rsplit(":", 1)[1]), e.rank, e.text[:60]) for e in res.events]


def _variant(tmp_path: Path, name: str, transform: object) -> Path:
    src = (SHAPES / "rank-prefix.log").read_bytes()
    lines = src.split(b"\n")
    out = tmp_path / name
    out.write_bytes(transform(lines))  # type: ignore[operator]
    return out


def test_terminal_hard_wrap_is_joined() -> None:
    res = scan_file(str(SHAPES / "terminal-wrapped.log"))
    got = [(e.source, e.rank, e.data.get("seq"), e.data.get("op"), e.data.get("ms")) for e in res.events]
    assert got == [
        ("terminal-wrapped.log:1", 2, "532339", "BROADCAST", "1800042"),
        ("terminal-wrapped.log:3", 1, "532339", "BROADCAST", "1800042"),
        ("terminal-wrapped.log:5", 0, "532341", "_ALLGATHER_BASE", "1800036"),
    ]
    assert "NumelOut=5164000" in res.events[0].text  # the token the terminal split is whole again


def test_wrap_is_not_guessed_on_an_unwrapped_log() -> None:
    res = scan_file(str(SHAPES / "rank-prefix.log"))
    assert [k for k, *_ in _events(res)] == ["cuda.oom", "coll.watchdog_timeout"]


def test_character_interleaved_ranks_still_give_the_pair() -> None:
    _, diag = diagnose_paths([str(SHAPES / "interleaved-chars.log")])
    assert diag.primary is not None and diag.primary.code == "DGN004"
    assert diag.primary.culprits == [2, 3]


def test_pasted_line_numbers_are_not_launcher_labels() -> None:
    res = scan_file(str(SHAPES / "line-numbers.log"))
    watchdog = [(line, rank) for kind, line, rank, _ in _events(res) if kind.startswith("coll.watchdog")]
    assert watchdog == [(1, 0), (2, 4), (3, 0), (4, 3)]
    assert all(e.ident.node is None for e in res.events)  # [80746] is a line number, not a node


def test_cat_n_and_bar_line_numbers_read_like_the_plain_log(tmp_path: Path) -> None:
    plain = _events(scan_file(str(SHAPES / "rank-prefix.log")))
    for name, fmt in (("catn.log", b"%6d\t"), ("bar.log", b"%d | "), ("colon.log", b"%d: ")):
        numbered = _variant(tmp_path, name, lambda ls, f=fmt: b"\n".join(f % (i + 1) + ln for i, ln in enumerate(ls)))
        assert _events(scan_file(str(numbered))) == plain, name


def test_srun_labels_are_not_taken_for_line_numbers(tmp_path: Path) -> None:
    p = tmp_path / "srun.log"
    p.write_text(
        "0: [rank0]: RuntimeError: boom\n1: [rank1]: ok\n0: [rank0]: ok\n1: [rank1]: RuntimeError: boom\n2: x\n"
    )
    res = scan_file(str(p))
    assert [(e.ident.node, e.rank) for e in res.events] == [("0", 0), ("1", 1)]


def test_user_added_time_stamps() -> None:
    res = scan_file(str(SHAPES / "user-timestamps.log"))
    exc = [e for e in res.events if e.kind == "py.exception"]
    assert exc and exc[0].stack == ["test/run_test.py:393 in <module>", "test/run_test.py:385 in main"]
    when = dt.datetime.fromtimestamp(exc[0].time or 0)
    assert (when.month, when.day, when.hour, when.minute) == (10, 16, 2, 7)


def test_determined_prefix_gives_rank_and_time() -> None:
    lines = (SHAPES / "determined-prefix.log").read_text().splitlines()
    one, zero = parse_line(lines[1], YEAR), parse_line(lines[2], YEAR)
    assert (one.ident.rank, zero.ident.rank) == (1, 0)
    assert one.text == zero.text == "batch limit hit, simulating hang"
    assert one.time is not None and dt.datetime.fromtimestamp(one.time).second == 14
    assert stream_of(lines[1].encode()) != stream_of(lines[2].encode())
    agent = parse_line(lines[6], YEAR)
    assert agent.ident.rank is None and agent.level == "error" and agent.text.startswith("crashed: resources failed")


def test_ray_worker_prefix_and_vllm_header() -> None:
    res = scan_file(str(SHAPES / "ray-vllm-prefix.log"))
    assert {e.ident.pid for e in res.events} == {7602}
    last = [e for e in res.events if e.kind == "nccl.last_error"]
    assert last and last[0].text == "Attribute busid of node nic not found"
    assert all(e.time is not None for e in res.events)


def test_ansi_codes_that_lost_their_escape() -> None:
    raw = (SHAPES / "ray-ansi-lost.log").read_bytes()
    clean = line_cleaner(raw, ANCHORS)
    line = parse_line(clean(raw.split(b"\n")[1]).decode(), YEAR)
    assert (line.ident.pid, line.ident.host) == (3464, "100.64.83.225")
    assert line.text == "[nltk_data] Error with downloaded zip file"


def test_ansi_colours_crlf_and_progress_bars_read_like_the_plain_log(tmp_path: Path) -> None:
    plain = _events(scan_file(str(SHAPES / "rank-prefix.log")))
    colour = _variant(
        tmp_path, "colour.log", lambda ls: b"\n".join(b"\x1b[1;31m" + ln.replace(b"]:", b"]:\x1b[0m", 1) for ln in ls)
    )
    crlf = _variant(tmp_path, "crlf.log", lambda ls: b"\r\n".join(ls))
    bar = _variant(tmp_path, "bar.log", lambda ls: b"\n".join(b" 37%|###   | 37/100\r" + ln for ln in ls))
    for p in (colour, crlf, bar):
        assert _events(scan_file(str(p))) == plain, p.name


def test_kubectl_prefix_keeps_rank_and_names_the_pod(tmp_path: Path) -> None:
    plain = _events(scan_file(str(SHAPES / "rank-prefix.log")))
    pod = _variant(tmp_path, "pod.log", lambda ls: b"\n".join(b"[pod/train-worker-1/pytorch] " + ln for ln in ls))
    res = scan_file(str(pod))
    assert _events(res) == plain
    assert {e.ident.host for e in res.events} == {"train-worker-1"}


def test_tee_logs_of_two_nodes_keep_local_ranks_local(tmp_path: Path) -> None:
    """torchrun --tee on two nodes: ``[default1]:`` is local rank 1 on each; without a line that
    ties it to a global rank, the exception is not pinned on global rank 1."""
    node0, node1 = tmp_path / "node0" / "out.log", tmp_path / "node1" / "out.log"
    node0.parent.mkdir()
    node1.parent.mkdir()
    node0.write_text("[default0]:step 1\n[default1]:step 1\n")
    node1.write_text(
        "[default0]:step 1\n[default1]:RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    _, diag = diagnose_paths([str(tmp_path)])
    assert diag.primary is not None
    assert 1 not in diag.primary.culprits
    assert diag.primary.evidence and diag.primary.evidence[0].source == "node1/out.log:2"


def test_tee_logs_of_two_nodes_in_one_file_place_nobody_by_local_rank(tmp_path: Path) -> None:
    """Two agents' --tee output concatenated: [default1] is rank 1 on one node and rank 3 on the
    other, so a line with only [default1]: is not pinned on either."""
    p = tmp_path / "job.log"
    p.write_text(
        "[default1]:[rank1]: RuntimeError: boom\n"
        "[default1]:[rank3]: RuntimeError: boom\n"
        "[default1]:RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    _, diag = diagnose_paths([str(p)])
    cuda = [e for e in (diag.primary.evidence if diag.primary else []) if "illegal memory" in e.text]
    assert all(e.rank is None for e in cuda)
    assert not (diag.primary and diag.primary.code == "DGN008" and diag.primary.culprits in ([1], [3]))


def test_srun_labels_on_a_real_two_node_run() -> None:
    lines = (SHAPES / "srun-label.log").read_text().splitlines()
    parsed = [parse_line(ln, YEAR) for ln in lines if ln.strip()]
    assert {p.ident.node for p in parsed} == {"0", "1"}
    assert parsed[0].level == "warning" and parsed[0].ident.pid == 5197
    clean = line_cleaner((SHAPES / "srun-label.log").read_bytes(), ANCHORS)
    assert all(clean(ln.encode()) == ln.encode() for ln in lines)  # labels are not line numbers


def test_pdsh_host_prefixes_even_doubled_name_the_host() -> None:
    """DeepSpeed's multi-node launcher runs pdsh, which puts "host: " in front of every line; a
    nested launch doubles it (corpus h08, NVIDIA/nccl#563)."""
    doubled = "10.0.87.143: 10.0.87.143: ip-10-0-87-143:149:298 [5] register_mr_buffers:465 NCCL WARN NET/OFI Unable"
    line = parse_line(doubled, YEAR)
    assert (line.nccl, line.ident.host, line.ident.pid) == ("WARN", "ip-10-0-87-143", 149)
    assert line.text.startswith("NCCL WARN NET/OFI") and stream_of(doubled.encode()) == b"10.0.87.143: 10.0.87.143:"
    frame = parse_line('10.0.87.143: 10.0.87.143:   File "main_moe.py", line 187, in <module>', YEAR)
    assert frame.ident.host == "10.0.87.143" and frame.text.startswith('File "main_moe.py"')
    named = parse_line("worker-1: [rank3]:[E808 10:31:07.406255799 ProcessGroupNCCL.cpp:1895] boom", YEAR)
    assert (named.ident.host, named.ident.rank, named.level, named.text) == ("worker-1", 3, "error", "boom")
    assert parse_line("worker-1: RuntimeError: NCCL error", YEAR).text == "RuntimeError: NCCL error"
    for plain in ("RuntimeError: worker-1: refused", "step-1: loss 0.3", "epoch-2: 100%|###", "NCCL-version: 2.18"):
        line = parse_line(plain, YEAR)
        assert (line.text, line.ident.host, line.stream) == (plain, None, ""), plain


def test_mpirun_timestamp_output_and_nccl_2_0_lines() -> None:
    """mpirun --timestamp-output puts a ctime stamp before --tag-output's label (corpus b069);
    NCCL 2.0-2.2 wrote no "NCCL" before the level (corpus k11)."""
    stamped = (
        "Fri Aug 11 12:31:45 2023[1,3]<stdout>:tomte401:1850304:1881110 [3] transport.cc:154 NCCL WARN Cuda failure"
    )
    line = parse_line(stamped, YEAR)
    assert (line.ident.rank, line.ident.host, line.nccl) == (3, "tomte401", "WARN")
    assert (
        line.time == dt.datetime(2023, 8, 11, 12, 31, 45).timestamp()
        and stream_of(stamped.encode()) == b"[1,3]<stdout>:"
    )
    old = parse_line("e66aa18dc444:3171:3171 [0] include/socket.h:311 WARN Socket creation failed : Address", YEAR)
    assert (old.ident.host, old.nccl, old.text) == (
        "e66aa18dc444",
        "WARN",
        "NCCL WARN Socket creation failed : Address",
    )
    assert parse_line("host:1:2 [0] WARN no source line, no NCCL: not NCCL's", YEAR).nccl is None


def test_two_ranks_failing_at_the_same_stamp_are_not_ordered(tmp_path: Path) -> None:
    """Second-resolution stamps that tie say nothing about which rank failed first (corpus b069): a tie names
    nobody (issue 25)."""
    log = tmp_path / "job.log"
    log.write_text(
        "Fri Aug 11 12:31:45 2023[1,0]<stdout>:tomte401:1:2 [0] transport.cc:154 NCCL WARN Cuda failure 'invalid argument'\n"
        "Fri Aug 11 12:31:45 2023[1,3]<stdout>:tomte401:4:5 [3] transport.cc:154 NCCL WARN Cuda failure 'invalid argument'\n"
    )
    _, diag = diagnose_paths([str(log)], jobs=1)
    p = diag.primary
    assert p is not None and p.confidence == "unknown" and p.culprits == [], (p.culprits, p.confidence)
    assert "0,3" in p.reason or "0, 3" in p.reason, p.reason
    assert p.hosts == ["tomte401"], "a CUDA failure is its host's: the host that printed it is named"


def test_a_local_failure_names_the_host_that_printed_it_a_peer_failure_does_not(tmp_path: Path) -> None:
    oom = tmp_path / "oom.log"
    oom.write_text("gpu-a-7:100:200 [2] NCCL INFO init.cc:1 -> 1\n"
                   "gpu-a-7:100:200 [2] enqueue.cc:88 NCCL WARN Cuda failure 'out of memory'\n")  # fmt: skip
    _, diag = diagnose_paths([str(oom)], jobs=1)
    assert diag.vocab_class == "oom" and diag.primary is not None and diag.primary.hosts == ["gpu-a-7"]
    closed = tmp_path / "closed.log"
    closed.write_text("gpu-b-2:100:200 [0] misc/socket.cc:49 NCCL WARN Net : Connection closed by remote peer "
                      "gpu-c-9<41230>\n")  # fmt: skip
    _, diag = diagnose_paths([str(closed)], jobs=1)
    assert diag.primary is not None and "gpu-b-2" not in diag.primary.hosts, "the host that saw its peer go is a victim"


def test_pdsh_prefix_reads_like_the_plain_log(tmp_path: Path) -> None:
    plain = _events(scan_file(str(SHAPES / "rank-prefix.log")))
    for prefix in (b"10.1.2.3: ", b"node-17: node-17: "):
        res = scan_file(str(_variant(tmp_path, "pdsh.log", lambda ls, p=prefix: b"\n".join(p + ln for ln in ls))))
        assert _events(res) == plain, prefix
        assert {e.ident.host for e in res.events if e.ident.pid is None} <= {prefix.split(b":")[0].decode()}


def test_torchrun_role_named_after_the_host() -> None:
    """``torchrun --role `hostname -s`: --tee 3`` (a common SLURM recipe; corpus a045)."""
    line = parse_line("[gpu187:2]:torch.cuda.OutOfMemoryError: CUDA out of memory.", YEAR)
    assert (line.ident.host, line.ident.local_rank, line.ident.rank) == ("gpu187", 2, None)
    assert line.text.startswith("torch.cuda.OutOfMemoryError") and line.stream == "[gpu187:2]:"
    assert parse_line("[utils.py:12]: hello", YEAR).ident.host is None, "a logger's file:line is no host"


def test_docker_compose_prefix_names_the_container() -> None:
    """``docker compose logs``: the container, padded (corpus m09, a Horovod stall under compose)."""
    line = parse_line("1469.worker.1  | [2019-06-04T16:49:20Z] Stalled ops:Loss [missing ranks: 0]", YEAR)
    assert (line.ident.host, line.stream, line.text) == (
        "1469.worker.1",
        "1469.worker.1  |",
        "Stalled ops:Loss [missing ranks: 0]",
    )
    ranked = parse_line("worker-1  | [rank1]:[E808 10:31:07.406255799 ProcessGroupNCCL.cpp:1895] boom", YEAR)
    assert (ranked.ident.host, ranked.ident.rank, ranked.text) == ("worker-1", 1, "boom")
    for plain in ("ERROR    | __main__:main:42 - boom", "0 | model | ResNet | 11.2 M", "Error | x"):
        assert parse_line(plain, YEAR).ident.host is None, plain  # loguru levels, Lightning's summary table


def test_a_local_system_call_names_its_host_a_connect_does_not(tmp_path: Path) -> None:
    """NCCL's "Call to bind failed" is the printing host's own (corpus b051); "Call to connect
    returned Connection refused" is its peer's doing."""
    bind = tmp_path / "bind.log"
    bind.write_text(
        "nd20-01:5:6 [0] misc/socket.cc:402 NCCL WARN Call to bind failed : Cannot assign requested address\n"
    )
    _, diag = diagnose_paths([str(bind)], jobs=1)
    assert diag.vocab_class == "nccl_system_error" and diag.primary is not None and diag.primary.hosts == ["nd20-01"]
    connect = tmp_path / "connect.log"
    connect.write_text(
        "nd20-02:5:6 [0] misc/socket.cc:456 NCCL WARN Call to connect returned Connection refused, retrying\n"
    )
    _, diag = diagnose_paths([str(connect)], jobs=1)
    assert diag.primary is not None and "nd20-02" not in diag.primary.hosts, (diag.vocab_class, diag.primary.hosts)


# The four ranks' last lines of a real run of tests/diagnose/scripts/worker.py (SCENARIO=skip: rank 2
# skips an all_reduce; torch 2.13, gloo, 4 ranks on one host), from a run where rank 0's peer exited
# after its own timeout before rank 0's timed out (about 1 run in 6; test_launcher met it in CI)
SKIP_PEER_CLOSED = """\
[default2]:[rank2]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 5000ms for recv operation to complete
[default3]:[rank3]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:129] Timed out waiting 5000ms for send operation to complete
[default0]:[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:3508. This is typically caused by a remote worker crashing. Check the logs of the remote worker before reporting an error. GLHF!
[default1]:[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 5000ms for recv operation to complete
"""


def test_a_pair_closed_while_the_others_time_out_is_the_timeouts_echo(tmp_path: Path) -> None:
    """Rank 0 lost its pair because the peer exited after its own timeout: the verdict is the
    collective timeout, not a network error, and no loopback-alias advice (the pair had connected)."""
    log = tmp_path / "console.log"
    log.write_text(SKIP_PEER_CLOSED)
    _, diag = diagnose_paths([str(log)], jobs=1)
    p = diag.primary
    assert p is not None and p.code == "COL003" and p.culprits == [], (p and p.code, p and p.summary)
    assert not any("loopback" in c.summary for c in [p, *diag.others])
