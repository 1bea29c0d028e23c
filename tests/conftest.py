"""Marks the end-to-end tests ``slow`` so that ``pytest -m "not slow"`` is a quick loop."""
from __future__ import annotations

import pytest

# fixtures that run real training in a subprocess; every test using one is slow
SLOW_FIXTURES = {"trained"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
