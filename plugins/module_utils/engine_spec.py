# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.serving
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving spec's schema and its checks: the keys, their defaults and serving_* variables,
normalize_spec() (values), and what a given engine version cannot do (unsupported_msg()). Errors
name the serving_* variable and what to do. Imports engine_flags only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.llmops.serving.plugins.module_utils.engine_flags import (
    LAUNCHER_KINDS, SPECULATIVE_METHODS, EngineArgsError, dotted, first_version_with, flag_table,
    node_launcher_problem, speculative_methods)
from ansible_collections.llmops.serving.plugins.module_utils.engines import REGISTRY

# The serving_* variable each spec key comes from: named in every error about that key.
SPEC_VARIABLES = {
    "model_path": "serving_model",
    "served_model_name": "serving_model.name",
    "host": "serving_listen",
    "port": "serving_listen",
    "tensor_parallel": "serving_tensor_parallel",
    "pipeline_parallel": "serving_pipeline_parallel",
    "nodes": "serving_instances",
    "max_model_len": "serving_max_model_len",
    "gpu_memory_fraction": "serving_gpu_memory_fraction",
    "max_concurrency": "serving_max_concurrency",
    "chat_template": "serving_chat_template",
    "enable_prefix_caching": "serving_enable_prefix_caching",
    "enable_metrics": "serving_enable_metrics",
    "trust_remote_code": "serving_trust_remote_code",
    "dtype": "serving_dtype",
    "tls_certfile": "serving_engine_tls",
    "tls_keyfile": "serving_engine_tls",
    "auto_tool_choice": "serving_tool_calling",
    "tool_call_parser": "serving_tool_call_parser",
    "tool_arguments_strict": "serving_tool_arguments_strict",
    "enable_reasoning": "serving_reasoning",
    "reasoning_parser": "serving_reasoning_parser",
    "kv_cache_dtype": "serving_kv_cache_dtype",
    "block_size": "serving_block_size",
    "structured_output_backend": "serving_structured_output",
    "max_batched_tokens": "serving_max_batched_tokens",
    "enable_chunked_prefill": "serving_chunked_prefill",
    "prefill_chunk_tokens": "serving_chunked_prefill.chunk_tokens",
    "long_prefill_threshold": "serving_chunked_prefill.long_prefill_threshold",
    "priority_scheduling": "serving_priority_scheduling",
    "speculative": "serving_speculative",
    "long_context": "serving_long_context",
    "lora": "serving_lora_adapters",
    "api_key": "serving_api_key",
    "admin_api_key": "serving_admin_api_key",
}

SPEC_DEFAULTS = {
    "model_path": None,
    "served_model_name": None,
    "host": None,
    "port": None,
    "tensor_parallel": 1,
    "pipeline_parallel": 1,
    "nodes": None,
    "max_model_len": None,
    "gpu_memory_fraction": None,
    "max_concurrency": None,
    "chat_template": None,
    "enable_prefix_caching": True,
    "enable_metrics": True,
    "trust_remote_code": False,
    "dtype": None,
    "tls_certfile": None,
    "tls_keyfile": None,
    "auto_tool_choice": False,
    "tool_call_parser": None,
    "tool_arguments_strict": False,
    "enable_reasoning": False,
    "reasoning_parser": None,
    "kv_cache_dtype": None,
    "block_size": None,
    "structured_output_backend": None,
    "max_batched_tokens": None,
    "enable_chunked_prefill": None,
    "prefill_chunk_tokens": None,
    "long_prefill_threshold": None,
    "priority_scheduling": False,
    "speculative": None,
    "long_context": None,
    "lora": None,
}

REQUIRED_SPEC = ("model_path", "served_model_name", "host", "port")

# The spec keys rendered as a flag with a value, in argv order, and the on/off ones.
VALUE_SPEC_KEYS = ("served_model_name", "host", "port", "tensor_parallel", "max_model_len", "gpu_memory_fraction",
                   "max_concurrency", "chat_template", "dtype", "kv_cache_dtype", "tls_certfile", "tls_keyfile",
                   "tool_call_parser", "reasoning_parser", "structured_output_backend", "max_batched_tokens",
                   "prefill_chunk_tokens", "long_prefill_threshold", "block_size")

BOOL_SPEC_KEYS = ("enable_prefix_caching", "enable_metrics", "trust_remote_code", "auto_tool_choice", "enable_reasoning",
                  "priority_scheduling", "tool_arguments_strict")

# On/off keys that render nothing when null (the engine's own default, which differs by version).
OPTIONAL_BOOL_SPEC_KEYS = ("enable_chunked_prefill",)

# Keys whose value (a dict) becomes one JSON flag or several flags: _speculative_pieces, _long_context_pieces.
DICT_SPEC_KEYS = ("speculative", "long_context", "lora")

# Keys of the instance's shape, rendered by rules of their own: pipeline_parallel only above 1 (a host
# of its own keeps its argv), nodes by the version's launcher (NODE_LAUNCHERS).
TOPOLOGY_SPEC_KEYS = ("pipeline_parallel", "nodes")

# The keys of `nodes`, this host's place in an instance that spans hosts (serving_instances).
NODE_KEYS = ("count", "rank", "address", "port", "host_address", "interface", "cpus", "launcher")

SPECULATIVE_KEYS = {"method", "tokens", "lookup_max", "lookup_min", "draft_model"}

LONG_CONTEXT_KEYS = {"factor", "original_max_position"}

# LoRA adapters served by name. vLLM takes only these ranks for --max-lora-rank (the choices of its
# --help from 0.19.1; LoRAConfig's possible_max_ranks in 0.8.5.post1, which lacks 1): the adapters'
# largest rank is rounded up to one of them. SGLang's --enable-lora and --max-lora-rank arrived in
# 0.5.10 (0.4.6.post5 infers the rank from the adapters); its batch limit counts the base model too.
LORA_KEYS = {"adapters", "max_rank", "max_loras"}

SERVED_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$")

# What to do when the engine version has no flag for a spec key that is set, by its variable.
UNSUPPORTED_HINTS = {
    "serving_chunked_prefill.long_prefill_threshold": "leave it out ({label} has no long-prefill threshold; "
                                                      "chunk_tokens bounds a prefill chunk)",
    "serving_engine_tls": "use a stack profile whose {label} has it, or set serving_engine_tls: false (the "
                          "engine port then carries plain HTTP, reachable only from the host and its gateways)",
}


def unsupported_msg(engine, engine_version, key, value=None):
    """Why a set spec key (with `value`, where the version support depends on it) cannot be
    rendered for this version, naming its variable, or None."""
    if key == "nodes":
        kind = value.get("launcher") if isinstance(value, dict) else None
        return node_launcher_problem(engine, engine_version, kind or "native")
    label = REGISTRY[engine]["label"]
    if key == "speculative" and isinstance(value, dict) and value.get("method") is not None:
        methods = speculative_methods(engine, engine_version)
        method = value["method"]
        if method not in methods:
            since = [dotted(v) for v, names in SPECULATIVE_METHODS[engine] if method in names]
            return ("serving_speculative: %s %s has no %r speculative method%s (it has %s); use a stack profile "
                    "whose %s has it, or another method" % (
                        label, engine_version, method, (", first in %s %s" % (label, since[0])) if since else "",
                        ", ".join(sorted(methods)), label))
    if flag_table(engine, engine_version)[key] is not None:
        return None
    since = first_version_with(engine, key)
    hint = UNSUPPORTED_HINTS.get(SPEC_VARIABLES[key], "use a stack profile whose {label} has it")
    return ("%s: %s %s has no flag for it (%s%s); %s" % (
        SPEC_VARIABLES[key], label, engine_version, key,
        (", first in %s %s" % (label, since)) if since else "", hint.format(label=label)))


def engine_flag_problems_for(engine, engine_version, settings):
    """What is wrong with some spec keys before anything is rendered: their values (normalize_spec's
    checks) and unsupported_msg() of every set key. settings is {spec key: value}; a list of keys
    means each is set to true."""
    values = isinstance(settings, dict)
    if not values:
        settings = dict((key, True) for key in settings)
    unknown = sorted(set(settings) - set(SPEC_DEFAULTS))
    if unknown:
        raise EngineArgsError("unknown spec keys %s; known keys: %s" % (", ".join(unknown), ", ".join(sorted(SPEC_DEFAULTS))))
    if values:
        try:
            normalize_spec(dict({"model_path": "/", "served_model_name": "m", "host": "127.0.0.1", "port": 1},
                                **settings))
        except EngineArgsError as exc:
            return [exc.msg]
    problems = []
    for key, value in sorted(settings.items()):
        if value is None or value is False:
            continue
        msg = unsupported_msg(engine, engine_version, key, value)
        if msg:
            problems.append(msg)
    return problems


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def normalize_spec(spec):
    """Spec with defaults filled in, checked; errors name the serving_* variable."""
    if not isinstance(spec, dict):
        raise EngineArgsError("spec must be a dict of the serving spec (model_path, served_model_name, host, port, ...)")
    unknown = sorted(set(spec) - set(SPEC_DEFAULTS))
    if unknown:
        raise EngineArgsError(
            "spec has unknown keys %s; known keys: %s. Engine flags outside the spec go to "
            "serving_engine_extra_args." % (", ".join(unknown), ", ".join(sorted(SPEC_DEFAULTS))))
    out = dict(SPEC_DEFAULTS)
    for key, value in spec.items():
        if value is not None:
            out[key] = value
        elif key not in BOOL_SPEC_KEYS + ("tensor_parallel", "pipeline_parallel"):
            out[key] = None

    def bad(key, what):
        raise EngineArgsError("%s (spec.%s) %s; got %r" % (SPEC_VARIABLES[key], key, what, out[key]))

    for key in REQUIRED_SPEC:
        if out[key] is None or (isinstance(out[key], str) and not out[key].strip()):
            bad(key, "is required")
    for key in ("model_path", "served_model_name", "host"):
        if not isinstance(out[key], str):
            bad(key, "must be a string")
    if not is_int(out["port"]) or not 1 <= out["port"] <= 65535:
        bad("port", "must be a port number 1-65535")
    if not is_int(out["tensor_parallel"]) or out["tensor_parallel"] < 1:
        bad("tensor_parallel", "must be an integer >= 1")
    if not is_int(out["pipeline_parallel"]) or out["pipeline_parallel"] < 1:
        bad("pipeline_parallel", "must be an integer >= 1")
    _check_nodes(out["nodes"], out["pipeline_parallel"], bad)
    for key in ("max_model_len", "max_concurrency"):
        if out[key] is not None and (not is_int(out[key]) or out[key] < 1):
            bad(key, "must be an integer >= 1 or null (engine default)")
    fraction = out["gpu_memory_fraction"]
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            bad("gpu_memory_fraction", "must be a number in (0, 1] or null (engine default)")
    for key in ("chat_template", "dtype", "kv_cache_dtype", "tool_call_parser", "reasoning_parser",
                "structured_output_backend"):
        if out[key] is not None and (not isinstance(out[key], str) or not out[key].strip()):
            bad(key, "must be a non-empty string or null")
    for key in ("max_batched_tokens", "prefill_chunk_tokens", "long_prefill_threshold", "block_size"):
        if out[key] is not None and (not is_int(out[key]) or out[key] < 1):
            bad(key, "must be an integer >= 1 or null (engine default)")
    for key in BOOL_SPEC_KEYS:
        if not isinstance(out[key], bool):
            bad(key, "must be true or false")
    for key in OPTIONAL_BOOL_SPEC_KEYS:
        if out[key] is not None and not isinstance(out[key], bool):
            bad(key, "must be true, false or null (engine default)")
    if out["enable_chunked_prefill"] is False:
        for key in ("prefill_chunk_tokens", "long_prefill_threshold"):
            if out[key] is not None:
                bad(key, "sizes chunked prefill, which serving_chunked_prefill turns off")
    _check_speculative(out["speculative"], bad)
    _check_long_context(out["long_context"], bad)
    _check_lora(out["lora"], out["served_model_name"], bad)
    if out["auto_tool_choice"] and not out["tool_call_parser"]:
        bad("auto_tool_choice", "needs a tool-call parser (serving_tool_call_parser)")
    if out["enable_reasoning"] and not out["reasoning_parser"]:
        bad("enable_reasoning", "needs a reasoning parser (serving_reasoning_parser)")
    if any(ch.isspace() for ch in out["served_model_name"]):
        bad("served_model_name", "must not contain whitespace")
    return out


def _check_nodes(value, pipeline_parallel, bad):
    """nodes: null (the instance is this host) or this host's place in an instance of `count`
    hosts, one pipeline stage each: rank, the rank-0 host's address and port, and optionally this
    host's own address and the network interface the ranks talk over."""
    if value is None:
        if pipeline_parallel > 1:
            bad("nodes", "must place this host in an instance of %d hosts (serving_pipeline_parallel)"
                % pipeline_parallel)
        return
    if not isinstance(value, dict) or sorted(set(value) - set(NODE_KEYS)):
        bad("nodes", "must be a dict of %s" % ", ".join(NODE_KEYS))
    count, rank = value.get("count"), value.get("rank")
    if not is_int(count) or count < 2:
        bad("nodes", "count must be an integer >= 2 (an instance of one host needs no nodes)")
    if count != pipeline_parallel:
        bad("nodes", "count (%r) must equal serving_pipeline_parallel (%d): one pipeline stage per host"
            % (count, pipeline_parallel))
    if not is_int(rank) or not 0 <= rank < count:
        bad("nodes", "rank must be an integer in [0, %d)" % count)
    if not isinstance(value.get("address"), str) or not value["address"].strip() or " " in value["address"]:
        bad("nodes", "address must be the rank-0 host's address")
    if not is_int(value.get("port")) or not 1 <= value["port"] <= 65535:
        bad("nodes", "port must be a port number 1-65535")
    for key in ("host_address", "interface"):
        if value.get(key) is not None and (not isinstance(value[key], str) or " " in value[key]):
            bad("nodes", "%s must be a string without spaces or null" % key)
    if value.get("cpus") is not None and (not is_int(value["cpus"]) or value["cpus"] < 1):
        bad("nodes", "cpus must be an integer >= 1 (the host's logical CPUs) or null")
    if value.get("launcher") is not None and value["launcher"] not in LAUNCHER_KINDS:
        bad("nodes", "launcher must be one of %s or null (native)" % ", ".join(LAUNCHER_KINDS))


def _check_speculative(value, bad):
    if value is None:
        return
    if not isinstance(value, dict):
        bad("speculative", "must be null or a dict like {method: ngram, tokens: 4}")
    unknown = sorted(set(value) - SPECULATIVE_KEYS)
    if unknown:
        bad("speculative", "has unknown keys %s (known: %s)" % (", ".join(unknown), ", ".join(sorted(SPECULATIVE_KEYS))))
    methods = set(name for rows in SPECULATIVE_METHODS.values() for dummy, names in rows for name in names)
    method = value.get("method")
    if method not in methods:
        bad("speculative", "needs a method: %s" % ", ".join(sorted(methods)))
    for key in ("tokens", "lookup_max", "lookup_min"):
        if value.get(key) is not None and (not is_int(value[key]) or value[key] < 1):
            bad("speculative", "%s must be an integer >= 1" % key)
    if method != "ngram" and (value.get("lookup_max") is not None or value.get("lookup_min") is not None):
        bad("speculative", "lookup_max and lookup_min bound the n-gram prompt lookup (method ngram only)")
    if (value.get("lookup_min") or 1) > (value.get("lookup_max") or value.get("lookup_min") or 1):
        bad("speculative", "lookup_min must not exceed lookup_max")
    if method in ("eagle", "eagle3"):
        if not isinstance(value.get("draft_model"), str) or not value["draft_model"].strip():
            bad("speculative", "method %s needs draft_model (the draft head's local folder)" % method)
    elif value.get("draft_model") is not None:
        bad("speculative", "draft_model is for eagle and eagle3 (ngram looks up the prompt; mtp is the model's own head)")


def _check_long_context(value, bad):
    if value is None:
        return
    if not isinstance(value, dict) or set(value) != LONG_CONTEXT_KEYS:
        bad("long_context", "must be null or {factor: 4.0, original_max_position: 32768} (YaRN)")
    factor, origin = value["factor"], value["original_max_position"]
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 1:
        bad("long_context", "factor must be a number above 1")
    if not is_int(origin) or origin < 1:
        bad("long_context", "original_max_position must be an integer >= 1 (the context the model was trained at)")


def _check_lora(value, served_name, bad):
    if value is None:
        return
    if not isinstance(value, dict) or not set(value) <= LORA_KEYS or not isinstance(value.get("adapters"), list):
        bad("lora", "must be null or {adapters: [{name: ..., path: ...}], max_rank: 16, max_loras: 2}")
    if not value["adapters"]:
        bad("lora", "lists no adapters (null serves none)")
    seen = set()
    for item in value["adapters"]:
        if not isinstance(item, dict) or set(item) != {"name", "path"}:
            bad("lora", "adapters must be {name, path} each")
        name, path = item["name"], item["path"]
        if not isinstance(name, str) or not SERVED_NAME.match(name):
            bad("lora", "adapter name %r must be 1-128 letters, digits and . _ : @ / - (a served model name)" % (name,))
        if name == served_name or name in seen:
            bad("lora", "adapter name %r is used twice (the base model is %r); every served name must differ"
                % (name, served_name))
        seen.add(name)
        if not isinstance(path, str) or not path.startswith("/") or any(ch.isspace() or ch == "=" for ch in path):
            bad("lora", "adapter %s: path %r must be an absolute path without spaces or '='" % (name, path))
    for key in ("max_rank", "max_loras"):
        if value.get(key) is not None and (not is_int(value[key]) or value[key] < 1):
            bad("lora", "%s must be an integer >= 1" % key)
    if not value.get("max_rank"):
        bad("lora", "max_rank is required (the adapters' largest rank)")
