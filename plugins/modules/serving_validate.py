#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: serving_validate
short_description: Check a deployed engine host against its plan, its GPUs' health and its own baseline
description:
  - Reads the memory figures the engine logged at its last start (model weights, available KV cache
    memory, KV cache tokens; vLLM and SGLang wordings) from the unit's journal (that start only) or
    from a log file, and compares them with what they should be, with a tolerance. The memory
    fraction the engine logged it runs with (or its version's default) must be the plan's, as another
    fraction makes other KV figures, and fails the memory check.
  - On a GPU stack the expected figures are the plan of M(llmops.serving.serving_plan). On a CPU stack
    they are the stack's own caps (vLLM's C(VLLM_CPU_KVCACHE_SPACE), SGLang's C(--max-total-tokens)).
  - With I(gpu), reads GPU health from C(nvidia-smi -q -x) (NVML's figures). It reports
    uncorrectable ECC errors, retired pages, pending or failed row remapping, hardware or thermal
    clock slowdown and a PCIe link narrower than its maximum, and reads XID events from the kernel
    log.
  - With I(benchmark_result), compares a short load generator run with the host's stored baseline
    for the same configuration (I(baseline_context)). A new engine version of the same engine,
    model, GPUs and load is compared with the baseline the version before it recorded, and replaces
    it only when it is no regression. Where none is stored (or the configuration otherwise changed),
    the run becomes the baseline. That file is the module's only write. An engine given by its log
    file (no unit of the collection's describes it) adds the digest of the arguments it logged at
    its start to I(baseline_context), so that an engine with other flags is not held to another's
    baseline.
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
options:
  engine:
    description: The engine whose log is read (its wording).
    type: str
    required: true
    choices: [sglang, vllm]
  unit:
    description:
      - The engine's systemd unit; its journal since the unit's last start is read.
      - One of I(unit) and I(log_file) is needed to check memory; neither skips that check with a reason.
    type: str
  log_file:
    description:
      - The engine's log file, for an engine that is not a systemd unit. The newest occurrence of each
        figure is used, so a file that holds several starts is read for the last one.
    type: path
  plan:
    description: The plan (M(llmops.serving.serving_plan)'s C(plan)); empty on a CPU stack.
    type: dict
    default: {}
  kv_space_gib:
    description: vLLM on the CPU, the KV cache space it was given (C(VLLM_CPU_KVCACHE_SPACE)).
    type: float
  kv_bytes_per_token:
    description: KV cache bytes per token of the served model, for I(kv_space_gib); worked out from I(model) when not given.
    type: int
  model:
    description: The served model's facts (M(llmops.serving.model_facts)'s C(model)), for the KV bytes per token.
    type: dict
    default: {}
  tensor_parallel:
    description: Tensor parallel size (KV heads per rank).
    type: int
    default: 1
  pipeline_parallel:
    description: Pipeline stages of the instance (C(serving_pipeline_parallel)); a stage keeps the KV cache of its own layers.
    type: int
    default: 1
  kv_cache_dtype:
    description: The KV cache dtype the engine was given (C(auto) is the model's).
    type: str
    default: auto
  max_total_tokens:
    description: SGLang's C(--max-total-tokens) cap, when the engine was given one and no plan applies.
    type: int
  block_size:
    description: The engine's KV cache block size in tokens (vLLM).
    type: int
    default: 16
  tolerance_pct:
    description: How far, in percent, a logged figure may be from the expected one.
    type: float
    default: 5.0
  gpu:
    description: Check GPU health (C(nvidia-smi -q -x)) and the kernel log's XID events.
    type: bool
    default: false
  nvidia_smi:
    description: The nvidia-smi command.
    type: str
    default: nvidia-smi
  command_timeout:
    description:
      - Seconds each command the checks run (C(nvidia-smi), C(journalctl), C(dmesg), C(systemctl)) may take
        before it is stopped and the check fails saying so; C(0) waits for ever. A GPU that fell off the bus
        hangs C(nvidia-smi).
    type: int
    default: 60
  kernel_log_file:
    description: Read the kernel log from this file instead of C(journalctl -k -b) (or C(dmesg) without journald).
    type: path
  benchmark_result:
    description:
      - A result file of C(llmops_loadgen.py run). Its mixed workload is compared; of a run of
        several samples (C(--samples)), each figure's best sample is compared and recorded.
    type: path
  baseline_path:
    description: Where the host's baseline is kept (one file; JSON).
    type: path
    default: /var/lib/llmops/validate/baseline.json
  baseline_context:
    description:
      - What the baseline is valid for (engine, version, model, flags, GPUs, the load). A baseline of
        another context is not compared with; the run replaces it, and the result says so.
    type: dict
    default: {}
  record_baseline:
    description:
      - C(missing) records the run when no baseline of this context exists; C(always) replaces it
        (after a deliberate change); C(never) only compares.
    type: str
    default: missing
    choices: [missing, always, never]
  regression_pct:
    description:
      - How much worse than the baseline, in percent, a benchmark figure may be. Worse is the same
        for every figure, how much more time the run took, 25 meaning a quarter more. For a latency
        that is its increase; for throughput, the baseline's rate over the run's, less one.
    type: float
    default: 25.0
  regression_floor_ms:
    description:
      - A latency worse than the baseline's by less than this many milliseconds is never a
        regression, whatever its percentage (noise on a millisecond-scale figure).
    type: float
    default: 0.0
  regression_floor_tokens_per_s:
    description:
      - An output throughput lower than the baseline's by less than this many tokens per second is
        never a regression, whatever its percentage (noise on a small model's figure).
    type: float
    default: 0.0
  fail_on:
    description:
      - Which findings fail the task (the others are reported only). The failing ones are also
        returned as C(failures), so that a play can print the summary before it stops.
    type: list
    elements: str
    default: [memory, gpu, benchmark]
    choices: [memory, gpu, benchmark]
notes:
  - Check mode reads, compares and reports (C(problems)), and reports the baseline it would record
    without writing it. It never fails on a finding, since the spec it compares with may not be applied yet.
  - Start-up figures that the log no longer holds (journald rotated a long-running engine's start
    away) skip the memory check with a notice; a figure that is there and wrong fails.
seealso:
  - module: llmops.serving.serving_plan
  - module: llmops.serving.engine_ready
"""

EXAMPLES = r"""
- name: Check the engine's logged memory against the plan and the GPUs' health
  llmops.serving.serving_validate:
    engine: vllm
    unit: llmops-engine.service
    plan: "{{ __plan.plan }}"
    gpu: true

- name: The same for an engine that writes a log file (no systemd), with a benchmark
  llmops.serving.serving_validate:
    engine: vllm
    log_file: /var/log/vllm.log
    plan: "{{ __plan.plan }}"
    gpu: true
    benchmark_result: /var/lib/llmops-bench/validate.json
    baseline_context: {engine: vllm, version: 0.26.0, flags: "{{ __flags }}"}
"""

RETURN = r"""
memory:
  description:
    - The logged figures, what they were expected to be and each comparison; C(skipped) says why not.
    - C(memory_fraction) is the fraction the engine runs with (its logged arguments, or its version's
      default), when the log has its arguments.
  returned: always
  type: dict
  sample:
    log_source: journal of llmops-engine.service
    logged: {weights_gib: 61.04, available_kv_gib: 62.95, kv_tokens: 257840}
    expected_from: the plan (first principles (vLLM budget))
    tolerance_pct: 5.0
    checks:
      - {figure: kv_tokens, logged: 257840, expected: 257824, deviation_pct: 0.006, ok: true}
    memory_fraction: 0.9
gpu:
  description: Per-GPU health and the kernel log's XID findings; C(skipped) says why not.
  returned: always
  type: dict
  sample:
    gpus:
      - {index: 0, name: NVIDIA H200, bus_id: "00000000:00:06.0", problems: [], notices: [], figures: {}}
    xid_problems: []
    xid_notices: []
benchmark:
  description:
    - The run's figures, the baseline's and each comparison (C(checks)); C(recorded) when the run became the baseline.
    - Of a run of several samples, C(figures) holds each figure's best sample, C(samples) their number.
    - C(skipped) says why there was no comparison; C(baseline_version) names the version before an
      upgrade whose baseline the run was held to.
  returned: always
  type: dict
  sample:
    figures: {output_tokens_per_s: 1314.2, ttft_p50_s: 0.21, samples: 3, requests: 48, errors: 0}
    checks:
      - {figure: output_tokens_per_s, value: 1290.1, baseline: 1314.2, change_pct: -1.8, worse_pct: 1.9, ok: true}
notices:
  description: What is worth knowing but not wrong (correctable ECC errors, idle PCIe generation, application XIDs).
  returned: always
  type: list
  elements: str
failures:
  description: The problems of the kinds in I(fail_on) (none in check mode); the task fails when there is one.
  returned: always
  type: list
  elements: str
problems:
  description: What is wrong, one line each (also the failure message for the kinds in I(fail_on)).
  returned: always
  type: list
  elements: str
summary:
  description: The readable per-host summary.
  returned: always
  type: list
  elements: str
"""

import hashlib
import json
import os
import re
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.serving.plugins.module_utils import plan as p
from ansible_collections.llmops.serving.plugins.module_utils.engines import ENGINES
from ansible_collections.llmops.serving.plugins.module_utils import validation as v


def read_log(module):
    """(text, source words) of the engine's last start, or (None, why not)."""
    params = module.params
    if params["log_file"]:
        try:
            with open(params["log_file"], "r", errors="replace") as handle:
                return handle.read(), "log file %s" % params["log_file"]
        except (IOError, OSError) as exc:
            return None, "cannot read %s: %s" % (params["log_file"], exc)
    unit = params["unit"]
    if not unit:
        return None, "neither a unit nor a log file was given"
    systemctl, journalctl = module.get_bin_path("systemctl"), module.get_bin_path("journalctl")
    if not systemctl or not journalctl:
        return None, "no systemd here: give the engine's log file (validate_engine_log_file)"
    rc, out, err = run_bounded(module, [systemctl, "show", "--property=InvocationID", "--value", unit])
    invocation = out.strip()
    if rc != 0 or not invocation:
        return None, "%s has not run since boot (no invocation): %s" % (unit, err.strip() or "not started")
    rc, out, err = run_bounded(module, [journalctl, "--no-pager", "-o", "cat", "_SYSTEMD_INVOCATION_ID=" + invocation])
    if rc != 0:
        return None, "journalctl failed: %s" % err.strip()
    return out, "journal of %s since its last start" % unit


def run_bounded(module, argv):
    """module.run_command under timeout (module_utils.validation.bounded): (rc, out, err), err naming a
    command that did not answer in command_timeout seconds."""
    seconds = module.params["command_timeout"]
    rc, out, err = module.run_command(v.bounded(argv, seconds, module.get_bin_path("timeout")))
    return rc, out, v.timed_out_msg(argv, rc, seconds) or err


def check_memory(module, text, source):
    params = module.params
    if text is None:
        # a log file the user named and that cannot be read is a wrong path, not a missing figure
        problems = ["memory: %s (validate_engine_log_file: give the engine's log file, readable here)" % source] \
            if params["log_file"] else []
        return {"skipped": source}, problems, []
    logged = v.parse_engine_log(params["engine"], text)
    expected, expected_from = v.expected_figures(
        params["engine"], params["plan"], params["kv_space_gib"], params["max_total_tokens"],
        params["kv_bytes_per_token"] or kv_bytes_per_token(params), params["block_size"])
    result = {"log_source": source, "logged": logged, "tolerance_pct": params["tolerance_pct"],
              "expected_from": expected_from, "expected": dict((k, round(x, 2)) for k, x in expected.items())}
    if not expected:
        result["skipped"] = "no plan and no CPU cap to compare with (logged: %s)" % (
            json.dumps(logged, sort_keys=True) if logged else "nothing")
        return result, [], []
    result["checks"] = v.compare_memory(params["engine"], logged, expected, params["tolerance_pct"],
                                        params["block_size"])
    problems, notices = [], []
    if all(check["logged"] is None for check in result["checks"]):
        # journald may have rotated a long-running engine's start away: nothing to compare is not
        # a wrong figure
        result["skipped"] = ("no start-up memory figures in %s: rotated away, or not logged at INFO level"
                             % source)
        return result, [], [result["skipped"]]
    for check in result["checks"]:
        if check["ok"]:
            continue
        if check["logged"] is None:
            notices.append("memory: %s has no %s figure (expected %s)" % (source, check["figure"], check["expected"]))
        else:
            problems.append("memory: logged %s %s is %+.2f %% from the expected %s (%s; tolerance %s %%)"
                            % (check["figure"], check["logged"], check["deviation_pct"], check["expected"],
                               expected_from, params["tolerance_pct"]))
    return result, problems, notices


def kv_bytes_per_token(params):
    """The served model's KV bytes per token and rank, or None when its shape is unknown."""
    model = params["model"]
    try:
        dtype_bytes = p.resolve_kv_dtype_bytes(params["kv_cache_dtype"], model.get("dtype_bytes"))
        # rank 0 logs its own stage's cache: its share of the layers
        return p.kv_bytes_per_token(p.kv_layers(model) // params["pipeline_parallel"], model["num_key_value_heads"],
                                    model["head_dim"], params["tensor_parallel"], dtype_bytes)
    except (KeyError, TypeError, ValueError, p.PlanError):
        return None


def check_gpu(module):
    params = module.params
    if not params["gpu"]:
        return {"skipped": "no GPU on this stack"}, [], []
    smi = module.get_bin_path(params["nvidia_smi"])
    if not smi:
        missing = ("gpu: %s not found: is the NVIDIA driver installed (or validate_nvidia_smi set to its path)?"
                   % params["nvidia_smi"])
        return {"skipped": "no nvidia-smi"}, [missing], []
    rc, out, err = run_bounded(module, [smi, "-q", "-x"])
    if rc != 0:
        failed = "gpu: nvidia-smi -q -x failed (rc %s): %s" % (rc, (err or out).strip()[:300])
        return {"skipped": "nvidia-smi -q -x failed"}, [failed], []
    try:
        gpus = v.gpu_health(out)
    except v.ValidationError as exc:
        return {"skipped": str(exc)}, ["gpu: %s" % exc], []
    kernel, kernel_source = read_kernel_log(module)
    xid_problems, xid_notices = v.xid_findings(v.kernel_xids(kernel), gpus)
    problems = ["gpu: GPU %s: %s" % (g["index"], p) for g in gpus for p in g["problems"]]
    problems += ["gpu: %s" % p for p in xid_problems]
    notices = ["GPU %s: %s" % (g["index"], n) for g in gpus for n in g["notices"]] + xid_notices
    return {"gpus": gpus, "xid_problems": xid_problems, "xid_notices": xid_notices,
            "kernel_log_source": kernel_source}, problems, notices


def unit_start(module, unit):
    """'@<epoch seconds>' of the unit's last start (journalctl --since), or None when unknown (no
    unit, no systemd, a systemd older than --timestamp=unix)."""
    systemctl = module.get_bin_path("systemctl")
    if not unit or not systemctl:
        return None
    rc, out, dummy = run_bounded(module, [systemctl, "show", "--property=ExecMainStartTimestamp", "--value",
                                          "--timestamp=unix", unit])
    out = out.strip()
    return out if rc == 0 and re.match(r"^@\d+$", out) else None


def read_kernel_log(module):
    """The kernel's messages since the engine started (an XID of before that start was dealt with by
    the restart, or reported then), else since boot."""
    path = module.params["kernel_log_file"]
    if path:
        try:
            with open(path, "r", errors="replace") as handle:
                return handle.read(), path
        except (IOError, OSError) as exc:
            module.warn("cannot read %s: %s" % (path, exc))
            return "", "unreadable (%s)" % path
    since = unit_start(module, module.params["unit"])
    journal = ((["journalctl", "-k", "--since", since, "--no-pager", "-o", "short-iso"],
                "journalctl -k since %s started" % module.params["unit"]) if since else
               (["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso"], "journalctl -k -b"))
    for argv, source in (journal, (["dmesg"], "dmesg")):
        binary = module.get_bin_path(argv[0])
        if binary:
            rc, out, dummy = run_bounded(module, [binary] + argv[1:])
            if rc == 0:
                return out, source
    return "", "no kernel log readable (journalctl -k and dmesg failed or are missing)"


def load_baseline(path):
    try:
        with open(path, "r") as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def check_benchmark(module, context):
    params = module.params
    if not params["benchmark_result"]:
        return {"skipped": "no benchmark run"}, [], False
    try:
        with open(params["benchmark_result"], "r") as handle:
            run = json.load(handle)
        summaries = run.get("samples") or [run["mixed"]["summary"]]
    except (IOError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return {"skipped": "no readable result"}, ["benchmark: cannot read %s: %s"
                                                   % (params["benchmark_result"], exc)], False
    figures = v.best_bench_figures(summaries)
    samples = [summary.get("error_samples") or [] for summary in summaries]
    key = v.baseline_key(context)
    result = {"figures": figures, "requests": figures["requests"], "errors": figures["errors"],
              "regression_pct": params["regression_pct"], "baseline_key": key}
    problems = []
    if figures["errors"]:
        problems.append("benchmark: %d of %d requests failed: %s" % (
            figures["errors"], figures["requests"], "; ".join(sorted(set(sum(samples, []))))[:400]))
    stored = load_baseline(params["baseline_path"])
    same = stored is not None and stored.get("key") == key
    # an upgrade is held to the version before it, and its run replaces that baseline only when it
    # is no regression
    upgraded = (stored is not None and not same
                and v.previous_version_baseline(stored.get("context"), context))
    mode = params["record_baseline"]
    if (same or upgraded) and mode != "always":
        result["baseline_date"] = stored.get("recorded_at")
        whose = "" if same else " (recorded by version %s, before this upgrade)" % stored["context"]["version"]
        if upgraded:
            result["baseline_version"] = stored["context"]["version"]
        result["checks"] = v.compare_bench(figures, stored.get("figures", {}), params["regression_pct"],
                                           floor_s=params["regression_floor_ms"] / 1000.0,
                                           floor_tokens_per_s=params["regression_floor_tokens_per_s"])
        problems += ["benchmark: %s %s against the baseline's %s%s takes %.1f %% more time (limit %s %%); if the "
                     "change is deliberate, record a new baseline (validate_record_baseline: always)"
                     % (c["figure"], c["value"], c["baseline"], whose, c["worse_pct"], params["regression_pct"])
                     for c in result["checks"] if not c["ok"]]
        if same or problems or mode == "never":
            return result, problems, False
    if mode == "never" or problems:
        result["skipped"] = ("no baseline of this configuration at %s" % params["baseline_path"]
                             if mode == "never" else "a run with failed requests is not recorded as the baseline")
        return result, problems, False
    why = "replaced (%s)" % (
        "asked" if same else
        "a new version, no regression against version %s's" % stored["context"]["version"] if upgraded else
        "the configuration changed") if stored else "recorded"
    result["recorded"] = "%s at %s" % (why, params["baseline_path"])
    if not module.check_mode:
        write_baseline(params["baseline_path"], {"key": key, "context": context,
                                                 "figures": figures,
                                                 "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return result, problems, True


def write_baseline(path, data):
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    tmp = path + ".part"
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            engine=dict(type="str", required=True, choices=list(ENGINES)),
            unit=dict(type="str"),
            log_file=dict(type="path"),
            plan=dict(type="dict", default={}),
            kv_space_gib=dict(type="float"),
            kv_bytes_per_token=dict(type="int", no_log=False),
            model=dict(type="dict", default={}),
            tensor_parallel=dict(type="int", default=1),
            pipeline_parallel=dict(type="int", default=1),
            kv_cache_dtype=dict(type="str", default="auto"),
            max_total_tokens=dict(type="int", no_log=False),
            block_size=dict(type="int", default=16),
            tolerance_pct=dict(type="float", default=5.0),
            gpu=dict(type="bool", default=False),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            command_timeout=dict(type="int", default=60),
            kernel_log_file=dict(type="path"),
            benchmark_result=dict(type="path"),
            baseline_path=dict(type="path", default="/var/lib/llmops/validate/baseline.json"),
            baseline_context=dict(type="dict", default={}),
            record_baseline=dict(type="str", default="missing", choices=["missing", "always", "never"]),
            regression_pct=dict(type="float", default=25.0),
            regression_floor_ms=dict(type="float", default=0.0),
            regression_floor_tokens_per_s=dict(type="float", default=0.0, no_log=False),
            fail_on=dict(type="list", elements="str", default=["memory", "gpu", "benchmark"],
                         choices=["memory", "gpu", "benchmark"]),
        ),
        supports_check_mode=True,
    )
    if not 0 <= module.params["tolerance_pct"] <= 100:
        module.fail_json(msg="tolerance_pct must be in 0..100, got %s" % module.params["tolerance_pct"])
    if not 0 <= module.params["regression_pct"] <= 1000:
        module.fail_json(msg="regression_pct must be in 0..1000, got %s" % module.params["regression_pct"])
    if not 0 <= module.params["regression_floor_ms"] <= 60000:
        module.fail_json(msg="regression_floor_ms must be in 0..60000, got %s" % module.params["regression_floor_ms"])
    if module.params["regression_floor_tokens_per_s"] < 0:
        module.fail_json(msg="regression_floor_tokens_per_s must be 0 or more, got %s"
                         % module.params["regression_floor_tokens_per_s"])
    params = module.params
    text, source = read_log(module)
    memory, memory_problems, memory_notices = check_memory(module, text, source)
    # What the engine logged it runs with: its memory fraction against the plan's, and for an engine
    # given by its log file (no unit of ours describes it) part of what its baseline is valid for.
    args = v.logged_engine_args(params["engine"], text) if text is not None else None
    context = dict(params["baseline_context"])
    version = context.get("version")
    fraction, named = v.logged_memory_fraction(params["engine"], version, args)
    problem = v.check_memory_fraction(fraction, named, params["plan"])
    if problem:
        memory_problems.append(problem)
    if args is not None:
        memory["memory_fraction"] = fraction
        if params["log_file"]:
            context["logged_args_sha1"] = hashlib.sha1(args.encode("utf-8")).hexdigest()[:16]
    gpu, gpu_problems, gpu_notices = check_gpu(module)
    notices = memory_notices + gpu_notices
    benchmark, bench_problems, changed = check_benchmark(module, context)
    result = {"memory": memory, "gpu": gpu, "benchmark": benchmark}
    problems = memory_problems + gpu_problems + bench_problems
    summary = v.summary_lines(result)
    # Check mode compares the host as it runs now with a spec that may not be applied yet (a fresh host
    # has no driver, a changed fraction is not served yet): it reports, and never fails.
    failing = [] if module.check_mode else module.params["fail_on"]
    failures = [line for line in problems if line.split(":", 1)[0] in failing]
    if failures:
        module.fail_json(msg=" | ".join(failures), changed=changed, failures=failures, problems=problems,
                         notices=notices, summary=summary, **result)
    module.exit_json(changed=changed, failures=failures, problems=problems, notices=notices, summary=summary,
                     **result)


if __name__ == "__main__":
    main()
