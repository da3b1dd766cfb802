"""The facts body in sections (validator/preflight/sections.py): what participants and node
leaders send, what the coordinator reads, and the bounds on both. The live coordinator is fed
these frames in tests/preflight/test_wire_fuzz.py and tests/preflight/test_aggregate.py."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.preflight.conftest import base_env, ranks
from validator import model, pipeline
from validator.facts.schema import SchemaError, validate_facts
from validator.preflight import protocol as wire
from validator.preflight import sections

FACTS = pipeline.probe_local(environ=base_env(**ranks(2, 1)[1]), port_check=False)


def rank_doc(r: int) -> dict[str, Any]:
    doc = json.loads(json.dumps(FACTS))
    doc["pid"] = 1000 + r
    doc["launch"].update(rank=r, local_rank=r)
    return doc


def test_the_grouped_fields_are_facts_fields_and_a_ranks_own_stay_in_its_own_text() -> None:
    hints = typing.get_type_hints(model.Facts)
    assert set(hints) >= sections.GROUPED
    assert sum(map(len, sections.GROUPS.values())) == len(sections.GROUPED), "a field in one group only"
    # what differs between a node's ranks (launch, env: RANK, LOCAL_RANK) or nodes (host, pid) is the rank's own
    assert not {"host", "hostname", "pid", "launch", "env"} & sections.GROUPED


def test_sections_and_the_whole_document_say_the_same() -> None:
    parts = sections.pieces(FACTS)
    assert [name for name, _ in parts] == ["", "node", "job"]
    assert json.loads(sections.document(parts)) == json.loads(json.dumps(FACTS))
    ((doc, ok),) = sections.Parsed().documents([parts])
    assert ok and doc == json.loads(json.dumps(FACTS))


def test_a_leaders_frame_holds_each_distinct_text_once() -> None:
    docs = [rank_doc(r) for r in range(8)]
    ranks_ = [("", f"t{r}", sections.pieces(d)) for r, d in enumerate(docs)]
    fields, body = sections.frame(ranks_, True, leader=True)  # type: ignore[arg-type]
    whole = sum(len(json.dumps(d, separators=(",", ":"))) for d in docs)
    # each rank's own text, and the node's and the job's once
    assert len(fields["chunks"]) == 8 + 2
    assert len(body) < whole / 2, (len(body), whole)
    got, spans = sections.read({**fields, "token": "t0"}, len(body), "t0")
    chunks = [body[a:b] for a, b in spans]
    texts = []
    for (token, _, refs), (_, want_token, parts) in zip(got, ranks_, strict=True):
        texts.append([(name, chunks[i]) for name, i in refs])
        assert token == want_token and sections.signed(texts[-1]) == sections.signed(parts)  # what each rank signed
    out = [doc for doc, ok in sections.Parsed().documents(texts) if ok]
    assert out == docs
    assert all(o["gpus"] is out[0]["gpus"] and o["software"] is out[0]["software"] for o in out), "one per text"
    assert len({id(o["launch"]) for o in out}) == 8


def test_the_same_text_is_parsed_once_per_job_and_only_the_same_text_shares() -> None:
    parsed = sections.Parsed()
    job = {k: FACTS[k] for k in sections.GROUPS["job"]}
    ((a, ok_a),) = parsed.parse([("job", json.dumps(job).encode())])
    ((b, ok_b),) = parsed.parse([("job", json.dumps(job).encode())])
    other = dict(job, software=dict(job["software"], python="3.99.0"))
    ((c, _),) = parsed.parse([("job", json.dumps(other).encode())])
    assert ok_a and ok_b and a is b and c is not a and c["software"]["python"] == "3.99.0"
    # a text that is not what its fields hold is known as such, whoever sends it
    wrong = json.dumps(dict(job, software={"python": 3})).encode()
    ((bad, ok),) = parsed.parse([("job", wrong)])
    assert not ok and parsed.parse([("job", wrong)]) == [(bad, False)]
    mixed = [(n, t) for n, t in sections.pieces(FACTS) if n != "job"] + [("job", wrong)]
    ((doc, fine),) = parsed.documents([mixed])
    assert not fine
    with pytest.raises(SchemaError, match="software"):
        validate_facts(doc, "peer", matched=fine)


def test_what_the_coordinator_keeps_is_bounded() -> None:
    parsed = sections.Parsed()
    parsed.parse([("node", json.dumps({"X": str(i)}).encode()) for i in range(parsed.KEEP + 50)])
    assert parsed.count["node"] == parsed.KEEP
    parsed.parse([("job", b'{"big":"' + b"x" * (parsed.KEPT) + b'"}')])
    assert parsed.bytes <= parsed.KEPT


def header(**fields: Any) -> dict[str, Any]:
    return {"type": "facts", "token": "t", "mac": "", **fields}


@pytest.mark.parametrize(
    ("fields", "size", "why"),
    [
        ({"chunks": [3, 4], "sections": [["", 0], ["env", 1]]}, 8, "do not add up"),
        ({"chunks": [3, 0], "sections": [["", 0]]}, 3, "do not add up"),
        ({"chunks": [], "sections": [["", 0]]}, 0, "bad chunks"),
        ({"chunks": [3], "sections": [["", 1]]}, 3, "bad section"),
        ({"chunks": [3], "sections": [["", -1]]}, 3, "bad section"),
        ({"chunks": [3], "sections": [["", 0], ["", 0]]}, 3, "a section twice"),
        ({"chunks": [3], "sections": [[["a"], 0]]}, 3, "bad section"),
        ({"chunks": [3], "sections": [[{}, 0]]}, 3, "bad section"),
        ({"chunks": [3], "sections": [["rootkit", 0]]}, 3, "bad section"),
        ({"chunks": [3], "sections": [["env", 0]]}, 3, "bad section"),
        ({"chunks": [3], "sections": [["", True]]}, 3, "bad section"),
        ({"chunks": [3], "sections": []}, 3, "bad sections"),
        ({"chunks": [3], "sections": "x"}, 3, "bad sections"),
        (
            {"chunks": [3] * (sections.MAX_CHUNKS + 1), "sections": [["", 0]]},
            3 * (sections.MAX_CHUNKS + 1),
            "bad chunks",
        ),
        ({"chunks": [3], "ranks": [{"mac": "", "token": "a", "sections": [["", 0]]}] * 65}, 3, "bad ranks"),
        ({"chunks": [3], "ranks": [{"mac": "", "token": "", "sections": [["", 0]]}]}, 3, "bad rank entry"),
        ({"chunks": [3], "ranks": [{"mac": "", "token": "a" * 65, "sections": [["", 0]]}]}, 3, "bad rank entry"),
        # each rank within one document's size, but together more than a frame's: refused before any join
        (
            {"chunks": [wire.MAX_FACTS], "ranks": [{"mac": "", "token": "a", "sections": [["", 0]]}] * 5},
            wire.MAX_FACTS,
            "over the facts size",
        ),
        ({"ranks": [{"size": 3, "mac": "", "token": "a"}]}, 4, "do not add up"),
        ({"ranks": [{"size": 0, "mac": "", "token": "a"}]}, 0, "bad rank entry"),
    ],
)
def test_out_of_bounds_layouts_are_one_protocol_error(fields: dict[str, Any], size: int, why: str) -> None:
    with pytest.raises(wire.ProtocolError, match=why):
        sections.read(header(**fields), size, "t")


def test_texts_run_into_each_other_are_refused() -> None:
    """Texts parsed in one pass must each be one document: "1" then "2" is not 12."""
    parsed = sections.Parsed()
    for texts in ([("", b"{}"), ("node", b"1"), ("job", b"2")], [("", b'{"a":1} '), ("job", b"{}")], [("", b"{")]):
        with pytest.raises(wire.ProtocolError):
            parsed.parse(texts)  # type: ignore[arg-type]
    assert parsed.parse([("job", b'{"ib":null}'), ("node", b"{}")]) == [({"ib": None}, True), ({}, True)]
    own = [("", b'{"pid":1}'), ("node", b'{"pid":2}')]
    with pytest.raises(wire.ProtocolError, match="in two of its texts"):
        parsed.documents([own])
    with pytest.raises(wire.ProtocolError, match="not an object"):
        parsed.documents([[("", b'{"pid":1}'), ("node", b"[]")]])


anything = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**7) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["size", "mac", "token", "sections", "", "env"]), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@given(
    st.dictionaries(st.sampled_from(["chunks", "sections", "ranks", "mac"]), anything, max_size=4),
    st.integers(0, 10**7),
)
@settings(max_examples=400, deadline=None, derandomize=True)
def test_read_raises_only_protocol_error(fields: dict[str, Any], size: int) -> None:
    try:
        got, spans = sections.read(header(**fields), size, "t")
    except wire.ProtocolError:
        return
    assert 1 <= len(got) <= sections.LOCAL_MAX
    assert spans[-1][1] == size and all(0 <= i < len(spans) for _, _, refs in got for _, i in refs)


def test_a_header_without_chunks_is_one_whole_document_whatever_else_it_says() -> None:
    got, spans = sections.read(header(chunks=None, sections=[["node", 0]]), 10, "t")
    assert got == [("t", "", [("", 0)])] and spans == [(0, 10)]


def test_toward_an_older_coordinator_a_leader_sends_whole_documents_one_after_another() -> None:
    """A coordinator that does not say "sections" gets what it always read: each rank's whole
    document, its size in "ranks", the leader's first; read back, they are the same facts."""
    docs = [rank_doc(r) for r in range(3)]
    ranks_ = [("m", f"t{r}", [("", sections.document(sections.pieces(d)))]) for r, d in enumerate(docs)]
    fields, body = sections.frame(ranks_, False, leader=True)  # type: ignore[arg-type]
    assert "chunks" not in fields and [r["size"] for r in fields["ranks"]] == [len(p[0][1]) for _, _, p in ranks_]
    got, spans = sections.read({**fields, "token": "t0"}, len(body), "t0")
    assert [json.loads(body[a:b]) for a, b in spans] == docs
    assert [(token, mac) for token, mac, _ in got] == [(f"t{r}", "m") for r in range(3)]


def test_a_member_of_an_older_validator_travels_whole_in_a_leaders_texts() -> None:
    """A leader of this version whose member sends one whole document (an older validator): the
    document is that rank's one text, and the coordinator reads the same facts from it."""
    new, old = rank_doc(0), rank_doc(1)
    ranks_ = [("", "t0", sections.pieces(new)), ("", "t1", [("", sections.document(sections.pieces(old)))])]
    fields, body = sections.frame(ranks_, True, leader=True)  # type: ignore[arg-type]
    got, spans = sections.read({**fields, "token": "t0"}, len(body), "t0")
    chunks = [body[a:b] for a, b in spans]
    docs = sections.Parsed().documents([[(name, chunks[i]) for name, i in refs] for _, _, refs in got])
    assert [(doc, ok) for doc, ok in docs] == [(new, True), (old, True)]
