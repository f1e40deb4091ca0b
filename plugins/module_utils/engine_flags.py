# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.serving
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-engine-version flag tables of the translation point, and their look-ups.

Which flag each spec key becomes in each engine version (FLAG_TABLE), how an instance spans hosts
(NODE_LAUNCHERS, RAY_LAUNCHERS), the speculative methods, the YaRN override formats, the LoRA
flags, the flags the spec owns in every spelling, and the renames seen in the field. Every row of
a version a stack profile pins is checked against that version's recorded --help
(tests/fixtures/engines). Imports only the engine registry: engine_spec, engine_validate and
engine_args import this file, never the other way round.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.llmops.serving.plugins.module_utils import engines
from ansible_collections.llmops.serving.plugins.module_utils.engines import REGISTRY

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
        # Forced tool calls (tool_choice "required" or named) whose arguments are held to the tool's
        # schema. Up to 0.30 a forced call is decoded under that JSON schema whatever the tool says.
        # From 0.31 (pull request 56268, --tool-strict-level) a forced call is decoded in the
        # model's own <tool_call> format, and its arguments are free JSON unless the request marks
        # the tool strict: measured on 0.32 (cpu), a named call to a tool of one required string
        # came back with arguments "false". The level "parameter" treats every tool as strict.
        "tool_arguments_strict": [((0, 0, 0), (None, None)),
                                  ((0, 31, 0), (["--tool-strict-level", "parameter"], None))],
        # 0.8 needs --enable-reasoning beside the parser; 0.19.1's --help has no such flag (the
        # parser alone turns it on)
        "enable_reasoning": [((0, 0, 0), ("--enable-reasoning", None)), ((0, 19, 1), (None, None))],
        "reasoning_parser": [((0, 0, 0), "--reasoning-parser")],
        "kv_cache_dtype": [((0, 0, 0), "--kv-cache-dtype")],
        # tokens per KV-cache block (the cache's unit of allocation and of prefix-cache hits)
        "block_size": [((0, 0, 0), "--block-size")],
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
        # no flag: the strictness of SGLang's tool calls is an environment variable (ENV_TABLE)
        "tool_arguments_strict": [((0, 0, 0), (None, None))],
        "enable_reasoning": [((0, 0, 0), (None, None))],
        "reasoning_parser": [((0, 0, 0), "--reasoning-parser")],
        "kv_cache_dtype": [((0, 0, 0), "--kv-cache-dtype")],
        # SGLang's name for the tokens of one KV-cache page (its default, 1, is a token per page)
        "block_size": [((0, 0, 0), "--page-size")],
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

# Spec keys an engine version reads from its environment rather than its argv, in the FLAG_TABLE's
# row format with a {variable: value} dict for a flag. SGLang 0.5.23 decodes a forced tool call in
# the model's own format with free arguments unless the tool is strict (function_call_parser.py
# get_structure_constraint); SGLANG_TOOL_STRICT_LEVEL=2 (environ.py ToolStrictLevel.PARAMETER)
# holds every tool's arguments to its schema. Checked only in 0.5.23's source: earlier versions
# render nothing for it.
ENV_TABLE = {
    "vllm": {},
    "sglang": {
        "tool_arguments_strict": [((0, 0, 0), (None, None)),
                                  ((0, 5, 23), ({"SGLANG_TOOL_STRICT_LEVEL": "2"}, None))],
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

VLLM_LORA_RANKS = [((0, 0, 0), (8, 16, 32, 64, 128, 256, 320, 512)),
                   ((0, 19, 1), (1, 8, 16, 32, 64, 128, 256, 320, 512))]

SGLANG_LORA_FLAGS_SINCE = (0, 5, 10)

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
        "tool-strict-level": "tool_arguments_strict",
        "enable-reasoning": "enable_reasoning",
        "reasoning-parser": "reasoning_parser",
        "kv-cache-dtype": "kv_cache_dtype",
        "block-size": "block_size",
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
        "page-size": "block_size",
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


class EngineArgsError(Exception):
    """Bad input or a flag the engine does not accept; the message says what to do."""

    def __init__(self, msg, **details):
        super(EngineArgsError, self).__init__(msg)
        self.msg = msg
        self.details = details


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


def version_row(rows, version):
    chosen = None
    for since, rule in rows:
        if version >= since:
            chosen = rule
    return chosen


def entry_for(engine, engine_version):
    return dict(version_row(ENTRY_TABLE[engine], parse_version(engine_version)))


def _rules_at(table, engine, engine_version):
    version = parse_version(engine_version)
    return dict((key, version_row(rows, version)) for key, rows in table[engine].items())


def flag_table(engine, engine_version):
    """{spec key: rule} for one engine version."""
    return _rules_at(FLAG_TABLE, engine, engine_version)


def env_table(engine, engine_version):
    """{spec key: (environment when true, environment when false)} for one engine version."""
    return _rules_at(ENV_TABLE, engine, engine_version)


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


def dotted(version):
    return ".".join(str(n) for n in version)


def speculative_methods(engine, engine_version):
    """{serving_speculative method: the engine's name for it} for one engine version."""
    return dict(version_row(SPECULATIVE_METHODS[engine], parse_version(engine_version)))


def node_launcher(engine, engine_version, kind="native"):
    """How this engine version spans hosts with the launcher `kind`: a dict of its flags, or None."""
    rows = RAY_LAUNCHERS if kind == "ray" else NODE_LAUNCHERS
    return version_row(rows[engine], parse_version(engine_version))


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
    first = [dotted(v) for v, rule in NODE_LAUNCHERS[engine] if rule][0]
    return ("serving_multinode_launcher: native: %s %s has no launcher of its own across hosts (it came in %s %s); "
            "use serving_multinode_launcher: ray (or auto), which runs the instance on a Ray cluster, or a stack "
            "profile with %s %s or newer" % (label, engine_version, label, first, label, first))
