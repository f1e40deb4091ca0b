# -*- coding: utf-8 -*-
"""engine_flags: the per-version flag tables, checked against the recorded --help of every engine
version the stack profiles pin (tests/fixtures/engines): every flag a table row renders, every
spelling the spec owns, every flag of the rendering cases, and what each version renders for tool
calling, reasoning, the KV cache dtype, structured output and TLS."""

import os

import pytest
import yaml

from ansible_collections.llmops.serving.plugins.module_utils import engine_args as ea
from ansible_collections.llmops.serving.plugins.module_utils import engine_flags as ef
from ansible_collections.llmops.serving.plugins.module_utils import engine_spec as es
from ansible_collections.llmops.serving.plugins.module_utils import engine_validate as ev

from ansible_collections.llmops.serving.plugins.module_utils.engines import ENGINES

from engine_cases import CASES, FULL, HELP_FILES, PY, help_choices, help_text, spec


# ---------------------------------------------------------------------------------------------
# the translation table against the real --help of each version
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_every_flag_the_table_renders_exists_in_that_version(engine, version):
    options = ev.help_options(help_text(engine, version))
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
    for engine in ENGINES:
        known = set()
        for version in [v for e, v in HELP_FILES if e == engine]:
            known.update(ev.help_options(help_text(engine, version)))
        for key in ef.SPEC_OWNED[engine]:
            assert "--" + key.partition(".")[0] in known or key in ("model-tag", "tp", "model"), (engine, key)


def test_help_options_reads_headers_only():
    text = help_text("sglang", "0.5.23")
    options = ev.help_options(text)
    assert options["--tensor-parallel-size"] == options["--tp-size"] == "--tp-size"
    assert options["--model"] == "--model-path"
    assert "--max-num-sequences" not in options
    vllm32 = ev.help_options(help_text("vllm", "0.32.0"))
    assert vllm32["-tp"] == "--tensor-parallel-size"
    assert vllm32["--device-memory-utilization"] == "--gpu-memory-utilization"
    assert "--disable-log-requests" not in vllm32  # removed in 0.32 ...
    vllm33 = ev.help_options(help_text("vllm", "0.33.0"))
    assert vllm33["--disable-log-requests"] == "--enable-log-requests"  # ... back as a negation in 0.33
    assert "--no-enable-prefix-caching" not in vllm33 and "--disable-prefix-caching" in vllm33


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
    options = ev.help_options(help_text(engine, version))
    off = [f for f in ("--no-enable-prefix-caching", "--disable-prefix-caching") if f in options]
    flags = ea.build(engine, version, spec(enable_prefix_caching=False), validate_flags=False, python=PY)["flags"]
    assert off and off[0] in flags and "--enable-prefix-caching" not in flags, (off, flags)


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_tls_files_render_as_flags_the_version_accepts(engine, version):
    has_tls = {"--ssl-certfile", "--ssl-keyfile"} <= set(ev.help_options(help_text(engine, version)))
    if not has_tls:
        # refused, naming the variable, the first version with the flags and the way out
        with pytest.raises(ef.EngineArgsError) as err:
            ea.build(engine, version, spec(tls_certfile="/etc/llmops/tls/engine.crt",
                                           tls_keyfile="/etc/llmops/tls/engine.key"), validate_flags=False, python=PY)
        assert err.value.msg.startswith("serving_engine_tls: SGLang %s has no flag for it" % version)
        assert "first in SGLang 0.5.10" in err.value.msg and "serving_engine_tls: false" in err.value.msg
        assert es.unsupported_msg(engine, version, "tls_certfile") == err.value.msg
        return
    assert es.unsupported_msg(engine, version, "tls_certfile") is None
    flags = ea.build(engine, version, spec(tls_certfile="/etc/llmops/tls/engine.crt", tls_keyfile="/etc/llmops/tls/engine.key"),
                     validate_flags=False, python=PY)["flags"]
    assert flags[flags.index("--ssl-certfile") + 1] == "/etc/llmops/tls/engine.crt"
    assert flags[flags.index("--ssl-keyfile") + 1] == "/etc/llmops/tls/engine.key"
    with pytest.raises(ef.EngineArgsError) as err:
        ea.build(engine, version, FULL, extra_args={"ssl-keyfile": "/tmp/k"}, validate_flags=False, python=PY)
    assert "serving_engine_tls" in err.value.msg


# ---------------------------------------------------------------------------------------------
# tool calling: the registry's parser for each tool-call format, rendered per version
# ---------------------------------------------------------------------------------------------
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
    options = ev.help_options(help_text(engine, version))
    if engine == "vllm":
        # without it vLLM answers 400 to tools with tool_choice "auto"
        assert "--enable-auto-tool-choice" in flags and "--enable-auto-tool-choice" in options
    else:
        assert "--enable-auto-tool-choice" not in flags
    off = ea.build(engine, version, spec(), validate_flags=False, python=PY)["flags"]
    assert "--tool-call-parser" not in off and "--enable-auto-tool-choice" not in off


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_strict_tool_arguments_render_where_the_version_frees_them(engine, version):
    # vLLM from 0.31 has --tool-strict-level (its parameter level pins every tool's arguments);
    # SGLang 0.5.23 reads SGLANG_TOOL_STRICT_LEVEL; earlier versions decode forced calls under the
    # tool's schema without being asked, and render nothing
    tools = spec(auto_tool_choice=True, tool_call_parser="hermes" if engine == "vllm" else "qwen25")
    strict = ea.build(engine, version, dict(tools, tool_arguments_strict=True), validate_flags=False, python=PY)
    loose = ea.build(engine, version, tools, validate_flags=False, python=PY)
    options = ev.help_options(help_text(engine, version))
    has_level = "--tool-strict-level" in options
    assert has_level == (engine == "vllm" and ef.parse_version(version) >= (0, 31, 0))
    if has_level:
        assert strict["flags"][strict["flags"].index("--tool-strict-level") + 1] == "parameter"
        assert "parameter" in help_choices(help_text(engine, version), "--tool-strict-level")
    else:
        assert "--tool-strict-level" not in strict["flags"]
    assert "--tool-strict-level" not in loose["flags"]
    expected_env = "2" if engine == "sglang" and ef.parse_version(version) >= (0, 5, 23) else None
    assert strict["env"].get("SGLANG_TOOL_STRICT_LEVEL") == expected_env
    assert "SGLANG_TOOL_STRICT_LEVEL" not in loose["env"]
    assert strict["environment"].get("SGLANG_TOOL_STRICT_LEVEL") == expected_env


def test_strict_tool_arguments_are_owned_by_the_spec():
    with pytest.raises(ef.EngineArgsError, match="serving_tool_arguments_strict"):
        ea.build("vllm", "0.32.0", spec(), extra_args={"tool-strict-level": "auto"}, validate_flags=False, python=PY)


def test_the_xml_tool_call_format_has_a_parser_only_where_the_version_lists_one():
    from ansible_collections.llmops.serving.plugins.module_utils import engines
    assert "xml" not in engines.engine_info("vllm", "0.8.5.post1")["tool_call_parsers"]
    assert "xml" not in engines.engine_info("sglang", "0.4.6.post5")["tool_call_parsers"]
    assert engines.engine_info("vllm", "0.33.0")["tool_call_parsers"]["xml"] == "qwen3_coder"
    assert engines.engine_info("sglang", "0.5.23")["tool_call_parsers"]["xml"] == "qwen3_coder"
    assert "qwen3_coder" not in help_choices(help_text("vllm", "0.8.5.post1"), "--tool-call-parser")
    assert "qwen3_coder" not in help_choices(help_text("sglang", "0.4.6.post5"), "--tool-call-parser")


def test_tool_calling_bad_values_name_the_variable():
    with pytest.raises(ef.EngineArgsError, match=r"serving_tool_calling \(spec.auto_tool_choice\) needs a tool-call parser"):
        ea.render("vllm", "0.32.0", spec(auto_tool_choice=True))
    with pytest.raises(ef.EngineArgsError, match=r"serving_tool_call_parser \(spec.tool_call_parser\) must be a non-empty"):
        ea.render("sglang", "0.5.23", spec(auto_tool_choice=True, tool_call_parser=" "))
    with pytest.raises(ef.EngineArgsError, match="serving_tool_call_parser"):
        ea.render("vllm", "0.32.0", spec(), extra_args={"tool-call-parser": "hermes"})
    with pytest.raises(ef.EngineArgsError, match="serving_tool_calling"):
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
    assert ("--enable-reasoning" in flags) == ("--enable-reasoning" in ev.help_options(text))
    off = ea.build(engine, version, spec(), validate_flags=False, python=PY)["flags"]
    assert "--reasoning-parser" not in off and "--enable-reasoning" not in off
    with pytest.raises(ef.EngineArgsError, match=r"serving_reasoning \(spec.enable_reasoning\) needs a reasoning parser"):
        ea.render(engine, version, spec(enable_reasoning=True))
    with pytest.raises(ef.EngineArgsError, match="serving_reasoning_parser"):
        ea.render(engine, version, spec(), extra_args={"reasoning-parser": parser})


def test_every_spec_key_is_rendered_or_named():
    # a key added to the spec but to neither list would be accepted and never rendered
    assert (set(es.VALUE_SPEC_KEYS) | set(es.BOOL_SPEC_KEYS) | set(es.OPTIONAL_BOOL_SPEC_KEYS) | set(es.DICT_SPEC_KEYS)
            | set(es.TOPOLOGY_SPEC_KEYS) | {"model_path"}) == set(es.SPEC_DEFAULTS)
    assert set(es.SPEC_DEFAULTS) <= set(es.SPEC_VARIABLES)
    for engine in ENGINES:
        # nodes renders through the version's launcher (NODE_LAUNCHERS), not a flag of its own
        assert set(ef.FLAG_TABLE[engine]) == (set(es.VALUE_SPEC_KEYS) | set(es.BOOL_SPEC_KEYS)
                                              | set(es.OPTIONAL_BOOL_SPEC_KEYS) | set(es.DICT_SPEC_KEYS)
                                              | {"pipeline_parallel"})
        assert set(ef.NODE_LAUNCHERS) == set(ENGINES)


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_fp8_kv_cache_renders_a_dtype_every_version_accepts(engine, version):
    choices = help_choices(help_text(engine, version), "--kv-cache-dtype")
    # the spelling both engines share, at every pinned version
    assert {"auto", "fp8_e4m3", "fp8_e5m2"} <= choices, sorted(choices)
    flags = ea.build(engine, version, spec(kv_cache_dtype="fp8_e4m3"), validate_flags=False, python=PY)["flags"]
    assert flags[flags.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
    assert "--kv-cache-dtype" not in ea.build(engine, version, spec(), validate_flags=False, python=PY)["flags"]
    with pytest.raises(ef.EngineArgsError, match="set serving_kv_cache_dtype instead"):
        ea.render(engine, version, spec(), extra_args={"kv-cache-dtype": "fp8"})


@pytest.mark.parametrize("engine,version", sorted(HELP_FILES))
def test_structured_output_backend_renders_the_flag_of_the_version(engine, version):
    flags = ea.build(engine, version, spec(structured_output_backend="xgrammar"), validate_flags=False,
                     python=PY)["flags"]
    flag = [f for f in flags if f.startswith(("--guided-decoding-backend", "--structured-outputs-config",
                                              "--grammar-backend"))]
    assert len(flag) == 1 and flags[flags.index(flag[0]) + 1] == "xgrammar"
    assert flag[0].partition(".")[0] in ev.help_options(help_text(engine, version))
    # where the --help lists the backends, both shared names are among them
    choices = help_choices(help_text(engine, version), flag[0])
    assert not choices or {"xgrammar", "outlines"} <= choices, sorted(choices)
    with pytest.raises(ef.EngineArgsError, match="serving_structured_output"):
        ea.render(engine, version, spec(), extra_args={flag[0].lstrip("-"): "outlines"})
    if "." in flag[0]:
        # the config's other keys stay the user's
        other = ea.render(engine, version, spec(), extra_args={"structured-outputs-config.disable_any_whitespace": True})
        assert "--structured-outputs-config.disable_any_whitespace" in other["flags"]


RECORDED_CASES = [c for c in CASES if (c[1], c[2]) in HELP_FILES]


@pytest.mark.parametrize("name,engine,version,expected", [(c[0], c[1], c[2], c[6]) for c in RECORDED_CASES],
                         ids=[c[0] for c in RECORDED_CASES])
def test_every_flag_of_the_rendering_cases_is_in_that_versions_help(name, engine, version, expected):
    options = ev.help_options(help_text(engine, version))
    missing = [word for word in expected if word.startswith("--") and word.split("=")[0] not in options]
    assert not missing, "%s: %s %s's --help has no %s" % (name, engine, version, ", ".join(missing))


def test_the_rendering_cases_checked_against_a_recording_cover_both_engines():
    assert set(c[1] for c in RECORDED_CASES) == set(ENGINES)
