"""Fuzzing the readers of untrusted files (issue 10): the facts loader (`validator check`) and
the profile loader (`validator profiles validate`, `--profile`), with random and structured
mutations of real inputs: this machine's own agent output and facts, the factories' facts and
the shipped launch profiles.

Whatever the input: no exception escapes (only a UserError of one short line), the checks run
on what loaded without crashing (no VAL900), and memory stays bounded (tracemalloc peak).
Examples are small and few so that the suite stays quick; run with
``--hypothesis-seed=N`` or more examples (HYPOTHESIS_PROFILE=long) to dig deeper.
"""

from __future__ import annotations

import json
import os
import tempfile
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.factories import node_job, rank_job
from validator.checks import run_checks
from validator.errors import UserError
from validator.pipeline import load_inputs
from validator.profiles import Profile, load_profile

ROOT = Path(__file__).resolve().parent.parent.parent
PROFILES = [p.read_text() for p in sorted((ROOT / "launch_profiles").glob("*.yaml"))]
MAX_PEAK = 64 << 20  # bytes traced while loading and checking one small input
LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"
FUZZ = settings(
    max_examples=1000 if LONG else 60,
    deadline=timedelta(seconds=20),  # a hang shows as a failure, not a stuck suite
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=not LONG,  # the same examples on every run: no flaky CI
    database=None,  # nothing written into the checkout
)


@cache
def real_documents() -> tuple[str, ...]:
    """Real inputs, serialised: this machine's raw agent document and its facts, the same
    document with each captured launcher environment of tests/fixtures/launch, and facts of
    rank- and node-mode jobs from the factories."""
    from validator.agent.probe import collect, filtered_env
    from validator.facts import parse

    raw = collect(["torchrun", "--nnodes=2", "--nproc-per-node=2", "train.py"], port_check=False)
    docs: list[Any] = [raw, parse(raw), *rank_job(2, 2), *node_job(2, 2)]
    for path in sorted((ROOT / "tests" / "fixtures" / "launch").glob("*.env")):
        lines = path.read_text().splitlines()
        env = dict(ln.split("=", 1) for ln in lines if "=" in ln and not ln.startswith("#"))
        docs.append({**raw, "env": filtered_env(env), "argv": None})
    return tuple(json.dumps(d) for d in docs)


# ----------------------------------------------------------------------------- mutations

HOSTILE: list[Any] = [
    None, True, -1, 0, 10**9, -(10**9), 10**30, 2**63, 1e308, "", "x" * 10_000, "n[0-9999999]",
    "1(x999999999)", [], {}, [[[[[[]]]]]], {"a": {"b": {"c": {}}}}, "pid 1 (x --password=y)", "\u0000\udfff",
]  # fmt: skip
RAW_HOSTILE = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"9" * 5000, b"[" * 5000, b"{" * 3000, b'"\\ud800"']


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _replace(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


@st.composite
def facts_file(draw: st.DrawFn) -> bytes:
    """A real document with a few fields replaced, removed or made hostile, then serialised
    (one document, an array or JSON Lines) and possibly damaged byte by byte."""
    docs = [json.loads(t) for t in draw(st.lists(st.sampled_from(real_documents()), min_size=1, max_size=3))]
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(docs) - 1))
        path = draw(st.sampled_from(list(_paths(docs[i]))))
        value = draw(st.one_of(st.sampled_from(HOSTILE), st.from_type(int), st.text(max_size=20)))
        docs[i] = _replace(docs[i], path, value, delete=bool(path) and draw(st.booleans()))
    layout = draw(st.sampled_from(["lines", "array", "one"]))
    if layout == "lines":
        data = "\n".join(json.dumps(d) for d in docs).encode("utf-8", "surrogatepass")
    else:
        data = json.dumps(docs if layout == "array" else docs[0], indent=1).encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(0, 3))):
        pos = draw(st.integers(0, len(data)))
        how = draw(st.sampled_from(["insert", "raw", "cut", "flip"]))
        if how == "insert":
            data = data[:pos] + draw(st.binary(max_size=16)) + data[pos:]
        elif how == "raw":
            data = data[:pos] + draw(st.sampled_from(RAW_HOSTILE)) + data[pos:]
        elif how == "cut":
            data = data[:pos]
        elif pos < len(data):
            data = data[:pos] + bytes([data[pos] ^ (1 << draw(st.integers(0, 7)))]) + data[pos + 1 :]
    return data


HOSTILE_LINES = [
    "? [a, b]\n: 1\n", "nodes: " + "9" * 5000 + "\n", "a: &a [x, x]\nb: [*a, *a]\n", "hosts: n[0-9999999]\n",
    "env: " + "[" * 200 + "]" * 200 + "\n", "nodes: !!python/object:os.system 'true'\n", "master_port: 0x10000\n",
    "launcher: \"\\udfff\"\n", "env:\n  K: *undefined\n", "versions: {torch: [1]}\n", "%YAML 1.1\n---\n", "nodes: 1:30\n",
]  # fmt: skip


@st.composite
def profile_file(draw: st.DrawFn) -> bytes:
    lines = draw(st.sampled_from(PROFILES)).splitlines(keepends=True)
    for _ in range(draw(st.integers(0, 3))):
        pos = draw(st.integers(0, len(lines)))
        how = draw(st.sampled_from(["hostile", "text", "drop", "dup"]))
        if how == "hostile":
            lines.insert(pos, draw(st.sampled_from(HOSTILE_LINES)))
        elif how == "text":
            lines.insert(pos, draw(st.text(max_size=30)) + "\n")
        elif lines and how == "drop":
            del lines[min(pos, len(lines) - 1)]
        elif lines:
            lines.insert(pos, lines[min(pos, len(lines) - 1)])
    data = "".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        pos = draw(st.integers(0, len(data)))
        data = data[:pos] + draw(st.binary(max_size=8)) + data[pos + draw(st.integers(0, 4)) :]
    return data


# ----------------------------------------------------------------------------- properties


@contextmanager
def written(data: bytes, suffix: str) -> Iterator[str]:
    fd, path = tempfile.mkstemp(suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        os.unlink(path)


@contextmanager
def bounded_memory() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_PEAK, f"{peak:,} bytes traced"


def one_line(message: str) -> None:
    assert message and "\n" not in message and len(message) < 1200, message[:300]
    assert "Traceback" not in message


@FUZZ
@given(facts_file())
def test_facts_loader_survives_mutated_real_facts(data: bytes) -> None:
    with written(data, ".json") as path, bounded_memory():
        facts, errors = load_inputs([path])
        for error in errors:
            one_line(error)
            assert path in error  # names the file
        findings = run_checks(facts)
    assert not [f.message for f in findings if f.code == "VAL900"]


@FUZZ
@given(st.binary(max_size=2048))
def test_facts_loader_survives_random_bytes(data: bytes) -> None:
    with written(data, ".json") as path, bounded_memory():
        facts, errors = load_inputs([path])
        for error in errors:
            one_line(error)
    assert facts == []  # no string of 2 KiB is a valid facts document


@FUZZ
@given(profile_file())
def test_profile_loader_survives_mutated_real_profiles(data: bytes) -> None:
    with written(data, ".yaml") as path, bounded_memory():
        try:
            profile: Profile | None = load_profile(path)
        except UserError as e:
            one_line(str(e))
            assert str(e).startswith(path)  # names the file (and the line where known)
            profile = None
        if profile is not None:
            findings = run_checks(rank_job(2, 2), profile)
            assert not [f.message for f in findings if f.code == "VAL900"]
