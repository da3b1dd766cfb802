"""JSON Schemas (draft 2020-12) of the facts document and of the reports, generated from the
TypedDicts in ``validator.model`` (facts) and ``validator.documents`` (reports) (the same types the loaders and ``to_json`` methods are checked
against), versioned with ``FACTS_SCHEMA`` and ``REPORT_SCHEMA``.

`validator schema facts|report` prints one; `python -m validator.schema docs/schema` writes the
published copies, and a test fails when they drift from this generator.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import types
import typing
from typing import Any

from validator import documents, model
from validator.errors import UserError
from validator.facts.schema import ADDED_LATER

DRAFT = "https://json-schema.org/draft/2020-12/schema"
ID = "urn:cluster-validator:schema"
LEAVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
}
DOCUMENTS: dict[str, tuple[Any, int, str]] = {
    "facts": (model.Facts, model.FACTS_SCHEMA, "What one rank or node sees: `validator probe --json` (docs/facts.md)."),
    "report": (
        documents.AnyReportDoc,
        model.REPORT_SCHEMA,
        "The report of `validator check`, `preflight`, `node-check`, `scan` (adds `scan` and `drain`) and "
        "`diagnose` (adds `diagnosis`) with `--format json`.",
    ),
}


def _convert(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if tp in LEAVES:
        return dict(LEAVES[tp])
    if tp is Any:
        return {}
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(tp))}
    if origin in (typing.Union, types.UnionType):
        options = [_convert(a, defs) for a in typing.get_args(tp)]
        if all(set(o) == {"type"} and isinstance(o["type"], str) for o in options):
            return {"type": [o["type"] for o in options]}
        return {"anyOf": options}
    if origin is list:
        return {"type": "array", "items": _convert(typing.get_args(tp)[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _convert(typing.get_args(tp)[1], defs)}
    if typing.is_typeddict(tp):
        name = tp.__name__.lstrip("_")
        if name not in defs:
            defs[name] = {}  # placeholder: recursive types refer to it
            defs[name] = _record(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    raise TypeError(f"no JSON Schema for {tp!r}")


def _record(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    import inspect  # only when a schema is generated: emit() imports this module on every rank

    hints = typing.get_type_hints(tp)
    out: dict[str, Any] = {"type": "object"}
    doc = inspect.getdoc(tp)
    if doc and not doc.startswith(f"{tp.__name__}("):  # TypedDicts without a docstring get a generated one
        out["description"] = " ".join(doc.split())
    out["properties"] = {name: _convert(t, defs) for name, t in hints.items()}
    later = ADDED_LATER.get(tp.__name__, ())  # a document of an older validator lacks them (loaded as null)
    out["required"] = [name for name in hints if name in tp.__required_keys__ and name not in later]
    out["additionalProperties"] = False
    return out


def generate(kind: str) -> dict[str, Any]:
    """The schema of ``kind`` ("facts" or "report")."""
    try:
        root, version, description = DOCUMENTS[kind]
    except KeyError:
        raise UserError(f"unknown schema {kind!r}; use one of: {', '.join(DOCUMENTS)}") from None
    defs: dict[str, Any] = {}
    body = _record(root, defs)
    body["properties"]["schema"] = {"type": "integer", "const": version}
    body["description"] = description
    return {
        "$schema": DRAFT,
        "$id": f"{ID}:{kind}:v{version}",
        "title": f"cluster-validator {kind} v{version}",
        **body,
        "$defs": dict(sorted(defs.items())),
    }


def file_name(kind: str) -> str:
    return f"{kind}-v{DOCUMENTS[kind][1]}.schema.json"


def text(kind: str) -> str:
    return json.dumps(generate(kind), indent=2) + "\n"


def expected_files() -> dict[str, str]:
    return {file_name(kind): text(kind) for kind in DOCUMENTS}


def main(argv: list[str]) -> int:
    """`python -m validator.schema DIR` writes the schemas; `--check DIR` fails when they drift."""
    from pathlib import Path

    check = "--check" in argv
    paths = [a for a in argv if a != "--check"]
    if len(paths) > 1 or any(a.startswith("-") for a in paths):
        print("usage: python -m validator.schema [--check] [DIR]   (default docs/schema)", file=sys.stderr)
        return 2
    directory = Path(paths[0] if paths else "docs/schema")
    drift = []
    for name, content in expected_files().items():
        path = directory / name
        if check:
            if not path.exists() or path.read_text() != content:
                drift.append(name)
        else:
            directory.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
    if drift:
        print(f"schema drift in {directory}: {', '.join(drift)}; run `python -m validator.schema {directory}`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


SELF_CHECK = "VALIDATOR_SELF_CHECK"  # "1": every JSON document is validated before it is printed


class SchemaMismatch(UserError):
    """A document this validator made does not match its own published schema: a bug."""

    exit_code = 70  # EX_SOFTWARE


def self_check(doc: Any, kind: str) -> None:
    """With VALIDATOR_SELF_CHECK=1 (the test suite sets it), validate ``doc`` against the published
    schema of ``kind`` and raise SchemaMismatch naming the first bad field. Off by default: it
    needs the jsonschema package, a test dependency."""
    if os.environ.get(SELF_CHECK) != "1":
        return
    errors = list(_validator(kind).iter_errors(doc))
    if errors:
        first = min(errors, key=lambda e: list(map(str, e.absolute_path)))
        where = "/".join(map(str, first.absolute_path)) or "(document)"
        raise SchemaMismatch(f"{kind} JSON does not match {file_name(kind)} at {where}: {first.message[:200]}")


@functools.cache
def _validator(kind: str) -> Any:
    try:
        import jsonschema
    except ImportError:
        raise UserError(f"{SELF_CHECK}=1 needs the jsonschema package (a test dependency)") from None

    schema = generate(kind)
    return jsonschema.validators.validator_for(schema)(schema)
