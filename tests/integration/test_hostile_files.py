"""`validator check` and `validator profiles validate` on hostile files (issue 10): each is one
line naming the file (and line where known), exit 2, no traceback, a short quote at most, and
the command runs under a 512 MiB address-space limit (it would die of MemoryError otherwise).
The limits are documented in docs/usage.md ("Limits")."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR
from tests.factories import rank_job

MEMORY = 512 << 20


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*VALIDATOR, *args], capture_output=True, text=True, timeout=120, preexec_fn=_limit, check=False
    )


def assert_refused(p: subprocess.CompletedProcess[str], where: str, *words: str) -> str:
    """Exit 2 and one short line on stderr that names ``where`` and says ``words``."""
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "Error:" not in p.stderr, p.stderr[-2000:]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 400, p.stderr[:2000]
    assert where in lines[0] and all(w in lines[0] for w in words), lines[0]
    assert len(p.stdout) < 4000  # the report quotes no more than the error line
    return lines[0]


def facts_doc(**launch: object) -> str:
    doc = json.loads(json.dumps(rank_job(2, 1)[0]))
    doc["launch"].update(launch)
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("deep.json", "[" * 100_000 + "]" * 100_000, ["nested more than 64 levels"]),
        ("digits.json", '{"schema": 1, "pid": ' + "7" * 5000 + "}", ["5,000 digits"]),
        ("inf.json", '{"schema": 1, "pid": Infinity}', ["Infinity"]),
        ("nan.json", '[{"probe_ms": NaN}]', ["NaN"]),
        ("huge.json", '{"schema": 1, "time": 1e999}', ["out of range", "1e999"]),
        ("ws.json", facts_doc(world_size=10**9), ["launch.world_size", "1,000,000,000"]),
        ("nnodes.json", facts_doc(nnodes=10**9), ["launch.nnodes"]),
        ("binary.json", "\x00\x01\x02", ["not valid JSON"]),
    ],
)
def test_check_refuses_hostile_facts_in_one_line(tmp_path: Path, name: str, text: str, words: list[str]) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert_refused(run("check", str(path)), str(path), *words)


def test_a_500_mb_single_line_is_refused_by_size_quoting_a_prefix(tmp_path: Path) -> None:
    """A sparse 500 MB file: one JSON document on one line, never read whole."""
    path = tmp_path / "big.json"
    with path.open("wb") as f:
        f.write(b'{"schema": 1, "kind": "' + b"x" * 1000)
        f.truncate(500 << 20)
    line = assert_refused(run("check", str(path)), f"{path}:1", "larger than 16 MiB", "JSON Lines")
    assert "x" * 41 not in line


def test_an_over_long_line_of_json_lines_is_skipped_and_the_rest_is_checked(tmp_path: Path) -> None:
    """Good document, a 500 MB line (sparse, streamed past), a good document: both good ones are
    checked, the long line is one input error."""
    docs = [json.dumps(d) for d in rank_job(2, 1)]
    path = tmp_path / "all.jsonl"
    with path.open("wb") as f:
        f.write(docs[0].encode() + b"\n" + b'{"x": "')
        f.seek(500 << 20)
        f.write(b'"}\n' + docs[1].encode() + b"\n")
    p = run("check", str(path))
    assert_refused(p, f"{path}:2", "line longer than 4 MiB")
    assert "2 participants" in p.stdout, p.stdout


def test_non_regular_files_are_skipped_not_waited_for(tmp_path: Path) -> None:
    fifo = tmp_path / "facts.json"
    os.mkfifo(fifo)
    assert_refused(run("check", str(fifo)), str(fifo), "not a regular file (a FIFO)")
    assert_refused(run("check", "/dev/zero"), "/dev/zero", "not a regular file")
    profile = tmp_path / "p.yaml"
    os.mkfifo(profile)
    assert_refused(run("profiles", "validate", str(profile)), str(profile), "not a regular file")


ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9 if prev else ['lol'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (b"\x00\xff\xfe binary", 1, ["not a text file"]),
        (b"name: x\n? [a, b]\n: 1\n", 2, ["keys must be plain names"]),
        (b"name: x\nnodes: " + b"9" * 5000 + b"\n", 2, ["nodes must be at most", "5,000 characters"]),
        (ALIAS_BOMB.encode(), 2, ["aliases"]),
        (b"hosts: n[0-9999999]\n", 1, ["10,000,000 hosts", "at most 131,072"]),
        (b"env: " + b"[" * 100_000 + b"]" * 100_000 + b"\n", 1, ["nested deeper than 16"]),
        (b"env:\n  K: [" + b"a, " * 20_000 + b"]\n", 2, ["more than 10,000 YAML nodes"]),
        (b"env:\n  ? [a]\n  : b\n", 2, ["env names must be plain names"]),
    ],
)
def test_profiles_validate_refuses_hostile_profiles_in_one_line(
    tmp_path: Path, data: bytes, line: int, words: list[str]
) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(data)
    assert_refused(run("profiles", "validate", str(path)), f"{path}:{line}", *words)


def test_check_with_a_hostile_profile_is_one_line(tmp_path: Path) -> None:
    """As every command stops on a bad profile: one line naming the file and line, exit 2, no report
    (issue 21: check used to print a whole report without the profile)."""
    profile = tmp_path / "p.yaml"
    profile.write_text("nodes: 2\nhosts: n[0-9999999]\n")
    files = []
    for i, doc in enumerate(rank_job(2, 2)):
        files.append(tmp_path / f"rank{i}.json")
        files[-1].write_text(json.dumps(doc))
    p = run("check", *map(str, files), "--profile", str(profile))
    assert_refused(p, f"{profile}:2", "10,000,000 hosts")
    assert p.stdout == "" and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_an_array_of_millions_of_tiny_documents_stops_after_100_bad_ones(tmp_path: Path) -> None:
    """16 MiB of `[{},{},...]` is 5.6 million documents, 24 times its size in memory if parsed
    at once: the array is read one element at a time and abandoned after 100 bad documents."""
    path = tmp_path / "tiny.json"
    path.write_text("[" + ",".join(["{}"] * ((16 << 20) // 3 - 2)) + "]")
    p = run("check", str(path))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 101 and lines[-1].endswith("more than 100 bad documents; the rest of the file is not read")
    assert all(line.startswith(f"validator: {path}[") and "schema: missing field" in line for line in lines[:-1])


def test_a_facts_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """An editor on Windows writes a UTF-8 byte order mark; RFC 8259 lets a parser ignore it (it was refused as
    "Expecting value (column 1)", naming nothing)."""
    docs = [json.loads(json.dumps(f)) for f in rank_job(1, 2)]
    for i, doc in enumerate(docs):
        (tmp_path / f"r{i}.json").write_bytes(b"\xef\xbb\xbf" * (i == 0) + json.dumps(doc).encode())
    p = run("check", str(tmp_path / "r0.json"), str(tmp_path / "r1.json"), "-f", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["participants"] == 2


def test_a_log_truncated_in_place_is_read_past_its_hole(tmp_path: Path) -> None:
    """logrotate's copytruncate leaves a writer at its old offset: the log starts with a hole of NULs as long as it
    was (6 MiB here: past a read chunk and the longest line kept). It was skipped as binary, and its first line,
    after the hole, was lost."""
    log = tmp_path / "rank1.log"
    with open(log, "wb") as f:
        f.truncate(6 << 20)  # a sparse hole, as the truncated file has
        f.seek(6 << 20)
        f.write(b"[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    p = run("diagnose", str(log), "-f", "json")
    assert p.returncode == 1, p.stderr
    found = json.loads(p.stdout)["findings"]
    assert found and found[0]["code"] == "DGN008" and found[0]["ranks"] == "1", found
