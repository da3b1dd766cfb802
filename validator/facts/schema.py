"""Validate a facts document against the TypedDicts in ``validator.model``.

The validator is compiled once from the type hints, so the schema is written in one place. It is
on the coordinator's hot path (12,500 documents in a few seconds), so leaf types are checked
inline and the path of a bad field is only built when something is wrong.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from validator import model
from validator.errors import UserError

Validator = Callable[[Any], None]
LEAVES: dict[Any, tuple[tuple[type, ...], str]] = {
    str: ((str,), "a string"),
    int: ((int,), "an integer"),
    float: ((int, float), "a number"),
    bool: ((bool,), "true or false"),
}


class SchemaError(UserError):
    def __init__(self, message: str, where: str = "", path: tuple[str, ...] = ()) -> None:
        super().__init__(message, where)
        self.path = path

    def under(self, name: str) -> SchemaError:
        return SchemaError(self.message, self.where, (name, *self.path))


def _bad(want: str, got: Any) -> SchemaError:
    shown = repr(got)
    return SchemaError(f"expected {want}, got {type(got).__name__} {shown[:37] + '...' if len(shown) > 40 else shown}")


def _leaf(tp: Any, nullable: bool) -> Validator:
    ok, want = LEAVES[tp]
    strict_int = tp is int or tp is float  # bool is an int subclass: refuse it for numbers

    def leaf(v: Any) -> None:
        if v is None and nullable:
            return
        if not isinstance(v, ok) or (strict_int and isinstance(v, bool)):
            raise _bad(want, v)

    return leaf


def _compile(tp: Any, nullable: bool = False) -> Validator:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [o for o in typing.get_args(tp) if o is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported union {tp}")
        return _compile(inner[0], nullable=True)
    if tp in LEAVES:
        return _leaf(tp, nullable)
    if origin is list:
        check_item = _compile(typing.get_args(tp)[0])

        def list_of(v: Any) -> None:
            if v is None and nullable:
                return
            if type(v) is not list:
                raise _bad("a list", v)
            for i, x in enumerate(v):
                try:
                    check_item(x)
                except SchemaError as e:
                    raise e.under(f"[{i}]") from None

        return list_of
    if origin is dict:
        check_val = _compile(typing.get_args(tp)[1])

        def dict_of(v: Any) -> None:
            if v is None and nullable:
                return
            if type(v) is not dict:
                raise _bad("an object", v)
            for k, x in v.items():
                try:
                    check_val(x)
                except SchemaError as e:
                    raise e.under(str(k)) from None

        return dict_of
    if typing.is_typeddict(tp):
        fields = [(name, _compile(t)) for name, t in typing.get_type_hints(tp).items()]

        def record(v: Any) -> None:
            if v is None and nullable:
                return
            if type(v) is not dict:
                raise _bad("an object", v)
            for name, check_field in fields:
                if name not in v:
                    raise SchemaError("missing field", path=(name,))
                try:
                    check_field(v[name])
                except SchemaError as e:
                    raise e.under(name) from None

        return record
    raise TypeError(f"unsupported type in facts schema: {tp}")


@cache
def _facts_validator() -> Validator:
    return _compile(model.Facts)


def _dotted(path: tuple[str, ...]) -> str:
    return "".join(p if p.startswith("[") else f".{p}" for p in path).lstrip(".")


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
        _facts_validator()(doc)
    except SchemaError as e:
        field = _dotted(e.path)
        host = doc.get("host")
        if isinstance(host, str) and host:  # a file of many documents: say whose field is bad
            field = f"host {host}: {field}"
        raise SchemaError(e.message, f"{where}: {field}" if where else field) from None
    return typing.cast(model.Facts, doc)
