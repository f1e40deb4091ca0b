# -*- coding: utf-8 -*-
"""The engine_parse_args module wrapper: argument spec, check mode, failures, documentation."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.serving.plugins.module_utils import engine_spec as es
from ansible_collections.llmops.serving.plugins.module_utils import engine_validate as ev
from ansible_collections.llmops.serving.plugins.modules import engine_parse_args as module

SPEC = {"model_path": "/srv/models/tiny", "served_model_name": "tiny", "host": "127.0.0.1", "port": 8000}


class Exit(Exception):
    pass


class Fail(Exception):
    pass


def _exit_json(self, **kwargs):
    raise Exit(kwargs)


def _fail_json(self, **kwargs):
    raise Fail(kwargs)


@pytest.fixture(autouse=True)
def no_exit(monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)


def run(args, check_mode=False):
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    with patch_module_args(args):
        with pytest.raises((Exit, Fail)) as err:
            module.main()
    return err.type, err.value.args[0]


def test_renders_without_validation_in_check_mode():
    kind, result = run({"engine": "vllm", "engine_version": "0.32.0", "spec": SPEC, "validate": False,
                        "python": "/venv/bin/python"}, check_mode=True)
    assert kind is Exit and result["changed"] is False
    assert result["command"][:5] == ["/venv/bin/python", "-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/tiny"]
    assert result["api_key_env"] == "VLLM_API_KEY" and result["validated"] is False
    # module defaults reach the renderer: tensor_parallel 1, prefix caching on
    assert "--enable-prefix-caching" in result["flags"] and "1" in result["flags"]


def test_the_module_passes_the_current_link_and_both_environments_through():
    kind, result = run({"engine": "vllm", "engine_version": "0.32.0", "spec": SPEC, "validate": False,
                        "python": "/venv/bin/python", "current_link": "/opt/v/vllm-current",
                        "base_env": {"HOME": "/h", "DO_NOT_TRACK": "0"}, "override_env": {"HOME": "/mine"}})
    assert kind is Exit
    assert result["exec"] == ["/opt/v/vllm-current/bin/python"] + result["command"][1:]
    assert result["environment"]["HOME"] == "/mine" and result["environment"]["DO_NOT_TRACK"] == "1"


def test_validation_runs_through_run_command(monkeypatch):
    seen = {}

    def run_command(self, args, data=None, environ_update=None, **kwargs):
        seen.update(args=args, data=data, env=environ_update)
        res = {"installed": [{"name": "sglang", "version": "0.5.23"}],
               "options": dict((o, {"dest": o, "kind": "x"}) for o in
                               ["--model-path", "--served-model-name", "--host", "--port", "--tp-size",
                                "--enable-metrics", "--device", "--attention-backend"]),
               "parser_source": "fake", "launcher_present": True}
        return 0, ev.RESULT_MARKER + json.dumps(res) + "\n", ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    kind, result = run({"engine": "sglang", "engine_version": "0.5.23", "spec": SPEC,
                        "stack_args": {"device": "cpu", "attention-backend": "torch_native"},
                        "python": "/venv/bin/python"}, check_mode=True)
    assert kind is Exit, result
    assert result["validated"] is True and result["validation_method"] == "parser"
    assert seen["args"][:2] == ["/venv/bin/python", "-c"]
    assert seen["env"]["SGLANG_USE_CPU_ENGINE"] == "1"
    assert result["command"][1:3] == ["-m", "llmops_sglang_launch"]
    assert "llmops_sglang_launch" in result["launcher"]["content"]


def test_a_second_validation_of_the_same_venv_and_flags_reads_the_cache(monkeypatch, tmp_path):
    venv = tmp_path / "vllm-0.32.0-37ea9d68ebb9"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    calls = []

    def run_command(self, args, data=None, environ_update=None, **kwargs):
        calls.append(args)
        res = {"installed": [{"name": "vllm", "version": "0.32.0"}],
               "options": dict((o, {"dest": o, "kind": "x"}) for o in
                               ["--served-model-name", "--host", "--port", "--tensor-parallel-size",
                                "--enable-prefix-caching", "--max-num-seqs"]),
               "parser_source": "fake"}
        return 0, ev.RESULT_MARKER + json.dumps(res) + "\n", ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    args = {"engine": "vllm", "engine_version": "0.32.0", "spec": SPEC, "python": str(venv / "bin" / "python"),
            "cache_dir": str(tmp_path / "probes")}
    first = run(args)[1]
    # check mode only reads (cache_update false, as the role passes it there)
    second = run(dict(args, cache_update=False), check_mode=True)[1]
    third = run(dict(args, spec=dict(SPEC, port=8001)), check_mode=True)[1]
    assert first["validated"] and not first["validation_cached"]
    assert second["validated"] and second["validation_cached"] and second["flags"] == first["flags"]
    assert not third["validation_cached"]
    assert len(calls) == 2 and len(list((tmp_path / "probes").iterdir())) == 1


def test_override_of_spec_flag_fails_with_the_variable():
    kind, result = run({"engine": "vllm", "engine_version": "0.32.0", "spec": SPEC, "validate": False,
                        "extra_args": {"max-num-seqs": 4}})
    assert kind is Fail
    assert "serving_engine_extra_args" in result["msg"] and "serving_max_concurrency" in result["msg"]


def test_python_is_required_when_validating():
    kind, result = run({"engine": "vllm", "engine_version": "0.32.0", "spec": SPEC})
    assert kind is Fail and "python" in result["msg"]


def test_unknown_flag_failure_carries_details(monkeypatch):
    def run_command(self, args, data=None, environ_update=None, **kwargs):
        res = {"installed": [{"name": "vllm", "version": "0.32.0"}],
               "options": dict((o, {"dest": o, "kind": "x"}) for o in
                               ["--served-model-name", "--host", "--port", "--tensor-parallel-size",
                                "--enable-prefix-caching", "--no-enable-prefix-caching", "--enable-log-requests",
                                "--disable-log-stats"])}
        return 0, ev.RESULT_MARKER + json.dumps(res), ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    kind, result = run({"engine": "vllm", "engine_version": "0.32.0", "spec": SPEC, "python": "/v/bin/python",
                        "extra_args": {"disable-log-requests": True}})
    assert kind is Fail
    assert result["flag"] == "--disable-log-requests" and result["closest"] == "--enable-log-requests"
    assert "vllm 0.32.0" in result["msg"]


def test_documentation_matches_the_argument_spec():
    doc = yaml.safe_load(module.DOCUMENTATION)
    yaml.safe_load(module.EXAMPLES)
    returns = yaml.safe_load(module.RETURN)
    assert set(doc["options"]) == {"engine", "engine_version", "spec", "extra_args", "stack_args", "validate", "python",
                                   "cache_dir", "cache_update", "current_link", "base_env", "override_env"}
    assert set(doc["options"]["spec"]["suboptions"]) == set(module.SPEC_OPTIONS) == set(es.SPEC_DEFAULTS)
    for name, opt in module.SPEC_OPTIONS.items():
        documented = doc["options"]["spec"]["suboptions"][name]
        assert documented["type"] == opt["type"], name
        assert documented.get("default") == opt.get("default"), name
    for key in ("command", "exec", "environment", "flags", "env", "api_key_env", "validated", "validation_method", "validation_cached", "msg"):
        assert key in returns


def test_the_old_name_reaches_the_module(tmp_path):
    """meta/runtime.yml routes llmops.serving.engine_args (the module's earlier name) to it: a playbook
    that calls the old name runs this module."""
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [{
        "llmops.serving.engine_args": {
            "engine": "vllm", "engine_version": "0.32.0", "validate": False, "python": "/opt/venv/bin/python",
            "spec": {"model_path": "/srv/models/m", "served_model_name": "m", "host": "127.0.0.1", "port": 8000}}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    # the results as JSON, without the project's callbacks that print beside them
    (tmp_path / "ansible.cfg").write_text("[defaults]\nstdout_callback = ansible.posix.json\n")
    run = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
                          str(tmp_path / "play.yml")], capture_output=True, text=True, check=False,
                         env=dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg")))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    task = json.loads(run.stdout)["plays"][0]["tasks"][0]
    assert task["task"]["name"] == "llmops.serving.engine_args"
    argv = task["hosts"]["localhost"]["exec"]
    assert argv[:5] == ["/opt/venv/bin/python", "-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/m"], argv
