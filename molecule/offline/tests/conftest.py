# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The offline scenario's marker: scale_out tests (a replica pool, an SGLang instance across hosts)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "scale_out: a replica pool or an SGLang instance across hosts")


def _load_deselected_hooks():
    """tests/conftest.py's hooks that record deselected tests for the summary of `make test` (this
    folder is outside tests/, where pytest would find them)."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "conftest.py")
    spec = importlib.util.spec_from_file_location("llmops_tests_conftest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.pytest_deselected, module.pytest_sessionfinish


pytest_deselected, pytest_sessionfinish = _load_deselected_hooks()
