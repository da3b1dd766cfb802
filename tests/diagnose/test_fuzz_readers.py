"""Property-based fuzzing (issue 10 item 6) of the diagnose readers: the log scanner and the
Flight Recorder readers (pickle and JSON), on random and structured mutations of real inputs.

Properties: no exception escapes (a reader may only refuse with a one-line UserError naming
the file), what is kept is bounded (event text, rendered values). Examples are few and small so
the suite stays fast; the deadline is explicit and generous (a hang or a blow-up, not a slow
machine, is what it catches).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pickle
import resource
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from validator.diagnose import flightrec
from validator.diagnose.filescan import TEXT_MAX, scan_file
from validator.diagnose.run import diagnose_paths
from validator.errors import UserError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "diagnose"
CORPUS = Path("/work/shared/corpus/diagnose-gen1/cases")
LOGS = sorted((FIXTURES / "public").glob("*.log")) + sorted((FIXTURES / "shapes").glob("*.log"))
LOGS += sorted(CORPUS.glob("*.log"))[:12] if CORPUS.is_dir() else []
SEEDS = [p.read_bytes()[: 16 << 10] for p in LOGS]
FR_JSON = [json.loads(p.read_text()) for p in sorted((FIXTURES / "fr-gloo").glob("*.json"))]
LONG = int(os.environ.get("VALIDATOR_FUZZ_EXAMPLES", "0"))  # a longer, random run: VALIDATOR_FUZZ_EXAMPLES=2000
FUZZ = settings(
    max_examples=LONG or 40,
    deadline=dt.timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=not LONG,
)
JUNK = [b"\x00", b"\r", b"\x1b[31m", b"[0m", b"\n", b"[rank", b"]:", b"[default1]:", b"9" * 5000, b"Traceback (most recent call last):\n",
        b"Last error:\n", b"ChildFailedError", b"Root Cause", b"WorkNCCL(", b"Rendezvous complete", b"\xff\xfe", b"(pid=", b"||",
        b"[pod/x/y] ", b"Oct 16 02:07:00 ", b"[123] ", b"  File \"x.py\", line 99999999999999999999, in f\n", b"rror" * 100]  # fmt: skip


@st.composite
def mutated_log(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(0, 8))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "dup", "junk", "cut"]))
        pos = draw(st.integers(0, len(data)))
        if op == "flip" and data:
            i = min(pos, len(data) - 1)
            data[i] = draw(st.integers(0, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(max_size=64))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 512))]
        elif op == "dup":
            end = min(len(data), pos + draw(st.integers(1, 2048)))
            data[pos:pos] = data[pos:end] * draw(st.integers(1, 4))
        elif op == "junk":
            data[pos:pos] = draw(st.sampled_from(JUNK)) * draw(st.integers(1, 3))
        else:
            del data[pos:]
    return bytes(data)


BASE_KIB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # whatever the suite loaded before


def _memory_bounded() -> None:
    """The examples so far grew the test process's peak RSS by less than the 512 MiB budget."""
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < BASE_KIB + (512 << 10)


def _write(data: bytes, name: str) -> tuple[tempfile.TemporaryDirectory[str], Path]:
    d = tempfile.TemporaryDirectory()
    p = Path(d.name) / name
    p.write_bytes(data)
    return d, p


@FUZZ
@given(mutated_log())
def test_scanner_never_raises_on_mutated_logs(data: bytes) -> None:
    d, p = _write(data, "rank3.log")
    with d:
        res = scan_file(str(p))
        assert res.error is None or data[:2] == b"\x1f\x8b"  # a mutation that made it look gzipped
        assert all(len(e.text) <= TEXT_MAX for e in res.events)
        assert all(e.source.startswith("rank3.log:") for e in res.events)
        report, diag = diagnose_paths([str(p)])  # and the stages after it, on what it read
        assert report.input_errors == []
        assert diag.failure_class
    _memory_bounded()


@FUZZ
@given(st.binary(max_size=4096))
def test_scanner_never_raises_on_random_bytes(data: bytes) -> None:
    d, p = _write(data, "rank0.log")
    with d:
        res = scan_file(str(p))
        assert res.error is None or data[:2] == b"\x1f\x8b"


PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(1 << 4000), max_value=1 << 4000)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30,
)
FIELDS = ["collective_seq_id", "input_sizes", "output_sizes", "input_dtypes", "profiling_name", "process_group",
          "pg_id", "frames", "state", "is_p2p"]  # fmt: skip


@st.composite
def mutated_dump(draw: st.DrawFn) -> dict[str, Any]:
    doc = json.loads(json.dumps(draw(st.sampled_from(FR_JSON))))
    entries = doc["entries"]
    for _ in range(draw(st.integers(1, 6))):
        target = draw(st.sampled_from(["entry", "entry", "pg_config", "pg_status", "top", "drop"]))
        if target == "entry" and entries:
            e = entries[draw(st.integers(0, len(entries) - 1))]
            e[draw(st.sampled_from(FIELDS))] = draw(PLAIN)
        elif target == "pg_config":
            doc["pg_config"] = {
                "": {"name": draw(PLAIN), "ranks": draw(PLAIN | st.text(alphabet="[]0123456789e,. -", max_size=20))}
            }
        elif target == "pg_status":
            doc["pg_status"] = draw(PLAIN)
        elif target == "top":
            doc[draw(st.sampled_from(["entries", "version", "pg_config"]))] = draw(PLAIN)
        elif entries:
            del entries[draw(st.integers(0, len(entries) - 1)) :]
    return dict(doc)


def _load_all(docs: list[dict[str, Any]], as_pickle: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        dumps = []
        for rank, doc in enumerate(docs):
            p = Path(d) / f"nccl_trace_rank_{rank}"
            p.write_bytes(pickle.dumps(doc) if as_pickle else json.dumps(doc).encode())
            try:
                dumps.append(flightrec.load_dump(str(p), "fr-pickle" if as_pickle else "fr-json"))
            except UserError as e:
                assert str(p) in e.where or str(p) in str(e)
        result = flightrec.analyze(dumps)
        for div, _members in result.divergences:
            assert len(str(div)) < 200_000


@FUZZ
@given(mutated_dump(), st.booleans())
def test_flight_recorder_readers_refuse_cleanly_or_read(doc: dict[str, Any], as_pickle: bool) -> None:
    others = [json.loads(json.dumps(d)) for d in FR_JSON[:3]]
    _load_all([doc, *others], as_pickle)
    _memory_bounded()


@FUZZ
@given(st.sampled_from(FR_JSON), st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=8))
def test_flight_recorder_pickle_byte_flips_refuse_cleanly(doc: dict[str, Any], flips: list[tuple[int, int]]) -> None:
    data = bytearray(pickle.dumps(doc))
    for pos, value in flips:
        data[pos % len(data)] = value
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "nccl_trace_rank_0"
        p.write_bytes(bytes(data))
        try:
            dump = flightrec.load_dump(str(p), "fr-pickle")
        except UserError:
            return
        flightrec.analyze([dump])


# Lines that open a block (a traceback, torchrun's summary, mpirun's report, a C++ stack, a stall report) or that are
# noise: a failure line among them, at any indentation or behind any prefix, is never "no failure found" (issue 25's
# last resort: a block that could not be read must not hide the lines it looked at; zk14's indented paste did)
AROUND = ["", "step 12 loss 0.5", "    x = f(y)", "Traceback (most recent call last):", '  File "a.py", line 3, in <module>',
          "    Traceback (most recent call last):", '      File "b.py", line 9, in f', "Root Cause (first observed failure):",
          "Failures:", "Last error:", "[rank0]: hello", "1: foo", "  ", "Missing ranks:", "ChildFailedError:", "-" * 40,
          "Rendezvous complete for workers. Result:", "The first process to do so was:", "Process name: [[1,0],3]",
          "Exception raised from foo at a.cpp:3 (most recent call first):", "frame #0: c10::Error::Error()", "x" * 200,
          "error_file: <N/A>", "  rank      : 3 (local_rank: 3)", "node1:123:456 [0] NCCL INFO Bootstrap : Using eth0"]  # fmt: skip
FAILURES = ["RuntimeError: boom", "ERROR something broke", "Failed to do the thing", "process aborted", "FAILED step",
            "Timed out waiting", "TIMEOUT reached", "Exception in thread main", "CUDA error: unknown"]  # fmt: skip


@FUZZ
@given(
    before=st.lists(st.sampled_from(AROUND), max_size=12),
    after=st.lists(st.sampled_from(AROUND), max_size=12),
    failure=st.sampled_from(FAILURES),
    lead=st.sampled_from(["", "  ", "    ", "\t", "[rank3]: ", "2: ", "[1,3]<stderr>:"]),
)
def test_a_failure_line_inside_any_block_is_never_no_failure(
    before: list[str], after: list[str], failure: str, lead: str
) -> None:
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "case.log"
        log.write_text("\n".join([*before, lead + failure, *after]) + "\n")
        _, diag = diagnose_paths([str(log)], jobs=1)
    assert diag.primary is not None, log
