"""Every check code has a test that makes it fire (marked ``@fires(CODE)``), and healthy jobs of
every shape make none fire: false alarms cost trust faster than missed ones."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import tests.checks
import tests.facts
import tests.unit
from tests.factories import cpu_job, node_job, rank_job
from validator.checks import CHECKS, run_checks
from validator.model import Facts


def fired_by_tests() -> dict[str, list[str]]:
    """code -> the tests marked as making it fire, from every module under tests/checks, facts, unit."""
    out: dict[str, list[str]] = {}
    for package in (tests.checks, tests.facts, tests.unit):
        for mod in pkgutil.iter_modules(package.__path__):
            if mod.name.startswith("test_"):
                out_of(importlib.import_module(f"{package.__name__}.{mod.name}"), mod.name, out)
    return out


def out_of(module: object, name_of: str, out: dict[str, list[str]]) -> None:
    """The ``@fires`` marks of one test module's functions, into ``out``."""
    for name, fn in inspect.getmembers(module, inspect.isfunction):
        for mark in getattr(fn, "pytestmark", []):
            if mark.name == "fires":
                for code in mark.args:
                    out.setdefault(code, []).append(f"{name_of}::{name}")


def test_every_check_code_has_a_firing_test() -> None:
    fired = fired_by_tests()
    assert sorted(set(CHECKS) - set(fired)) == []
    assert sorted(set(fired) - set(CHECKS)) == []  # no test claims a code that does not exist


@pytest.mark.parametrize(
    "job",
    [
        pytest.param(rank_job(4, 8), id="4x8-gpu-ranks"),
        pytest.param(node_job(4, 8), id="4x8-torchrun-wrappers"),
        pytest.param(node_job(1, 8), id="single-node-wrapper"),
        pytest.param(rank_job(1, 8), id="single-node-ranks"),
        pytest.param(cpu_job(3, 2), id="cpu-gloo-job"),
        pytest.param(rank_job(1, 1, gpus=0), id="one-cpu-process"),
    ],
)
def test_healthy_jobs_raise_nothing(job: list[Facts]) -> None:
    assert [f"{f.code} {f.message}" for f in run_checks(job)] == []
