"""validator.safejson: the one bounded JSON reader. Each limit refuses with a short line, and
what is within the limits parses exactly as json.loads does."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from validator.errors import UserError
from validator.safejson import JsonError, clip, items, loads, open_regular, read_text, too_deep


@pytest.mark.parametrize(
    "text",
    ['{"a": [1, 2.5, "x", null, true], "b": {"c": -3}}', "[]", '"[[[["', "  7  ", '{"k\\"[": "\\\\[{"}', "1" * 40],
)
def test_within_the_limits_it_is_json_loads(text: str) -> None:
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than 64 levels"),
        ('{"a": ' * 65 + "1" + "}" * 65, "nested more than 64 levels"),
        ("[" + "9" * 41 + "]", "an integer of 41 digits"),
        ("-" + "9" * 5000, "an integer of 5,000 digits"),
        ('{"x": NaN}', "NaN is not a JSON number"),
        ("[-Infinity]", "-Infinity is not a JSON number"),
        ("[1e999]", "a number out of range ('1e999')"),
        ("[-1E400]", "out of range"),
    ],
)
def test_beyond_the_limits_it_is_refused_in_one_short_line(text: str, words: str) -> None:
    with pytest.raises(JsonError) as e:
        loads(text, "f.json")
    assert words in str(e.value) and str(e.value).startswith("f.json: ")
    assert len(str(e.value)) < 200 and not e.value.syntax


def test_depth_is_counted_outside_strings_only() -> None:
    deep_in_strings = json.dumps({"a": "[" * 1000, "b": "{" * 1000, "c": '\\"[[[' * 100})
    assert not too_deep(deep_in_strings.encode()) and loads(deep_in_strings)["a"] == "[" * 1000
    nested = "[" * 64 + "]" * 64
    assert not too_deep(nested.encode()) and too_deep(("[" + nested + "]").encode())


def test_size_is_refused_before_parsing() -> None:
    with pytest.raises(JsonError, match=r"JSON document larger than 1 KiB \(2 KiB\); refused"):
        loads(" " * 2048, "x", max_bytes=1024)


def test_syntax_errors_name_the_line_and_say_truncated() -> None:
    with pytest.raises(JsonError) as e:
        loads('{\n "a": 1,\n "b": oops\n}', "f.json")
    assert str(e.value) == "f.json:3: not valid JSON: Expecting value (column 7)" and e.value.syntax
    with pytest.raises(JsonError, match=r"^f.json:7: .*truncated line\?$"):
        loads('{"a": [1, 2', "f.json", line=7, unit="line")
    with pytest.raises(JsonError, match="byte 2 is not UTF-8"):
        loads(b'["\xff"]')


def test_items_yields_array_elements_one_at_a_time() -> None:
    it = items('[{"a": 1}, 2 , [3]\n, "x" ]')
    assert next(it) == {"a": 1} and list(it) == [2, [3], "x"]
    assert list(items("[ ]")) == [] and list(items('{"a": 1}')) == [{"a": 1}]
    bad = items("[1, 2 3]", "f.json")
    assert next(bad) == 1
    with pytest.raises(JsonError, match="Expecting ',' delimiter"):
        list(bad)
    with pytest.raises(JsonError, match="Extra data"):
        list(items("[1] 2"))


def test_clip_quotes_a_prefix() -> None:
    assert clip("short") == "'short'"
    assert clip("x" * 10_000) == repr("x" * 40) + "... (10,000 characters)"


def test_non_regular_files_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"not a regular file \(a FIFO\)"):
        read_text(str(fifo), 100)
    with pytest.raises(UserError, match=r"not a regular file \(a directory\)"):
        read_text(str(tmp_path), 100)
    with pytest.raises(UserError, match="cannot read file: No such file or directory"):
        read_text(str(tmp_path / "absent"), 100)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(UserError, match="file is larger than 100 bytes"):
        read_text(str(big), 100)
    with open_regular(str(big)) as f:
        assert f.read() == b"x" * 101


def test_depth_is_right_across_the_scanning_windows() -> None:
    """Strings that span the 1 MiB windows, with brackets and escaped quotes in them."""
    filler = '\\"[{' * 400_000  # 1.6 MB of escaped quotes and brackets inside one string
    shallow = json.dumps(["a", filler, {"b": [filler, "]]]"]}])
    assert not too_deep(shallow.encode()) and loads(shallow, max_bytes=8 << 20)[2]["b"][1] == "]]]"
    deep = json.dumps([filler, "x" * 700_000]).rstrip("]") + "," + "[" * 70 + "]" * 70 + "]"
    assert too_deep(deep.encode())


def test_a_document_the_caller_s_schema_accepts_skips_the_depth_walk_and_no_other_does() -> None:
    from validator.facts.schema import matches
    from validator.preflight import protocol as wire

    deep = '{"env": ' + "[" * 40 + "]" * 40 + "}"
    with pytest.raises(JsonError, match="nested more than 32"):
        loads(deep, max_depth=32, shallow=matches)  # not facts: walked, refused
    with pytest.raises(wire.ProtocolError, match="nested more than 32"):
        wire.loads(deep.encode(), shallow=matches)
    walked: list[object] = []
    assert loads('{"a": [1]}', shallow=lambda d: walked.append(d) or True) == {"a": [1]}
    assert walked == [{"a": [1]}]
