"""venv_runner runs a module_utils function in another interpreter, for real."""
import subprocess
import sys

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import readiness, venv_runner


def run_command(argv, data=None, binary_data=False, environ_update=None):
    """The part of AnsibleModule.run_command that venv_runner uses."""
    env = None
    if environ_update:
        import os
        env = dict(os.environ, **environ_update)
    p = subprocess.run(argv, input=data, capture_output=True, text=True, env=env, check=False)
    return p.returncode, p.stdout, p.stderr


def test_calls_function_in_child_interpreter_and_returns_json():
    # readiness has a pure helper we can call with JSON-able arguments in a child process
    # (its ansible imports resolve there because the child gets our sys.path through PYTHONPATH).
    env = {"PYTHONPATH": ":".join(sys.path)}
    script = venv_runner.script_for(readiness, "http")
    assert script.rstrip().endswith('+ "\\n")')
    with pytest.raises(venv_runner.VenvCallError) as err:
        venv_runner.call(run_command, sys.executable, readiness, "http",
                         {"method": "GET", "url": "http://127.0.0.1:9/health", "timeout": 0.5}, env=env)
    assert "readiness.http failed under" in str(err.value)
    assert "URLError" in str(err.value) or "Connection" in str(err.value)


def test_result_marker_is_parsed_after_other_output():
    out = "noise\nmore noise\n%s{\"a\": [1, 2]}\n" % venv_runner.MARKER
    assert venv_runner.parse_result(out) == {"a": [1, 2]}
    assert venv_runner.parse_result("no marker here") is None


def test_failing_child_raises_with_rc_and_its_stderr():
    # a real interpreter whose call fails (no such function). A missing interpreter never reaches
    # venv_runner: AnsibleModule.run_command fails the module itself when it cannot start one.
    with pytest.raises(venv_runner.VenvCallError) as err:
        venv_runner.call(run_command, sys.executable, readiness, "no_such_function", {})
    assert err.value.rc == 1
    assert str(err.value).startswith("readiness.no_such_function failed under %s (rc=1):\n" % sys.executable)
    assert "NameError: name 'no_such_function' is not defined" in str(err.value)
    assert "NameError" in err.value.stderr


def test_child_without_a_result_line_is_an_error_even_with_rc_0():
    # /bin/true stands in for an interpreter that exits 0 without running the script
    with pytest.raises(venv_runner.VenvCallError) as err:
        venv_runner.call(run_command, "/bin/true", readiness, "http", {})
    assert err.value.rc == 0 and str(err.value).startswith("readiness.http failed under /bin/true (rc=0)")
