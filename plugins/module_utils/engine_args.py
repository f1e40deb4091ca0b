# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.serving
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one translation point from the engine-neutral serving spec to engine argv.

render()   spec + stack args + extra args -> argv, env, API-key variable for one engine version.
validate() checks that argv against the engine installed in a venv: its own argument parser
           (vLLM: make_arg_parser on a FlexibleArgumentParser; SGLang: ServerArgs.add_cli_args),
           or, when that parser cannot be built, the flags listed by the CLI's --help.
build()    both, as the engine_args module runs them.

Only the standard library and two sibling module_utils are used here, so tests/unit imports this
file directly and the code runs on any Python 3.8+ that Ansible runs modules with. Commands are
run through a `runner` callable (argv, stdin_text, env) -> (rc, stdout, stderr): the module passes
one built on AnsibleModule.run_command, tests pass fakes.

Two programs that run elsewhere are real Python files beside this one, so linters, sanity tests and
coverage see them; their source text is read at run time (from the AnsiballZ zip inside a module
run, through the import system's loader) and sent on:
  engine_probe.py   run as `python -c SOURCE` by the engine venv's interpreter (validate());
  sglang_launch.py  installed into the SGLang venv as llmops_sglang_launch.py (launcher_info()).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import inspect
import json
import os
import re
import subprocess

# Imported (not only read) so that AnsiballZ packs them with this file.
from ansible_collections.llmops.serving.plugins.module_utils import engine_probe, engines, sglang_launch
from ansible_collections.llmops.serving.plugins.module_utils.engines import ENGINES, REGISTRY


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
    "enable_reasoning": "serving_reasoning",
    "reasoning_parser": "serving_reasoning_parser",
    "kv_cache_dtype": "serving_kv_cache_dtype",
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
    "enable_reasoning": False,
    "reasoning_parser": None,
    "kv_cache_dtype": None,
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
                   "prefill_chunk_tokens", "long_prefill_threshold")
BOOL_SPEC_KEYS = ("enable_prefix_caching", "enable_metrics", "trust_remote_code", "auto_tool_choice", "enable_reasoning",
                  "priority_scheduling")
# On/off keys that render nothing when null (the engine's own default, which differs by version).
OPTIONAL_BOOL_SPEC_KEYS = ("enable_chunked_prefill",)
# Keys whose value (a dict) becomes one JSON flag or several flags: _speculative_pieces, _long_context_pieces.
DICT_SPEC_KEYS = ("speculative", "long_context", "lora")
# Keys of the instance's shape, rendered by rules of their own: pipeline_parallel only above 1 (a host
# of its own keeps its argv), nodes by the version's launcher (NODE_LAUNCHERS).
TOPOLOGY_SPEC_KEYS = ("pipeline_parallel", "nodes")
# The keys of `nodes`, this host's place in an instance that spans hosts (serving_instances).
NODE_KEYS = ("count", "rank", "address", "port", "host_address", "interface", "cpus", "launcher")
# How the ranks of an instance meet (nodes.launcher, from serving_multinode_launcher): the engine's own
# launcher across hosts (NODE_LAUNCHERS), or a Ray cluster (RAY_LAUNCHERS) that the ray_cluster role runs.
LAUNCHER_KINDS = ("native", "ray")

# ---------------------------------------------------------------------------------------------
# The translation table. Per engine and spec key, a list of (first engine version, rule); the
# last row whose version is <= the engine version applies. A rule is the flag (str), or for
# booleans a pair (flag when true, flag when false), None meaning "no flag" (a value key whose
# rule is None is refused: the version cannot do what the spec asks). Every row of a version the
# stack profiles pin is checked against that version's real --help (tests/fixtures/engines);
# validate() against the installed engine is the gate on the host either way.
# ---------------------------------------------------------------------------------------------
FLAG_TABLE = {
    "vllm": {
        "served_model_name": [((0, 0, 0), "--served-model-name")],
        "host": [((0, 0, 0), "--host")],
        "port": [((0, 0, 0), "--port")],
        "tensor_parallel": [((0, 0, 0), "--tensor-parallel-size")],
        "pipeline_parallel": [((0, 0, 0), "--pipeline-parallel-size")],
        "max_model_len": [((0, 0, 0), "--max-model-len")],
        "gpu_memory_fraction": [((0, 0, 0), "--gpu-memory-utilization")],
        "max_concurrency": [((0, 0, 0), "--max-num-seqs")],
        "chat_template": [((0, 0, 0), "--chat-template")],
        # A store_true flag at first; a BooleanOptionalAction (--no-...) from 0.6.5 (its
        # arg_utils.py; 0.6.4's has none), which matters from 0.8, whose V1 engine caches prefixes
        # by default; from 0.33 every negative boolean is spelled --disable-...
        "enable_prefix_caching": [
            ((0, 0, 0), ("--enable-prefix-caching", None)),
            ((0, 6, 5), ("--enable-prefix-caching", "--no-enable-prefix-caching")),
            ((0, 33, 0), ("--enable-prefix-caching", "--disable-prefix-caching")),
        ],
        # vLLM always serves /metrics; there is no flag to turn it on or off.
        "enable_metrics": [((0, 0, 0), (None, None))],
        "trust_remote_code": [((0, 0, 0), ("--trust-remote-code", None))],
        "dtype": [((0, 0, 0), "--dtype")],
        # uvicorn's TLS, passed through by the OpenAI server
        "tls_certfile": [((0, 0, 0), "--ssl-certfile")],
        "tls_keyfile": [((0, 0, 0), "--ssl-keyfile")],
        # tools with tool_choice "auto" answer 400 without both
        "auto_tool_choice": [((0, 0, 0), ("--enable-auto-tool-choice", None))],
        "tool_call_parser": [((0, 0, 0), "--tool-call-parser")],
        # 0.8 needs --enable-reasoning beside the parser; 0.19.1's --help has no such flag (the
        # parser alone turns it on)
        "enable_reasoning": [((0, 0, 0), ("--enable-reasoning", None)), ((0, 19, 1), (None, None))],
        "reasoning_parser": [((0, 0, 0), "--reasoning-parser")],
        "kv_cache_dtype": [((0, 0, 0), "--kv-cache-dtype")],
        # the backend of response_format / guided decoding: a flag of its own in 0.8, a key of the
        # structured-outputs config by 0.19.1 (FlexibleArgumentParser reads the dotted key)
        "structured_output_backend": [((0, 0, 0), "--guided-decoding-backend"),
                                      ((0, 19, 1), "--structured-outputs-config.backend")],
        # The scheduler's token budget per step; with chunked prefill it is also the chunk size,
        # vLLM having no chunk size of its own (both keys render this flag and must agree).
        "max_batched_tokens": [((0, 0, 0), "--max-num-batched-tokens")],
        "prefill_chunk_tokens": [((0, 0, 0), "--max-num-batched-tokens")],
        "enable_chunked_prefill": [((0, 0, 0), ("--enable-chunked-prefill", "--no-enable-chunked-prefill")),
                                   ((0, 33, 0), ("--enable-chunked-prefill", "--disable-chunked-prefill"))],
        "long_prefill_threshold": [((0, 0, 0), "--long-prefill-token-threshold")],
        # requests then carry a `priority` (lower is served first; the default 0)
        "priority_scheduling": [((0, 0, 0), (["--scheduling-policy", "priority"], None))],
        "speculative": [((0, 0, 0), "--speculative-config")],
        "long_context": [((0, 0, 0), "--hf-overrides")],
        # adapters served beside the base under their own names (_lora_pieces adds the sizes)
        "lora": [((0, 0, 0), "--lora-modules")],
    },
    "sglang": {
        "served_model_name": [((0, 0, 0), "--served-model-name")],
        "host": [((0, 0, 0), "--host")],
        "port": [((0, 0, 0), "--port")],
        "tensor_parallel": [((0, 0, 0), "--tp-size")],
        "pipeline_parallel": [((0, 0, 0), "--pp-size")],
        "max_model_len": [((0, 0, 0), "--context-length")],
        "gpu_memory_fraction": [((0, 0, 0), "--mem-fraction-static")],
        "max_concurrency": [((0, 0, 0), "--max-running-requests")],
        "chat_template": [((0, 0, 0), "--chat-template")],
        # The radix (prefix) cache is on by default and has only a disable flag.
        "enable_prefix_caching": [((0, 0, 0), (None, "--disable-radix-cache"))],
        "enable_metrics": [((0, 0, 0), ("--enable-metrics", None))],
        "trust_remote_code": [((0, 0, 0), ("--trust-remote-code", None))],
        "dtype": [((0, 0, 0), "--dtype")],
        # The HTTP server's own TLS arrived in 0.5.10 (server_args.py of the 0.5.9 and 0.5.10
        # wheels); 0.4.6.post5's --help has neither flag.
        "tls_certfile": [((0, 0, 0), None), ((0, 5, 10), "--ssl-certfile")],
        "tls_keyfile": [((0, 0, 0), None), ((0, 5, 10), "--ssl-keyfile")],
        # a tool-call parser is all SGLang needs for tool_choice "auto"
        "auto_tool_choice": [((0, 0, 0), (None, None))],
        "tool_call_parser": [((0, 0, 0), "--tool-call-parser")],
        "enable_reasoning": [((0, 0, 0), (None, None))],
        "reasoning_parser": [((0, 0, 0), "--reasoning-parser")],
        "kv_cache_dtype": [((0, 0, 0), "--kv-cache-dtype")],
        "structured_output_backend": [((0, 0, 0), "--grammar-backend")],
        # SGLang's nearest to vLLM's step budget: the tokens of one prefill batch
        "max_batched_tokens": [((0, 0, 0), "--max-prefill-tokens")],
        "prefill_chunk_tokens": [((0, 0, 0), "--chunked-prefill-size")],
        # on by default; -1 turns it off (its --help)
        "enable_chunked_prefill": [((0, 0, 0), (None, ["--chunked-prefill-size", "-1"]))],
        "long_prefill_threshold": [((0, 0, 0), None)],
        # requests then carry a `priority` (higher is served first); 0.4.6.post5's --help has no flag
        "priority_scheduling": [((0, 0, 0), None), ((0, 5, 10), ("--enable-priority-scheduling", None))],
        "speculative": [((0, 0, 0), "--speculative-algorithm")],
        "long_context": [((0, 0, 0), "--json-model-override-args")],
        "lora": [((0, 0, 0), "--lora-paths")],
    },
}

# How one instance spans hosts (serving_instances), per engine version: the last row whose
# version is <= the engine version applies; None: the version has no launcher this collection
# runs. vLLM's own multiprocessing launcher across nodes (--nnodes, --node-rank, --master-addr,
# --master-port; --headless on the ranks that serve no API) came with vLLM pull request 23691
# (0.11.0); before it vLLM spans hosts only on a Ray cluster. SGLang has had --nnodes,
# --node-rank and --dist-init-addr in every pinned version (0.4.6.post5's --help has them); only
# rank 0 serves HTTP. Every row is checked against the recorded --help of the pinned versions.
NODE_LAUNCHERS = {
    "vllm": [
        ((0, 0, 0), None),
        ((0, 11, 0), {"launcher": "vLLM multiprocessing launcher", "count": "--nnodes", "rank": "--node-rank",
                      "address": "--master-addr", "port": "--master-port", "worker": "--headless"}),
    ],
    "sglang": [
        ((0, 0, 0), {"launcher": "SGLang multi-node launcher", "count": "--nnodes", "rank": "--node-rank",
                     "address_port": "--dist-init-addr", "worker": None}),
    ],
}

# Engines that run one instance across hosts on a Ray cluster: rank 0's engine joins the cluster as its
# driver (vLLM's --distributed-executor-backend ray, in every pinned version) and places the other
# stages on the cluster's workers; the other ranks run only their Ray worker. SGLang has no Ray
# executor. vLLM's CPU platform has no Ray device key (platforms/cpu.py leaves ray_device_key empty),
# so its Ray executor stops at start with "current platform cpu does not support ray"
# (v1/executor/ray_utils.py): a CPU instance spans hosts on vLLM's own launcher only.
RAY_LAUNCHERS = {
    "vllm": [((0, 0, 0), {"launcher": "Ray cluster", "backend": ["--distributed-executor-backend", "ray"]})],
    "sglang": [((0, 0, 0), None)],
}

# The speculative methods of serving_speculative per engine version, as the engine names them:
# vLLM's SpeculativeConfig.method (0.8.5.post1's Literal: ngram, eagle, medusa, mlp_speculator,
# draft_model; 0.19.1 adds eagle3 and the generic mtp), SGLang's --speculative-algorithm choices
# (0.4.6.post5: EAGLE, EAGLE3, NEXTN; NGRAM by 0.5.10.post1). mtp is the model's own multi-token
# prediction head (Qwen3-Next, Qwen3.5), which SGLang runs as NEXTN.
SPECULATIVE_METHODS = {
    "vllm": [((0, 0, 0), {"ngram": "ngram", "eagle": "eagle"}),
             ((0, 19, 1), {"ngram": "ngram", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp"})],
    "sglang": [((0, 0, 0), {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN"}),
               ((0, 5, 10), {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "ngram": "NGRAM"})],
}
SPECULATIVE_KEYS = {"method", "tokens", "lookup_max", "lookup_min", "draft_model"}

# How a YaRN context extension reaches the model's config without touching the checkpoint. With
# transformers 4 (vLLM 0.8.5.post1, SGLang 0.4.6.post5) the engines multiply max_position_embeddings
# by rope_scaling's factor and keep rope_theta at the config's top level. With transformers 5
# (vLLM from 0.19.1, SGLang from 0.5.10.post1) rope_scaling becomes rope_parameters, which carries
# rope_theta (an override without it falls back to the default theta), and vLLM 0.31 and SGLang
# 0.5.10 take max_position_embeddings as already scaled (a rope_scaling override alone is refused
# at 4x the context). Measured with each version's own ModelConfig on Qwen2.5-32B's config.json.
LONG_CONTEXT_FORMATS = {
    "vllm": [((0, 0, 0), "rope_scaling"), ((0, 19, 1), "rope_parameters")],
    "sglang": [((0, 0, 0), "rope_scaling"), ((0, 5, 10), "rope_parameters")],
}
LONG_CONTEXT_KEYS = {"factor", "original_max_position"}

# LoRA adapters served by name. vLLM takes only these ranks for --max-lora-rank (the choices of its
# --help from 0.19.1; LoRAConfig's possible_max_ranks in 0.8.5.post1, which lacks 1): the adapters'
# largest rank is rounded up to one of them. SGLang's --enable-lora and --max-lora-rank arrived in
# 0.5.10 (0.4.6.post5 infers the rank from the adapters); its batch limit counts the base model too.
LORA_KEYS = {"adapters", "max_rank", "max_loras"}
VLLM_LORA_RANKS = [((0, 0, 0), (8, 16, 32, 64, 128, 256, 320, 512)),
                   ((0, 19, 1), (1, 8, 16, 32, 64, 128, 256, 320, 512))]
SGLANG_LORA_FLAGS_SINCE = (0, 5, 10)
SERVED_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$")

# What to do when the engine version has no flag for a spec key that is set, by its variable.
UNSUPPORTED_HINTS = {
    "serving_chunked_prefill.long_prefill_threshold": "leave it out ({label} has no long-prefill threshold; "
                                                      "chunk_tokens bounds a prefill chunk)",
    "serving_engine_tls": "use a stack profile whose {label} has it, or set serving_engine_tls: false (the "
                          "engine port then carries plain HTTP, reachable only from the host and its gateways)",
}

# How each engine starts (entry module, words before the flags, how the model is passed), the
# variable its API key is read from and the distributions that carry it: the engine registry's.
ENTRY_TABLE = dict((name, [(engines.version_tuple(first), entry) for first, entry in REGISTRY[name]["entry"]])
                   for name in REGISTRY)
API_KEY_ENV = dict((name, REGISTRY[name]["api_key_env"]) for name in REGISTRY)
ADMIN_KEY_ENV = dict((name, REGISTRY[name].get("admin_key_env")) for name in REGISTRY)
DISTRIBUTIONS = dict((name, REGISTRY[name]["distributions"]) for name in REGISTRY)

# Spec-owned flags and every spelling that reaches the same setting: extra/stack args may not
# carry them. The installed parser adds any alias it knows (same argparse dest) at validation.
SPEC_OWNED = {
    "vllm": {
        "model": "model_path", "model-tag": "model_path",
        "served-model-name": "served_model_name",
        "host": "host", "port": "port",
        "tensor-parallel-size": "tensor_parallel", "tp": "tensor_parallel",
        "pipeline-parallel-size": "pipeline_parallel",
        "nnodes": "nodes", "node-rank": "nodes", "master-addr": "nodes", "master-port": "nodes", "headless": "nodes",
        "distributed-executor-backend": "nodes",
        "max-model-len": "max_model_len",
        "gpu-memory-utilization": "gpu_memory_fraction",
        "device-memory-utilization": "gpu_memory_fraction",
        "max-num-seqs": "max_concurrency",
        "chat-template": "chat_template",
        "enable-prefix-caching": "enable_prefix_caching",
        "no-enable-prefix-caching": "enable_prefix_caching",
        "disable-prefix-caching": "enable_prefix_caching",
        "trust-remote-code": "trust_remote_code",
        "no-trust-remote-code": "trust_remote_code",
        "dtype": "dtype",
        "ssl-certfile": "tls_certfile", "ssl-keyfile": "tls_keyfile",
        "enable-auto-tool-choice": "auto_tool_choice", "no-enable-auto-tool-choice": "auto_tool_choice",
        "disable-auto-tool-choice": "auto_tool_choice",
        "tool-call-parser": "tool_call_parser",
        "enable-reasoning": "enable_reasoning",
        "reasoning-parser": "reasoning_parser",
        "kv-cache-dtype": "kv_cache_dtype",
        "guided-decoding-backend": "structured_output_backend",
        "structured-outputs-config.backend": "structured_output_backend",
        "max-num-batched-tokens": "max_batched_tokens",
        "enable-chunked-prefill": "enable_chunked_prefill", "no-enable-chunked-prefill": "enable_chunked_prefill",
        "disable-chunked-prefill": "enable_chunked_prefill",
        "long-prefill-token-threshold": "long_prefill_threshold",
        "scheduling-policy": "priority_scheduling",
        "speculative-config": "speculative",
        "enable-lora": "lora", "no-enable-lora": "lora", "disable-lora": "lora", "lora-modules": "lora",
        "max-lora-rank": "lora", "max-loras": "lora",
        "api-key": "api_key",
    },
    "sglang": {
        "model-path": "model_path", "model": "model_path",
        "served-model-name": "served_model_name",
        "host": "host", "port": "port",
        "tp-size": "tensor_parallel", "tensor-parallel-size": "tensor_parallel", "tp": "tensor_parallel",
        "pp-size": "pipeline_parallel", "pipeline-parallel-size": "pipeline_parallel",
        "nnodes": "nodes", "node-rank": "nodes", "dist-init-addr": "nodes",
        "context-length": "max_model_len",
        "mem-fraction-static": "gpu_memory_fraction",
        "max-running-requests": "max_concurrency",
        "chat-template": "chat_template",
        "disable-radix-cache": "enable_prefix_caching",
        "enable-metrics": "enable_metrics",
        "trust-remote-code": "trust_remote_code",
        "dtype": "dtype",
        "ssl-certfile": "tls_certfile", "ssl-keyfile": "tls_keyfile",
        "tool-call-parser": "tool_call_parser",
        "reasoning-parser": "reasoning_parser",
        "kv-cache-dtype": "kv_cache_dtype",
        "grammar-backend": "structured_output_backend",
        "max-prefill-tokens": "max_batched_tokens",
        "chunked-prefill-size": "prefill_chunk_tokens",
        "enable-priority-scheduling": "priority_scheduling",
        "speculative-algorithm": "speculative",
        "speculative-draft-model-path": "speculative", "speculative-draft-model": "speculative",
        "speculative-num-steps": "speculative", "speculative-eagle-topk": "speculative",
        "speculative-num-draft-tokens": "speculative",
        "enable-lora": "lora", "lora-paths": "lora", "max-lora-rank": "lora", "max-loras-per-batch": "lora",
        "api-key": "api_key",
        "admin-api-key": "admin_api_key",
    },
}

# Flags that would take the argv out of the spec's hands altogether.
FORBIDDEN_EXTRA = {
    "config": "an engine config file would bypass the serving_* spec and this validation; "
              "put the flags themselves in serving_engine_extra_args",
    "help": "not a serving flag",
}

# Flags whose list values are given by repeating the flag (argparse `append`); every other list
# value is written once, space-separated (argparse nargs '+' / '*').
REPEATED_LIST_FLAGS = {"vllm": {"middleware"}, "sglang": set()}

# Spellings from old docs, field reports and older versions, with the accepted replacement.
# Used as the suggestion when the replacement is accepted by the installed engine; difflib's
# closest match otherwise.
KNOWN_RENAMES = {
    "vllm": {
        "--disable-log-requests": "--enable-log-requests",  # removed; request logging is off by default
        "--scheduler-policy": "--scheduling-policy",
        "--chunked-prefill-enabled": "--enable-chunked-prefill",
    },
    "sglang": {
        "--max-num-sequences": "--max-running-requests",
        "--max-num-seqs": "--max-running-requests",
        "--grammar-json-schema": "--grammar-backend",
        "--tensor-parallel": "--tp-size",
        "--max-model-len": "--context-length",
        "--gpu-memory-utilization": "--mem-fraction-static",
    },
}

VALIDATION_TIMEOUT = 900
RESULT_MARKER = engine_probe.RESULT_MARKER


class EngineArgsError(Exception):
    """Bad input or a flag the engine does not accept; the message says what to do."""

    def __init__(self, msg, **details):
        super(EngineArgsError, self).__init__(msg)
        self.msg = msg
        self.details = details


# ---------------------------------------------------------------------------------------------
# versions and table look-ups
# ---------------------------------------------------------------------------------------------
def parse_version(version):
    """'0.32.0+cpu' -> (0, 32, 0); '0.5.23.post1' -> (0, 5, 23); at least three numbers."""
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)", str(version))
    if not match:
        raise EngineArgsError("engine_version %r is not a version number (like 0.32.0)" % (version,))
    numbers = [int(part) for part in match.group(1).split(".")]
    while len(numbers) < 3:
        numbers.append(0)
    return tuple(numbers)


def base_version(version):
    """The release part of a version string, without local labels or post/dev suffixes."""
    return ".".join(str(n) for n in parse_version(version)[:3])


def _pick(rows, version):
    chosen = None
    for since, rule in rows:
        if version >= since:
            chosen = rule
    return chosen


def entry_for(engine, engine_version):
    return dict(_pick(ENTRY_TABLE[engine], parse_version(engine_version)))


def flag_table(engine, engine_version):
    """{spec key: rule} for one engine version."""
    version = parse_version(engine_version)
    return dict((key, _pick(rows, version)) for key, rows in FLAG_TABLE[engine].items())


def rule_flags(rule):
    """The flag names a rule can render: a flag, a (when true, when false) pair, or a list of argv
    pieces (flag and value) in place of a flag."""
    out = []
    for part in (rule if isinstance(rule, tuple) else (rule,)):
        if isinstance(part, list):
            part = part[0]
        if part:
            out.append(part)
    return out


def first_version_with(engine, key):
    """The first version whose row for `key` renders a flag ('0.5.10'), or None."""
    for since, rule in FLAG_TABLE[engine][key]:
        if rule_flags(rule):
            return ".".join(str(n) for n in since)
    return None


def _dotted(version):
    return ".".join(str(n) for n in version)


def speculative_methods(engine, engine_version):
    """{serving_speculative method: the engine's name for it} for one engine version."""
    return dict(_pick(SPECULATIVE_METHODS[engine], parse_version(engine_version)))


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
            since = [_dotted(v) for v, names in SPECULATIVE_METHODS[engine] if method in names]
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


# ---------------------------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------------------------
def _is_int(value):
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
    if not _is_int(out["port"]) or not 1 <= out["port"] <= 65535:
        bad("port", "must be a port number 1-65535")
    if not _is_int(out["tensor_parallel"]) or out["tensor_parallel"] < 1:
        bad("tensor_parallel", "must be an integer >= 1")
    if not _is_int(out["pipeline_parallel"]) or out["pipeline_parallel"] < 1:
        bad("pipeline_parallel", "must be an integer >= 1")
    _check_nodes(out["nodes"], out["pipeline_parallel"], bad)
    for key in ("max_model_len", "max_concurrency"):
        if out[key] is not None and (not _is_int(out[key]) or out[key] < 1):
            bad(key, "must be an integer >= 1 or null (engine default)")
    fraction = out["gpu_memory_fraction"]
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            bad("gpu_memory_fraction", "must be a number in (0, 1] or null (engine default)")
    for key in ("chat_template", "dtype", "kv_cache_dtype", "tool_call_parser", "reasoning_parser",
                "structured_output_backend"):
        if out[key] is not None and (not isinstance(out[key], str) or not out[key].strip()):
            bad(key, "must be a non-empty string or null")
    for key in ("max_batched_tokens", "prefill_chunk_tokens", "long_prefill_threshold"):
        if out[key] is not None and (not _is_int(out[key]) or out[key] < 1):
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
    if not _is_int(count) or count < 2:
        bad("nodes", "count must be an integer >= 2 (an instance of one host needs no nodes)")
    if count != pipeline_parallel:
        bad("nodes", "count (%r) must equal serving_pipeline_parallel (%d): one pipeline stage per host"
            % (count, pipeline_parallel))
    if not _is_int(rank) or not 0 <= rank < count:
        bad("nodes", "rank must be an integer in [0, %d)" % count)
    if not isinstance(value.get("address"), str) or not value["address"].strip() or " " in value["address"]:
        bad("nodes", "address must be the rank-0 host's address")
    if not _is_int(value.get("port")) or not 1 <= value["port"] <= 65535:
        bad("nodes", "port must be a port number 1-65535")
    for key in ("host_address", "interface"):
        if value.get(key) is not None and (not isinstance(value[key], str) or " " in value[key]):
            bad("nodes", "%s must be a string without spaces or null" % key)
    if value.get("cpus") is not None and (not _is_int(value["cpus"]) or value["cpus"] < 1):
        bad("nodes", "cpus must be an integer >= 1 (the host's logical CPUs) or null")
    if value.get("launcher") is not None and value["launcher"] not in LAUNCHER_KINDS:
        bad("nodes", "launcher must be one of %s or null (native)" % ", ".join(LAUNCHER_KINDS))


def node_launcher(engine, engine_version, kind="native"):
    """How this engine version spans hosts with the launcher `kind`: a dict of its flags, or None."""
    rows = RAY_LAUNCHERS if kind == "ray" else NODE_LAUNCHERS
    return _pick(rows[engine], parse_version(engine_version))


def launcher_kind(engine, engine_version, choice, gpu=True):
    """The launcher an instance of this engine version spans hosts with, for serving_multinode_launcher
    `choice` (auto: the engine's own where the version has one, else a Ray cluster) on GPU hosts (gpu)
    or CPU hosts; raises EngineArgsError naming the variable when there is none of the kind asked for."""
    if choice not in ("auto",) + LAUNCHER_KINDS:
        raise EngineArgsError("serving_multinode_launcher must be auto, native or ray, not %r" % (choice,))
    if engine not in REGISTRY:
        raise EngineArgsError("serving_engine must be one of %s, not %r" % (", ".join(sorted(REGISTRY)), engine))
    usable = [k for k in LAUNCHER_KINDS if node_launcher(engine, engine_version, k) and (gpu or k != "ray")]
    kind = choice if choice != "auto" else (usable or ["native"])[0]
    problem = node_launcher_problem(engine, engine_version, kind)
    if problem:
        raise EngineArgsError(problem)
    return kind


def ray_engine_problem(engine, gpu=True):
    """Why the engine cannot serve on a Ray cluster of these hosts (the cluster itself forms on any
    host), naming serving_multinode_launcher, or None."""
    if gpu:
        return None
    label = REGISTRY[engine]["label"]
    return ("serving_multinode_launcher: ray: %s's CPU platform cannot run on a Ray cluster (it has no Ray device key; "
            "its Ray executor stops at start with 'current platform cpu does not support ray'); use "
            "serving_multinode_launcher: native or auto, which span CPU hosts with %s's own launcher" % (label, label))


def node_launcher_problem(engine, engine_version, kind="native"):
    """Why this engine version cannot serve one instance across hosts with the launcher `kind`,
    naming the way out, or None."""
    if node_launcher(engine, engine_version, kind):
        return None
    label = REGISTRY[engine]["label"]
    if kind == "ray":
        return ("serving_multinode_launcher: ray: %s has no Ray executor; use serving_multinode_launcher: native "
                "(its own launcher across hosts) or auto" % label)
    first = [_dotted(v) for v, rule in NODE_LAUNCHERS[engine] if rule][0]
    return ("serving_multinode_launcher: native: %s %s has no launcher of its own across hosts (it came in %s %s); "
            "use serving_multinode_launcher: ray (or auto), which runs the instance on a Ray cluster, or a stack "
            "profile with %s %s or newer" % (label, engine_version, label, first, label, first))


def _nodes_pieces(engine, engine_version, nodes):
    """The argv pieces and environment that place this host in its instance."""
    kind = nodes.get("launcher") or "native"
    launcher = node_launcher(engine, engine_version, kind)
    if launcher is None:
        raise EngineArgsError(node_launcher_problem(engine, engine_version, kind))
    if kind == "ray":
        if nodes["rank"] > 0:
            raise EngineArgsError("nodes: rank %d of an instance on a Ray cluster runs no engine of its own, only "
                                  "its Ray worker (the ray_cluster role); render the engine for rank 0"
                                  % nodes["rank"])
        pieces = [list(launcher["backend"])]
    else:
        pieces = _native_node_pieces(launcher, nodes)
    env = {}
    if nodes.get("interface"):
        # torch.distributed's CPU groups (gloo) and NCCL bind the interface the hosts share
        env.update({"GLOO_SOCKET_IFNAME": nodes["interface"], "NCCL_SOCKET_IFNAME": nodes["interface"]})
    if nodes.get("host_address") and engine == "vllm":
        # the address the other ranks reach this one at (vLLM guesses it from the default route)
        env["VLLM_HOST_IP"] = nodes["host_address"]
    return pieces, env


def _native_node_pieces(launcher, nodes):
    """--nnodes / --node-rank / the rendezvous address of the engine's own launcher."""
    address = nodes["address"]
    pieces = [[launcher["count"], str(nodes["count"])], [launcher["rank"], str(nodes["rank"])]]
    if "address_port" in launcher:
        host = "[%s]" % address if ":" in address else address
        pieces.append([launcher["address_port"], "%s:%d" % (host, nodes["port"])])
    else:
        pieces.extend([[launcher["address"], address], [launcher["port"], str(nodes["port"])]])
    if nodes["rank"] > 0 and launcher["worker"]:
        pieces.append([launcher["worker"]])
    return pieces


def cpu_thread_bind(cpus, ranks):
    """SGLang's CPU engine's SGLANG_CPU_OMP_THREADS_BIND for `ranks` tensor-parallel ranks on a host of
    `cpus` logical CPUs: an equal, contiguous share each ("0-3|4-7"). Without it SGLang gives each
    rank a NUMA node of its own and refuses more ranks, those of every host of the instance counted,
    than this host has nodes (sglang/srt/utils/numa_utils.py, init_threads_binding)."""
    if ranks > cpus:
        raise EngineArgsError("nodes: SGLang's CPU engine binds each of the host's %d tensor-parallel ranks to CPUs of "
                              "its own and the host has %d: lower serving_tensor_parallel" % (ranks, cpus))
    share = cpus // ranks
    return "|".join("%d-%d" % (i * share, (i + 1) * share - 1) for i in range(ranks))


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
        if value.get(key) is not None and (not _is_int(value[key]) or value[key] < 1):
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
    if not _is_int(origin) or origin < 1:
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
        if value.get(key) is not None and (not _is_int(value[key]) or value[key] < 1):
            bad("lora", "%s must be an integer >= 1" % key)
    if not value.get("max_rank"):
        bad("lora", "max_rank is required (the adapters' largest rank)")


def _flag_key(raw, where):
    if not isinstance(raw, str) or not raw.strip("-").strip():
        raise EngineArgsError("%s: %r is not a flag name" % (where, raw))
    key = raw.strip().lstrip("-")
    if re.search(r"\s|=", key):
        raise EngineArgsError("%s: %r is not a flag name (give the value as the dict value, "
                              "without '=' or spaces in the key)" % (where, raw))
    # Both engines spell flags with dashes; keep anything after a '.' (vLLM's --json-arg.key) as is.
    head, dot, tail = key.partition(".")
    return head.replace("_", "-") + dot + tail


def _render_value(engine, key, value, where):
    """[] (omitted), or the argv pieces for one flag and its value."""
    flag = "--" + key
    if value is None or value is False:
        return []
    if value is True:
        return [flag]
    if isinstance(value, dict):
        return [flag, json.dumps(value, sort_keys=True, separators=(",", ":"))]
    if isinstance(value, (list, tuple)):
        items = [_scalar(v, where, key) for v in value]
        if not items:
            return []
        if key in REPEATED_LIST_FLAGS[engine]:
            out = []
            for item in items:
                out.extend([flag, item])
            return out
        return [flag] + items
    return [flag, _scalar(value, where, key)]


def _scalar(value, where, key):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    raise EngineArgsError("%s: value of %s must be a string, number, boolean, list or dict; got %r"
                          % (where, key, value))


def _owned_by_spec(engine, key):
    # a dotted key (vLLM's --json-arg.key) is the spec's when the key or its flag is
    return SPEC_OWNED[engine].get(key) or SPEC_OWNED[engine].get(key.partition(".")[0])


# ---------------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------------
def render(engine, engine_version, spec, extra_args=None, stack_args=None):
    """Render the argv. Returns a dict with command (without the interpreter: see build()),
    flags, env, api_key_env, sources ({flag: 'spec'|'stack'|'extra'}), warnings, entry."""
    if engine not in ENGINES:
        raise EngineArgsError("serving_engine must be one of %s; got %r" % (", ".join(ENGINES), engine))
    if not engine_version or not isinstance(engine_version, str):
        raise EngineArgsError("engine_version is required (the %s version of the stack profile)" % engine)
    parse_version(engine_version)
    spec = normalize_spec(spec)
    extra_args = extra_args or {}
    stack_args = stack_args or {}
    for name, args in (("serving_engine_extra_args", extra_args), ("stack profile args", stack_args)):
        if not isinstance(args, dict):
            raise EngineArgsError("%s must be a dict of flag name -> value; got %r" % (name, args))
    warnings = []
    entry = entry_for(engine, engine_version)
    table = flag_table(engine, engine_version)

    flags = []
    names = []
    sources = {}

    def add(pieces, source):
        # pieces: flag [value ...] [flag value ...] (one flag name, repeated for append lists)
        if pieces:
            sources[pieces[0]] = source
            names.append(pieces[0])
            flags.extend(pieces)

    prefix = list(entry["prefix"])
    if entry["model"] == "positional":
        prefix.append(spec["model_path"])
    else:
        add([entry["model"], spec["model_path"]], "spec")
    by_spec = {}

    def add_spec(key, pieces):
        # two spec keys may render the same flag (vLLM's step budget is its chunk size): once, if they agree
        if pieces[0] in by_spec:
            other, value = by_spec[pieces[0]]
            if value != pieces[1:]:
                raise EngineArgsError("%s and %s both set %s for %s %s and differ (%s, %s); set one of them" % (
                    SPEC_VARIABLES[other], SPEC_VARIABLES[key], pieces[0], engine, engine_version,
                    " ".join(value), " ".join(pieces[1:])))
            return
        by_spec[pieces[0]] = (key, pieces[1:])
        add(pieces, "spec")

    for key in VALUE_SPEC_KEYS:
        if spec[key] is not None:
            if table[key] is None:
                raise EngineArgsError(unsupported_msg(engine, engine_version, key))
            add_spec(key, [table[key], _scalar(spec[key], "spec", key)])
    for key in BOOL_SPEC_KEYS + OPTIONAL_BOOL_SPEC_KEYS:
        if spec[key] is None:
            continue
        if table[key] is None:
            if spec[key]:
                raise EngineArgsError(unsupported_msg(engine, engine_version, key))
            continue
        when_true, when_false = table[key]
        flag = when_true if spec[key] else when_false
        if flag:
            add_spec(key, list(flag) if isinstance(flag, list) else [flag])
        elif key == "enable_metrics" and not spec[key] and engine == "vllm":
            warnings.append("vLLM always serves /metrics; serving_enable_metrics=false has no vLLM flag "
                            "(keep /metrics behind the gateway)")
    if spec["speculative"] is not None:
        problem = unsupported_msg(engine, engine_version, "speculative", spec["speculative"])
        if problem:
            raise EngineArgsError(problem)
        if spec["speculative"]["method"] == "mtp" and mtp_head(spec["model_path"]) is False:
            raise EngineArgsError(
                "serving_speculative: method mtp drafts with the model's own multi-token-prediction head, and the "
                "model at %s ships none (no mtp_num_hidden_layers or num_nextn_predict_layers in its config.json, "
                "no mtp.* weights): use {method: ngram} (any model), or eagle3 with a draft_model" % spec["model_path"])
        for pieces in _speculative_pieces(engine, engine_version, spec["speculative"]):
            add_spec("speculative", pieces)
    if spec["lora"] is not None:
        for pieces in _lora_pieces(engine, engine_version, spec["lora"]):
            add_spec("lora", pieces)
    # nothing for a single stage: one host's argv stays what it was before pipelines existed
    if spec["pipeline_parallel"] > 1:
        add_spec("pipeline_parallel", [table["pipeline_parallel"], str(spec["pipeline_parallel"])])
    node_env = {}
    if spec["nodes"] is not None:
        node_pieces, node_env = _nodes_pieces(engine, engine_version, spec["nodes"])
        for pieces in node_pieces:
            add_spec("nodes", pieces)
    if spec["long_context"] is not None:
        add_spec("long_context", [table["long_context"],
                                  _long_context_json(engine, engine_version, spec["long_context"], spec["model_path"])])

    # stack args first, extra args may override them (not the spec)
    merged = {}
    for where, args, source in (("stack profile args", stack_args, "stack"),
                                ("serving_engine_extra_args", extra_args, "extra")):
        for raw in sorted(args, key=str):
            key = _flag_key(raw, where)
            owner = _owned_by_spec(engine, key)
            if owner:
                raise EngineArgsError(_override_msg(engine, where, key, owner))
            if key in FORBIDDEN_EXTRA:
                raise EngineArgsError("%s: --%s is not allowed: %s" % (where, key, FORBIDDEN_EXTRA[key]))
            if key in merged and merged[key][1] == "stack":
                warnings.append("serving_engine_extra_args overrides the stack profile's --%s (%r -> %r)"
                                % (key, merged[key][0], args[raw]))
            merged[key] = (args[raw], source, where)
    override_flag = table["long_context"].lstrip("-")
    if spec["long_context"] is not None and override_flag in merged:
        raise EngineArgsError(
            "%s: --%s and serving_long_context both override the model's config; put the rope scaling in "
            "serving_long_context only, or the whole override in --%s" % (merged[override_flag][2], override_flag,
                                                                          override_flag))
    for key in sorted(merged):
        value, source, where = merged[key]
        add(_render_value(engine, key, value, where), source)

    env = {}
    if os.path.isabs(spec["model_path"]):
        # weights and tokenizer are local: never reach the Hugging Face hub at start
        env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    if engine == "vllm":
        env.update({"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"})
    if engine == "sglang" and "device" in merged and str(merged["device"][0]).lower() == "cpu":
        env["SGLANG_USE_CPU_ENGINE"] = "1"
        if spec["nodes"] is not None and spec["nodes"].get("cpus"):
            env["SGLANG_CPU_OMP_THREADS_BIND"] = cpu_thread_bind(spec["nodes"]["cpus"], spec["tensor_parallel"])
    env.update(node_env)

    return {
        "engine": engine,
        "engine_version": engine_version,
        "entry_module": entry["module"],
        "argv_prefix": prefix,
        "flags": flags,
        "flag_names": names,
        "sources": sources,
        "env": env,
        "api_key_env": API_KEY_ENV[engine],
        "admin_key_env": ADMIN_KEY_ENV[engine],
        "warnings": warnings,
        "launcher": launcher_info() if engine == "sglang" else None,
    }


def _speculative_pieces(engine, engine_version, value):
    """argv pieces (lists) of serving_speculative for one engine version."""
    name = speculative_methods(engine, engine_version)[value["method"]]
    tokens = value.get("tokens") or (4 if value["method"] == "ngram" else 3)
    if engine == "vllm":
        config = {"method": name, "num_speculative_tokens": tokens}
        if value["method"] == "ngram":
            config["prompt_lookup_max"] = value.get("lookup_max") or 4
            config["prompt_lookup_min"] = value.get("lookup_min") or 1
        if value.get("draft_model"):
            config["model"] = value["draft_model"]
        return [["--speculative-config", json.dumps(config, sort_keys=True, separators=(",", ":"))]]
    if value["method"] == "ngram":
        if value.get("lookup_max") or value.get("lookup_min"):
            raise EngineArgsError("serving_speculative: lookup_max and lookup_min are vLLM's prompt-lookup bounds; "
                                  "SGLang's n-gram drafter has none: leave them out")
        return [["--speculative-algorithm", name], ["--speculative-num-draft-tokens", str(tokens)]]
    # EAGLE-style drafting, one chain (top-k 1): `tokens` steps propose tokens + 1 draft tokens
    # (SGLang's speculative decoding docs)
    pieces = [["--speculative-algorithm", name]]
    if value.get("draft_model"):
        pieces.append(["--speculative-draft-model-path", value["draft_model"]])
    return pieces + [["--speculative-num-steps", str(tokens)], ["--speculative-eagle-topk", "1"],
                     ["--speculative-num-draft-tokens", str(tokens + 1)]]


def _lora_pieces(engine, engine_version, value):
    """argv pieces (lists) of the LoRA adapters for one engine version: the adapters by name, the
    largest rank and how many adapters one batch may mix (all of them unless max_loras says fewer)."""
    version = parse_version(engine_version)
    modules = ["%s=%s" % (item["name"], item["path"]) for item in value["adapters"]]
    per_batch = min(value.get("max_loras") or len(modules), len(modules))
    if engine == "vllm":
        ranks = _pick(VLLM_LORA_RANKS, version)
        if value["max_rank"] > ranks[-1]:
            raise EngineArgsError("serving_lora_adapters: rank %d is above vLLM %s's largest LoRA rank %d"
                                  % (value["max_rank"], engine_version, ranks[-1]))
        rank = min(r for r in ranks if r >= value["max_rank"])
        return [["--enable-lora"], ["--lora-modules"] + modules, ["--max-lora-rank", str(rank)],
                ["--max-loras", str(per_batch)]]
    pieces = []
    if version >= SGLANG_LORA_FLAGS_SINCE:
        pieces.append(["--enable-lora"])
    pieces.append(["--lora-paths"] + modules)
    if version >= SGLANG_LORA_FLAGS_SINCE:
        pieces.append(["--max-lora-rank", str(value["max_rank"])])
    return pieces + [["--max-loras-per-batch", str(per_batch + 1)]]


MTP_CONFIG_KEYS = ("mtp_num_hidden_layers", "num_nextn_predict_layers")


def mtp_head(model_path):
    """Whether the model folder ships a multi-token-prediction head: its config says so (Qwen3.5/3.6:
    mtp_num_hidden_layers, under text_config for the multimodal ones; DeepSeek-style
    num_nextn_predict_layers), or its weights hold mtp.* tensors (Qwen3-Next, whose config names no
    MTP layers). None when there is no config.json to read (a model not fetched yet)."""
    config = _model_config(model_path)
    if config is None:
        return None
    for cfg in (config, config.get("text_config") or {}):
        if any(isinstance(cfg.get(k), int) and cfg.get(k) > 0 for k in MTP_CONFIG_KEYS):
            return True
    names = _weight_names(model_path)
    if names is None:
        return None
    return any(n.startswith("mtp.") or ".mtp." in n for n in names)


def _weight_names(model_path):
    """Tensor names of a model folder from its safetensors index, or from the header of its single
    model.safetensors; None when it has neither."""
    index = os.path.join(model_path, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index) as f:
            return list(json.load(f).get("weight_map", {}))
    single = os.path.join(model_path, "model.safetensors")
    if os.path.isfile(single):
        import struct
        with open(single, "rb") as f:
            size = struct.unpack("<Q", f.read(8))[0]
            return [k for k in json.loads(f.read(size).decode("utf-8")) if k != "__metadata__"]
    return None


def _model_config(model_path):
    path = os.path.join(model_path, "config.json")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def _long_context_json(engine, engine_version, value, model_path):
    """The config override of serving_long_context (YaRN) as the engine version reads it."""
    fmt = _pick(LONG_CONTEXT_FORMATS[engine], parse_version(engine_version))
    factor, origin = value["factor"], value["original_max_position"]
    yarn = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": origin}
    config = _model_config(model_path)
    if config is not None:
        if isinstance(config.get("text_config"), dict):
            raise EngineArgsError(
                "serving_long_context: the model at %s keeps its language model under text_config, which this "
                "override does not reach; give the whole override in serving_engine_extra_args (%s)"
                % (model_path, FLAG_TABLE[engine]["long_context"][0][1]))
        current = config.get("rope_scaling") or config.get("rope_parameters") or {}
        if (current.get("rope_type") or current.get("type") or "default") != "default":
            raise EngineArgsError(
                "serving_long_context: the model's config.json at %s already scales its rope (%s); leave "
                "serving_long_context unset" % (model_path, json.dumps(current, sort_keys=True)))
    if fmt == "rope_scaling":
        override = {"rope_scaling": yarn}
    else:
        if config is None:
            raise EngineArgsError(
                "serving_long_context: %s %s reads the override as rope_parameters, which must carry the model's "
                "rope_theta: no config.json at %s to read it from" % (engine, engine_version, model_path))
        theta = config.get("rope_theta") or (config.get("rope_parameters") or {}).get("rope_theta")
        if theta is not None:
            yarn["rope_theta"] = theta
        override = {"rope_parameters": yarn, "max_position_embeddings": int(origin * factor)}
    return json.dumps(override, sort_keys=True, separators=(",", ":"))


def _override_msg(engine, where, key, owner):
    variable = SPEC_VARIABLES[owner]
    if owner in ("api_key", "admin_api_key"):
        return ("%s: --%s is not allowed: the API key never goes on the command line; set %s "
                "(the engine reads it from %s)" % (where, key, variable,
                                                   (API_KEY_ENV if owner == "api_key" else ADMIN_KEY_ENV)[engine]))
    return ("%s: --%s sets what the serving spec owns (%s); set %s instead of passing --%s"
            % (where, key, owner, variable, key))


def engine_argv(rendered):
    """What the engine's parser sees (the argv after `python -m <entry module>`, minus prefix words)."""
    prefix = list(rendered["argv_prefix"])
    if prefix and prefix[0] == "serve":
        prefix = prefix[1:]
    return prefix + list(rendered["flags"])


# ---------------------------------------------------------------------------------------------
# --help text
# ---------------------------------------------------------------------------------------------
def help_options(text):
    """{option string: first option string of its line} from argparse --help output.

    Only option header lines count (two to six spaces, then '-'); flags mentioned inside help
    text or the usage block do not. Aliases on one line share a group (e.g. --tp-size and
    --tensor-parallel-size).
    """
    options = {}
    for line in text.splitlines():
        match = re.match(r"^ {1,6}(-[^\s,].*)$", line)
        if not match:
            continue
        invocation = re.split(r"\s{2,}", match.group(1).strip())[0]
        group = []
        for part in invocation.split(", "):
            token = part.split(" ")[0]
            if re.match(r"^--?[A-Za-z0-9][A-Za-z0-9_.\-]*$", token):
                group.append(token)
        for token in group:
            options.setdefault(token, group[0])
    return options


# ---------------------------------------------------------------------------------------------
# validation against the installed engine
# ---------------------------------------------------------------------------------------------
def source_of(module):
    """The source text of a module_utils module, also when it was imported from a zip (AnsiballZ)."""
    return inspect.getsource(module)


# Runs in the venv's interpreter (engine_probe.py). Reads {"engine", "argv", "launcher"} on stdin;
# prints one line RESULT_MARKER + JSON. Engine imports may print to stdout/stderr: both are captured.
VALIDATE_SCRIPT = source_of(engine_probe)


def default_runner(argv, data=None, env=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=full_env, universal_newlines=True)
    try:
        out, err = proc.communicate(data, timeout=VALIDATION_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return 124, out, (err or "") + "\ntimed out after %d s" % VALIDATION_TIMEOUT
    return proc.returncode, out, err


def _parse_marker(stdout):
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(RESULT_MARKER):
            return json.loads(line[len(RESULT_MARKER):])
    return None


def _pick_installed(engine, found):
    """(distribution, version) of the engine in the venv, or (None, None)."""
    if not found:
        return None, None
    by_name = dict((item["name"], item["version"]) for item in found)
    for name in DISTRIBUTIONS[engine]:
        if name in by_name:
            return name, by_name[name]
    return None, None


def help_argv(python, rendered, variant):
    engine = rendered["engine"]
    entry = entry_for(engine, rendered["engine_version"])
    module = entry.get("engine_module", entry["module"])
    argv = [python, "-m", module] + list(entry["prefix"])
    return argv + (["--help=all"] if variant == "all" else ["--help"])


def _close(engine, flag, accepted):
    rename = KNOWN_RENAMES.get(engine, {}).get(flag)
    if rename and rename in accepted:
        return rename
    matches = difflib.get_close_matches(flag, sorted(accepted), n=1, cutoff=0.5)
    return matches[0] if matches else None


def validate(rendered, python, runner=None):
    """Check rendered flags against the engine installed for `python`. Returns a dict with
    validated, validation_method, installed_distribution, installed_version, parser_source,
    launcher_present; raises EngineArgsError naming the flag, engine, version and closest flag."""
    runner = runner or default_runner
    engine = rendered["engine"]
    request = json.dumps({"engine": engine, "argv": engine_argv(rendered),
                          "distributions": DISTRIBUTIONS[engine],
                          "launcher": rendered["entry_module"] if rendered.get("launcher") else None})
    rc, out, err = runner([python, "-c", VALIDATE_SCRIPT], request, rendered["env"])
    result = _parse_marker(out)
    if result is None:
        raise EngineArgsError(
            "could not run the validation script with %s (rc=%s): %s. Is python the interpreter of "
            "the %s venv?" % (python, rc, _tail(err or out), engine), rc=rc, stderr=_tail(err, 4000))
    dist, installed_version = _pick_installed(engine, result.get("installed"))
    if installed_version is None:
        raise EngineArgsError(
            "%s is not installed in the venv of %s (no distribution %s found); build the venv "
            "(python_env role) before rendering the engine command"
            % (engine, python, " or ".join(DISTRIBUTIONS[engine])))
    label = "%s %s" % (engine, installed_version)
    if dist != engine:
        label += " (distribution %s)" % dist
    if base_version(installed_version) != base_version(rendered["engine_version"]):
        raise EngineArgsError(
            "the venv of %s has %s (distribution %s) but the stack profile asks for %s %s; the flags are "
            "rendered per version: rebuild the venv or fix the stack profile's engine version"
            % (python, label, dist, engine, rendered["engine_version"]),
            installed_version=installed_version)
    info = {
        "installed_distribution": dist,
        "installed_version": installed_version,
        "parser_source": result.get("parser_source"),
        "launcher_present": result.get("launcher_present"),
    }

    if result.get("options"):
        method = "parser"
        accepted = dict((opt, meta["dest"]) for opt, meta in result["options"].items())
        how = "its argument parser"
    else:
        method = "help"
        accepted, help_output = None, ""
        for variant in (("all", "plain") if engine == "vllm" else ("plain",)):
            hrc, hout, herr = runner(help_argv(python, rendered, variant), None, rendered["env"])
            help_output = hout or herr or "rc=%s" % hrc
            options = help_options(hout or "")
            if len(options) > 10:
                accepted = options
                break
        if accepted is None:
            raise EngineArgsError(
                "cannot check the flags against %s: its argument parser could not be built (%s) and "
                "`--help` listed no flags (%s)" % (label, result.get("build_error"), _tail(help_output)),
                build_error=result.get("build_error"))
        how = "its --help; the parser could not be built: %s" % result.get("build_error")

    # 1. every flag name exactly (argparse would take unique prefixes: --max-num-seq)
    for flag in rendered["flag_names"]:
        name = flag.partition(".")[0]
        if name not in accepted:
            raise EngineArgsError(_unknown_msg(rendered, flag, name, label, how, accepted),
                                  flag=flag, closest=_close(engine, name, accepted))
    # 2. aliases of spec-owned flags, as the installed engine defines them (same argparse dest,
    #    or the same --help line), whether or not the spec sets that flag this time
    spec_groups = {}
    for key, spec_flag in _spec_flags(engine, rendered["engine_version"]):
        if spec_flag in accepted:
            spec_groups.setdefault(accepted[spec_flag], (spec_flag, key))
    for flag in rendered["flag_names"]:
        source = rendered["sources"].get(flag)
        group = accepted.get(flag.partition(".")[0])
        if source in ("extra", "stack") and group in spec_groups:
            spec_flag, key = spec_groups[group]
            where = "serving_engine_extra_args" if source == "extra" else "stack profile args"
            raise EngineArgsError(
                "%s: %s is an alias of %s in %s, which the serving spec owns; set %s instead"
                % (where, flag, spec_flag, label, SPEC_VARIABLES[key]), flag=flag)
    # 3. values, by the parser itself
    if method == "parser" and result.get("parse_error"):
        message = result["parse_error"]
        flag = _flag_in(message, rendered["flag_names"])
        origin = _origin(rendered, flag)
        raise EngineArgsError("%s's argument parser rejected the command line%s: %s"
                              % (label, (" at %s (%s)" % (flag, origin)) if flag else "", message),
                              flag=flag)
    info.update({"validated": True, "validation_method": method})
    return info


def _spec_flags(engine, engine_version):
    """(spec key, flag) for every flag the table can render for this version, model included."""
    out = []
    entry = entry_for(engine, engine_version)
    if entry["model"] != "positional":
        out.append(("model_path", entry["model"]))
    for key, rule in sorted(flag_table(engine, engine_version).items()):
        for flag in rule_flags(rule):
            out.append((key, flag))
    return out


def _spec_key_of(engine, rendered, flag):
    for key, spec_flag in _spec_flags(engine, rendered["engine_version"]):
        if spec_flag == flag:
            return key
    return None


def _origin(rendered, flag):
    source = rendered["sources"].get(flag)
    if source == "extra":
        return "from serving_engine_extra_args"
    if source == "stack":
        return "from the stack profile's engine args"
    if source == "spec":
        key = _spec_key_of(rendered["engine"], rendered, flag)
        return "rendered from %s" % SPEC_VARIABLES.get(key, "the serving spec")
    return "from the serving spec"


def _flag_in(message, flags):
    for flag in sorted(flags, key=len, reverse=True):
        if re.search(r"(^|[\s/'\"])%s($|[\s:/'\"=,])" % re.escape(flag), message):
            return flag
    return None


def _unknown_msg(rendered, flag, name, label, how, accepted):
    engine = rendered["engine"]
    closest = _close(engine, name, accepted)
    source = rendered["sources"].get(flag)
    suggestion = ("; closest accepted flag: %s" % closest) if closest else "; no similar flag is accepted"
    owner = _spec_key_of(engine, rendered, closest) if closest else None
    if owner and source != "spec":
        suggestion += ", which the serving spec owns: set %s instead" % SPEC_VARIABLES[owner]
    if source == "extra":
        fix = "fix or remove it in serving_engine_extra_args"
    elif source == "stack":
        fix = "fix the stack profile's engines.%s.args (serving_stacks_file)" % engine
    else:
        key = _spec_key_of(engine, rendered, flag)
        fix = ("the llmops.serving translation table renders it from %s for this version: report it, "
               "or pin the engine version the table knows" % SPEC_VARIABLES.get(key, "the serving spec"))
    return ("%s is not accepted by the installed %s (checked with %s)%s. %s."
            % (flag, label, how, suggestion, fix[0].upper() + fix[1:]))


def _tail(text, size=600):
    text = (text or "").strip()
    return text[-size:] if text else "no output"


# ---------------------------------------------------------------------------------------------
# the module's whole job
# ---------------------------------------------------------------------------------------------
def build(engine, engine_version, spec, extra_args=None, stack_args=None, validate_flags=True,
          python=None, runner=None):
    """render() + validate(); the dict the engine_args module returns (without `changed`)."""
    rendered = render(engine, engine_version, spec, extra_args=extra_args, stack_args=stack_args)
    interpreter = python or "python3"
    command = [interpreter, "-m", rendered["entry_module"]] + rendered["argv_prefix"] + rendered["flags"]
    result = {
        "command": command,
        "flags": rendered["flags"],
        "env": rendered["env"],
        "api_key_env": rendered["api_key_env"],
        "admin_key_env": rendered["admin_key_env"],
        "entry_module": rendered["entry_module"],
        "flag_sources": rendered["sources"],
        "warnings": rendered["warnings"],
        "launcher": rendered["launcher"],
        "validated": False,
        "validation_method": None,
        "installed_version": None,
    }
    if validate_flags:
        if not python:
            raise EngineArgsError("python (the venv's interpreter) is required when validate is true")
        result.update(validate(rendered, python, runner=runner))
        if rendered["launcher"] and result.get("launcher_present") is False:
            result["warnings"].append(
                "the launcher module %s is not importable in the venv yet: install launcher.content as "
                "%s in the venv's site-packages before starting the unit"
                % (rendered["entry_module"], rendered["launcher"]["filename"]))
        result["msg"] = "%d flags for %s %s, all accepted by the installed engine (%s)" % (
            len(rendered["flag_names"]), engine, result["installed_version"], result["validation_method"])
    else:
        result["msg"] = "%d flags rendered for %s %s (not validated)" % (
            len(rendered["flag_names"]), engine, engine_version)
    return result


# ---------------------------------------------------------------------------------------------
# SGLang API key launcher
# ---------------------------------------------------------------------------------------------
# SGLang 0.5.23 reads its API key only from --api-key (ServerArgs.api_key; no environment
# variable), and logs the resolved server args, api_key included, at start. This launcher,
# installed into the SGLang venv as llmops_sglang_launch.py, takes the key from the environment
# (EnvironmentFile / credential, never argv), removes it from the environment children inherit,
# hands it to sglang.launch_server in-process (so /proc/<pid>/cmdline never shows it), and masks
# the key in everything the process writes to stdout/stderr (the journal).
# The launcher's source is sglang_launch.py.
LAUNCHER_MODULE = "llmops_sglang_launch"
LAUNCHER_SOURCE = source_of(sglang_launch)


def launcher_info():
    return {
        "module": LAUNCHER_MODULE,
        "filename": LAUNCHER_MODULE + ".py",
        "install_to": "the venv's site-packages (python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')",
        "key_env": API_KEY_ENV["sglang"],
        "key_file_env": API_KEY_ENV["sglang"] + "_FILE",
        "content": LAUNCHER_SOURCE,
    }
