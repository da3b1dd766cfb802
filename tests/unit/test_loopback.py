"""One loopback rule: the agent's ``is_loopback`` (the agent imports nothing of the package), which
the package re-exports from validator.facts.network, and the checks that used to carry their own
prefix tests now share it."""

from __future__ import annotations

import pytest

from validator.agent import probe as agent
from validator.facts.network import is_loopback

TABLE = [
    ("127.0.0.1", True),
    ("127.0.1.1", True),  # Debian's /etc/hosts line for the hostname
    ("127.255.255.254", True),
    ("::1", True),
    ("0:0:0:0:0:0:0:1", True),
    ("[::1]", True),
    ("::1%lo", True),
    ("::ffff:127.0.0.1", True),  # IPv4-mapped: what a dual-stack socket reports
    ("::ffff:127.0.1.1", True),
    ("localhost", True),
    ("LOCALHOST.", True),
    ("ip6-localhost.localhost", True),
    ("10.0.0.1", False),
    ("::ffff:10.0.0.1", False),
    ("fe80::1%eth0", False),
    ("128.0.0.1", False),
    ("1270.0.0.1", False),
    ("127.example.com", False),  # a name that starts like an address: not resolved, not loopback
    ("node001", False),
    ("localhost-gpu1", False),
    ("", False),
    ("not an address", False),
]


@pytest.mark.parametrize(("addr", "loopback"), TABLE)
def test_package_and_agent_agree(addr: str, loopback: bool) -> None:
    assert is_loopback(addr) is loopback


def test_one_definition() -> None:
    assert is_loopback is agent.is_loopback


def test_no_prefix_tests_left() -> None:
    """The old versions compared prefixes ("127.", "::1"); none is left outside the rule."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "validator"
    offenders = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if 'startswith("127.")' in p.read_text() or '== "::1"' in p.read_text()
    ]
    assert offenders == []
