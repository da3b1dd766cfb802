"""Launch profiles: YAML files that pin what a job expects (nodes, ranks, GPUs, interface,
versions, env). Unknown keys and wrong types are errors naming the file and line.

The schema is ``Profile``: every field but ``path`` is an optional key of that type, and a
``Literal`` field accepts only its values. ``SCHEMA`` and ``CHOICES`` are read from it, and
docs/profiles.md documents it (a test keeps the two equal).
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import os
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from validator.errors import UserError
from validator.model import Launcher
from validator.safejson import clip, read_text
from validator.targets import MAX_HOSTS, MAX_RANKS, expand

MAX_PROFILE_BYTES = 1 << 20  # a profile is a few hundred bytes
MAX_EVENTS = 10_000  # YAML nodes in a profile (keys, values, env entries)
MAX_YAML_DEPTH = 16  # a profile nests 2 levels

VERSION_KEYS = ("torch", "nccl", "cuda", "driver", "python")
BASELINE_KINDS = ("compute", "memory")  # the probes' kinds (validator/probes/rounds.py KINDS; a test ties them)


@dataclass(frozen=True)
class BaselineFigure:
    """One probe figure as a known-good set of nodes of one hardware type measured it
    (`validator baseline record`): the median over the nodes, their MAD, how many, when."""

    median: float  # GFLOP/s (compute) or GB/s (memory)
    mad: float = 0.0
    n: int = 0  # nodes measured (0: not said)
    date: str = ""  # YYYY-MM-DD


# hardware type (GPU model, else CPU model) -> probe kind -> "DEVICE ENGINE" -> figure
Baselines = dict[str, dict[str, dict[str, BaselineFigure]]]


@dataclass(frozen=True)
class Profile:
    path: str  # where it was read from (not a key)
    name: str = ""  # default: the file name without .yaml
    description: str = ""
    launcher: Launcher | None = None  # one of model.LAUNCHERS
    nodes: int | None = None
    ranks_per_node: int | None = None
    gpus_per_node: int | None = None
    gpu_model: str | None = None  # a substring of the GPU name, e.g. "H100"
    interface: str | None = None  # the interface NCCL must use on every node (name or prefix)
    hosts: str | None = None  # hostlist of the nodes, in node-rank order
    master_port: int | None = None
    min_shm_mib: int | None = None  # replaces SYS001's 256 MiB minimum
    min_nofile: int | None = None  # every node's open-file limit is at least this (SYS004)
    versions: dict[str, str] = field(default_factory=dict)  # VERSION_KEYS -> glob such as "2.13.*"
    env: dict[str, str] = field(default_factory=dict)  # variables every rank must have, with these values
    layout_spanning: Literal["warning", "error"] | None = None  # LAY007/LAY008: TP groups over nodes (default warning)
    baselines: Baselines = field(default_factory=dict)  # `validator baseline record`; scan --probes judges by it

    def pinned(self) -> list[str]:
        """What this profile pins, for `validator profiles validate`."""
        out: list[str] = []
        for key in SCHEMA:
            value = getattr(self, key)
            if isinstance(value, dict):
                out += [f"{key}.{k}" for k in value]
            elif value is not None and key not in ("name", "description"):
                out.append(key)
        return out

    def version_ok(self, key: str, actual: str | None) -> bool:
        want = self.versions.get(key)
        return want is None or (actual is not None and fnmatch.fnmatch(actual, want))


def _schema() -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """(key -> int, str, dict or a nested schema; key -> allowed values) from ``Profile``'s fields."""
    hints = typing.get_type_hints(Profile)
    schema: dict[str, Any] = {}
    choices: dict[str, tuple[str, ...]] = {}
    for f in dataclasses.fields(Profile):
        if f.name == "path":
            continue
        t = hints[f.name]
        if typing.get_origin(t) in (typing.Union, types.UnionType):  # X | None: every key is optional
            t = next(a for a in typing.get_args(t) if a is not type(None))
        if f.name == "versions":
            schema[f.name] = dict.fromkeys(VERSION_KEYS, str)
        elif typing.get_origin(t) is Literal:
            schema[f.name], choices[f.name] = str, typing.get_args(t)
        else:
            schema[f.name] = typing.get_origin(t) or t
    return schema, choices


SCHEMA, CHOICES = _schema()


def _where(path: str, node: Any) -> str:
    return f"{path}:{node.start_mark.line + 1}"


def _type_name(t: Any) -> str:
    return {int: "an integer", str: "a string", dict: "a mapping"}.get(t, "a mapping")


RANGES: dict[str, tuple[int, int]] = {
    "nodes": (1, MAX_HOSTS),
    "ranks_per_node": (1, MAX_RANKS),
    "gpus_per_node": (0, MAX_RANKS),
    "min_shm_mib": (0, 1 << 40),
    "min_nofile": (0, 1 << 40),
    "master_port": (1, 65535),
}


def _bound(key: str, low_side: bool) -> str:
    low, high = RANGES[key]
    if key == "master_port":
        return f"from {low} to {high}"
    return f"at least {low}" if low_side else f"at most {high:,}"


def _validate(path: str, node: Any, schema: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Check a YAML node against ``schema`` and return its values, each error naming file:line.
    Strings are taken as written (``cuda: 12.10`` stays "12.10", ``NCCL_IB_DISABLE: yes`` stays
    "yes"), not as YAML would convert them."""
    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise UserError(f"{prefix.rstrip('.') or 'profile'} must be a mapping", _where(path, node))
    out: dict[str, Any] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise UserError(f"{prefix.rstrip('.') or 'profile'} keys must be plain names", _where(path, key_node))
        key = key_node.value
        if key not in schema:
            close = difflib.get_close_matches(key, list(schema), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(schema)})"
            raise UserError(f"unknown key {prefix + key!r}{hint}", _where(path, key_node))
        if key in out:
            raise UserError(f"duplicate key {prefix + key!r}", _where(path, key_node))
        want = schema[key]
        if not prefix and key == "baselines":
            out[key] = _baselines(path, value_node)
            continue
        if isinstance(want, dict):
            out[key] = _validate(path, value_node, want, f"{prefix}{key}.")
            continue
        if want is dict:
            if not isinstance(value_node, yaml.MappingNode):
                raise UserError(f"{prefix}{key} must be a mapping of NAME: value", _where(path, value_node))
            values = {}
            for k, v in value_node.value:
                if not isinstance(k, yaml.ScalarNode):
                    raise UserError(f"{prefix}{key} names must be plain names", _where(path, k))
                if not isinstance(v, yaml.ScalarNode):
                    raise UserError(f"{prefix}{key}.{k.value} must be a single value", _where(path, v))
                values[str(k.value)] = str(v.value)
            out[key] = values
            continue
        tag = value_node.tag.rsplit(":", 1)[-1]
        ok = (want is int and tag == "int") or (want is str and tag in ("str", "int", "float"))
        if not ok:
            raise UserError(
                f"{prefix}{key} must be {_type_name(want)}, got {clip(value_node.value)}", _where(path, value_node)
            )
        if want is int and len(value_node.value) > 20:  # too long for any count or port: not parsed
            raise UserError(
                f"{prefix}{key} must be {_bound(key, value_node.value.startswith('-'))}, got {clip(value_node.value)}",
                _where(path, value_node),
            )
        value: int | str = yaml.safe_load(value_node.value) if want is int else str(value_node.value)
        if isinstance(value, int) and key in RANGES and not RANGES[key][0] <= value <= RANGES[key][1]:
            raise UserError(
                f"{prefix}{key} must be {_bound(key, value < RANGES[key][0])}, got {value}", _where(path, value_node)
            )
        if key == "hosts":
            try:
                expand(str(value))
            except UserError as e:
                raise UserError(e.message, _where(path, value_node)) from None
        if key in CHOICES and value not in CHOICES[key]:
            raise UserError(
                f"{key} must be one of {', '.join(CHOICES[key])}, got {clip(value)}", _where(path, value_node)
            )
        out[key] = value
    return out


def _pairs(path: str, node: Any, name: str) -> list[tuple[str, Any]]:
    """(key, value node) of a mapping with plain, non-empty, distinct keys; else an error naming ``name``."""
    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise UserError(f"{name} must be a mapping", _where(path, node))
    out: list[tuple[str, Any]] = []
    for k, v in node.value:
        if not isinstance(k, yaml.ScalarNode) or not k.value:
            raise UserError(f"{name} keys must be plain, non-empty names", _where(path, k))
        if any(k.value == seen for seen, _ in out):
            raise UserError(f"duplicate key {k.value!r} in {name}", _where(path, k))
        out.append((str(k.value), v))
    return out


def _number(path: str, node: Any, name: str, positive: bool) -> float:
    """A finite number as written (``980``, ``12.5``, ``1e-05``), > 0 or >= 0."""
    import math

    import yaml

    value = None
    if isinstance(node, yaml.ScalarNode) and node.tag.rsplit(":", 1)[-1] in ("int", "float", "str"):
        try:
            value = float(node.value)
        except ValueError:
            value = None
    if value is None or not math.isfinite(value) or value < 0 or (positive and value == 0):
        what = "a positive number" if positive else "a number >= 0"
        raise UserError(f"{name} must be {what}, got {clip(getattr(node, 'value', '(a collection)'))}",
                        _where(path, node))  # fmt: skip
    return value


def _figure(path: str, node: Any, name: str) -> BaselineFigure:
    import re

    import yaml

    fields = [f.name for f in dataclasses.fields(BaselineFigure)]
    got: dict[str, Any] = {}
    for key, v in _pairs(path, node, name):
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(fields)})"
            raise UserError(f"unknown key {key!r} in {name}{hint}", _where(path, v))
        if key in ("median", "mad"):
            got[key] = _number(path, v, f"{name}.{key}", positive=key == "median")
        elif key == "n":
            if not (isinstance(v, yaml.ScalarNode) and re.fullmatch(r"\d{1,7}", v.value)) or int(v.value) > MAX_HOSTS:
                raise UserError(f"{name}.n must be a node count from 0 to {MAX_HOSTS:,}, got {clip(getattr(v, 'value', '...'))}",
                                _where(path, v))  # fmt: skip
            got[key] = int(v.value)
        elif not (isinstance(v, yaml.ScalarNode) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", v.value)):
            raise UserError(f"{name}.date must be a date YYYY-MM-DD, got {clip(getattr(v, 'value', '...'))}",
                            _where(path, v))  # fmt: skip
        else:
            got[key] = str(v.value)
    if "median" not in got:
        raise UserError(f"{name} has no median", _where(path, node))
    return BaselineFigure(**got)


def _baselines(path: str, node: Any) -> Baselines:
    """hardware -> kind -> "DEVICE ENGINE" -> figure; every error names its key as
    ``baselines['NVIDIA H100 80GB HBM3'].compute['cuda:0 torch-cuda-fp16'].median``."""
    out: Baselines = {}
    for hardware, kinds in _pairs(path, node, "baselines"):
        where = f"baselines[{clip(hardware)}]"
        out[hardware] = {}
        for kind, figures in _pairs(path, kinds, where):
            if kind not in BASELINE_KINDS:
                raise UserError(f"{where}: unknown probe {kind!r} (known: {', '.join(BASELINE_KINDS)})",
                                _where(path, figures))  # fmt: skip
            out[hardware][kind] = {
                key: _figure(path, fig, f"{where}.{kind}[{clip(key)}]")
                for key, fig in _pairs(path, figures, f"{where}.{kind}")
            }
    return out


def _compose(path: str, text: str) -> Any:
    """The YAML node tree, once the event stream (parsed without recursion) is known to be
    small, shallow and free of aliases: PyYAML's composer recurses, and aliases can expand a
    tiny file into billions of nodes."""
    import yaml

    depth = 0
    for n, event in enumerate(yaml.parse(text)):
        if isinstance(event, yaml.AliasEvent):
            raise UserError("YAML aliases (*name) are not accepted in profiles", _where(path, event))
        if n > MAX_EVENTS:
            raise UserError(f"more than {MAX_EVENTS:,} YAML nodes; a profile has a few dozen", _where(path, event))
        depth += isinstance(event, yaml.CollectionStartEvent) - isinstance(event, yaml.CollectionEndEvent)
        if depth > MAX_YAML_DEPTH:
            raise UserError(f"nested deeper than {MAX_YAML_DEPTH} levels; a profile nests 2", _where(path, event))
    return yaml.compose(text)


def load_profile(path: str | os.PathLike[str]) -> Profile:
    import yaml

    p = str(path)
    text = read_text(p, MAX_PROFILE_BYTES, "profile")
    try:
        node = _compose(p, text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark else p
        problem = " ".join(str(getattr(e, "problem", None) or e).split())  # a reader error spans lines
        if isinstance(e, yaml.reader.ReaderError):  # a character YAML refuses: its position, not the text
            where, problem = (
                f"{p}:{text.count(chr(10), 0, e.position) + 1}",
                f"character #x{e.character:04x} is not allowed",
            )
        raise UserError(f"not valid YAML: {problem[:100]}", where) from None
    if node is None:
        raise UserError("profile is empty", p)
    data = _validate(p, node, SCHEMA)
    data.setdefault("name", os.path.splitext(os.path.basename(p))[0])
    return Profile(path=p, **data)
