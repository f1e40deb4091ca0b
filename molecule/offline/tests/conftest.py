# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The offline scenario's marker: scale_out tests run in `make test-scale-out` only (molecule.yml)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "scale_out: a replica pool or an SGLang instance across hosts (make test-scale-out)")
