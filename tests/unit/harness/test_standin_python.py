# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stand-in Python build refuses an interpreter whose ensurepip wheels the packed tree would leave
behind (Debian's and Ubuntu's python3.11 keep them in /usr/share/python-wheels: every test host's
`python -m venv` failed with such a stand-in)."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "harness"))
import standin_python  # noqa: E402


def _fake_python(tmp_path, own, wheels):
    """An executable that answers wheels_outside's question as an interpreter with these paths would."""
    script = tmp_path / "python3.11"
    script.write_text("#!/bin/sh\necho '%s'\n" % json.dumps([own] + wheels))
    script.chmod(0o755)
    return str(script)


def test_wheels_kept_by_the_distribution_are_named(tmp_path):
    python = _fake_python(tmp_path, "/usr/lib/python3.11/ensurepip",
                          ["/usr/share/python-wheels/pip-23.0.1-py3-none-any.whl"])
    assert standin_python.wheels_outside(python) == ["/usr/share/python-wheels/pip-23.0.1-py3-none-any.whl"]


@pytest.mark.parametrize("wheels", [[], ["/opt/py/lib/python3.11/ensurepip/_bundled/pip-23.2.1-py3-none-any.whl"]])
def test_a_source_build_packs(tmp_path, wheels):
    # upstream CPython names its bundled wheels (no path) or keeps them in ensurepip/_bundled
    assert standin_python.wheels_outside(_fake_python(tmp_path, "/opt/py/lib/python3.11/ensurepip", wheels)) == []


def test_main_refuses_before_packing_anything(tmp_path):
    python = _fake_python(tmp_path, "/usr/lib/python3.11/ensurepip",
                          ["/usr/share/python-wheels/setuptools-66.1.1-py3-none-any.whl"])
    with pytest.raises(SystemExit) as stop:
        standin_python.main(["--python", python, "--mirror", str(tmp_path / "mirror")])
    assert "ensurepip reads its wheels from outside the tree it packs" in str(stop.value)
    assert "/usr/share/python-wheels/setuptools-66.1.1-py3-none-any.whl" in str(stop.value)
    assert not (tmp_path / "mirror").exists()
