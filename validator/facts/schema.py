"""Validate a facts document against the TypedDicts in ``validator.model``.

The validator is compiled once from the type hints, so the schema is written in one place and a
coordinator can validate thousands of documents a second. Errors name the field path.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from validator import model
from validator.errors import UserError

Validator = Callable[[Any, str], None]


class SchemaError(UserError):
    pass


def _fail(path: str, want: str, got: Any) -> None:
    shown = repr(got)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    raise SchemaError(f"expected {want}, got {type(got).__name__} {shown}", path)


def _compile(tp: Any) -> Validator:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        nullable = type(None) in options
        inner = [o for o in options if o is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported union {tp}")
        check = _compile(inner[0])

        def optional(v: Any, path: str) -> None:
            if v is None and nullable:
                return
            check(v, path)

        return optional
    if origin is list:
        (item,) = typing.get_args(tp)
        check_item = _compile(item)

        def list_of(v: Any, path: str) -> None:
            if not isinstance(v, list):
                _fail(path, "a list", v)
            for i, x in enumerate(v):
                check_item(x, f"{path}[{i}]")

        return list_of
    if origin is dict:
        _, val = typing.get_args(tp)
        check_val = _compile(val)

        def dict_of(v: Any, path: str) -> None:
            if not isinstance(v, dict):
                _fail(path, "an object", v)
            for k, x in v.items():
                check_val(x, f"{path}.{k}")

        return dict_of
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        fields = {name: _compile(t) for name, t in hints.items()}

        def record(v: Any, path: str) -> None:
            if not isinstance(v, dict):
                _fail(path, "an object", v)
            for name, check_field in fields.items():
                sub = f"{path}.{name}" if path else name
                if name not in v:
                    raise SchemaError("missing field", sub)
                check_field(v[name], sub)

        return record
    if tp is bool:

        def boolean(v: Any, path: str) -> None:
            if not isinstance(v, bool):
                _fail(path, "true or false", v)

        return boolean
    if tp is int:

        def integer(v: Any, path: str) -> None:
            if not isinstance(v, int) or isinstance(v, bool):
                _fail(path, "an integer", v)

        return integer
    if tp is float:

        def number(v: Any, path: str) -> None:
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                _fail(path, "a number", v)

        return number
    if tp is str:

        def string(v: Any, path: str) -> None:
            if not isinstance(v, str):
                _fail(path, "a string", v)

        return string
    raise TypeError(f"unsupported type in facts schema: {tp}")


@cache
def _facts_validator() -> Validator:
    return _compile(model.Facts)


def validate_facts(doc: Any, where: str = "") -> model.Facts:
    """Return ``doc`` as Facts, or raise SchemaError naming ``where`` and the field."""
    if not isinstance(doc, dict):
        raise SchemaError(f"expected a facts object, got {type(doc).__name__}", where)
    schema = doc.get("schema")
    if isinstance(schema, int) and schema > model.FACTS_SCHEMA:
        raise SchemaError(
            f"facts schema {schema} is newer than this validator understands "
            f"({model.FACTS_SCHEMA}); upgrade cluster-validator where you run `check`",
            where,
        )
    try:
        _facts_validator()(doc, "")
    except SchemaError as e:
        raise SchemaError(e.message, f"{where}: {e.where}" if where else e.where) from None
    return typing.cast(model.Facts, doc)
