"""The real init container command (`validator preflight ...` from each example manifest) in four
emulated pods per workload: network namespace (pod IP), UTS namespace (pod hostname), private
/etc/hosts (kubelet + cluster DNS), env as rendered from the manifest and the controller."""

from __future__ import annotations

from typing import Any

import pytest

from tests.k8s.conftest import SERVICE, SIZE_VAR, WORKLOADS, Scenarios
from tests.k8s.pods import Done
from validator.targets import expand

pytestmark = [pytest.mark.root, pytest.mark.slow]


def codes(d: Done) -> set[str]:
    assert d.report is not None, d.err[-2000:]
    return {f["code"] for f in d.report["findings"]}


def findings(d: Done, code: str) -> list[dict[str, Any]]:
    assert d.report is not None, d.err[-2000:]
    return [f for f in d.report["findings"] if f["code"] == code]


def errors(d: Done) -> list[str]:
    assert d.report is not None, d.err[-2000:]
    return [f"{f['code']} {f['message']}" for f in d.report["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_all_pods_pass_and_agree(scenarios: Scenarios, workload: str) -> None:
    done = scenarios.get("passing")[workload]
    pods = [d.pod.hostname for d in done]
    assert [d.rc for d in done] == [0, 0, 0, 0], [d.err[-1500:] for d in done]
    for d in done:
        assert d.report is not None and d.report["participants"] == 4
        assert sorted(expand(d.report["hosts"])) == sorted(pods)
        assert errors(d) == []
        assert d.stdout is not None and d.stdout["findings"] == d.report["findings"]  # --format json on stdout
        assert d.message is not None and d.message.count("\n") == 1
        assert d.message.startswith("preflight PASSED: 4/4 nodes")


@pytest.mark.parametrize("workload", WORKLOADS)
def test_master_pod_late_the_others_wait_then_pass(scenarios: Scenarios, workload: str) -> None:
    done = scenarios.get("late")[workload]
    assert scenarios.waiting_when_master_started[workload], "the other pods were still waiting for the master"
    assert [d.rc for d in done] == [0, 0, 0, 0], [d.err[-1500:] for d in done]
    assert all(d.report is not None and d.report["participants"] == 4 for d in done)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_pod_with_a_wrong_size_is_named(scenarios: Scenarios, workload: str) -> None:
    done = scenarios.get("wrong_size")[workload]
    bad = done[2].pod.hostname
    assert [d.rc for d in done] == [1, 1, 1, 1], [d.err[-1500:] for d in done]
    for d in done:  # every pod got the same verdict, naming pod 2 and its variable
        named = [f for c in ("RNK004", "RNK010") for f in findings(d, c)]
        assert named, d.report
        assert all(f["hosts"] == bad for f in named)
        assert any(SIZE_VAR[workload] in f["message"] for f in named), named


@pytest.mark.parametrize("workload", WORKLOADS)
def test_master_name_not_resolvable_names_the_service_setting(scenarios: Scenarios, workload: str) -> None:
    done = scenarios.get("unresolvable")[workload]
    assert [d.rc for d in done] == [1, 1, 1, 1], [d.err[-1500:] for d in done]
    for d in done:
        (pre,) = findings(d, "PRE001")
        assert pre["hosts"] == d.pod.hostname
        assert "publishNotReadyAddresses: true" in pre["message"]
        assert f"Service {SERVICE[workload]}" in pre["message"]
        assert d.message is not None and "PRE001" in d.message and "FAILED (exit 1)" in d.message


@pytest.mark.parametrize("workload", WORKLOADS)
def test_stranger_refused_and_missing_pod_named(scenarios: Scenarios, workload: str) -> None:
    done = scenarios.get("stranger")[workload]
    members, stranger = done[:3], done[3]
    missing_host = scenarios.jobs[workload].pods[3].hostname
    assert [d.rc for d in members] == [3, 3, 3], [d.err[-1500:] for d in members]
    for d in members:
        assert d.report is not None and d.report["participants"] == 3
        (out,) = d.report["outcomes"]
        assert out["target"] == "node rank 3" and out["status"] == "missing"
        assert f"expected on {missing_host}" in out["detail"]
    assert "PRE004" in codes(members[0])  # the coordinator saw and refused the stranger
    assert stranger.rc == 1 and "PRE003" in codes(stranger), stranger.err[-1500:]
