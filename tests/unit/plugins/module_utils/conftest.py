# -*- coding: utf-8 -*-
"""Fixtures of the module_utils unit tests."""
import pytest

from warm_probe import WarmRunner


@pytest.fixture(scope="session")
def warm():
    """One engine interpreter per venv for the real-parser checks of every engine_* test file (warm_probe.py)."""
    runner = WarmRunner()
    yield runner
    runner.close()
