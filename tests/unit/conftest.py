from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fires(*codes): the test makes these check codes fire (see test_check_coverage)")
