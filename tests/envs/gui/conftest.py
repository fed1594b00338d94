"""Browser fixtures: one real Chromium pool for the whole test session (skipped here without Chromium or
Playwright; under CI=true a missing browser fails loudly)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from rubricgym.envs.gui.pool import BrowserPool, browser_available


@pytest.fixture(scope="session")
def pool() -> Iterator[BrowserPool]:
    missing = browser_available()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must have Chromium and Playwright (make apt; pip install '.[gui]'): {missing}")
        pytest.skip(missing)
    p = BrowserPool()
    try:
        yield p
    finally:
        p.close()
