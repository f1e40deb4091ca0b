# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A deployed host checked against what it should be (stdlib only): the engine's logged memory
figures against the plan, GPU health from ``nvidia-smi -q -x`` (NVML) and the kernel log, and a
short benchmark against the host's own baseline. Pure functions: the module gathers the text."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re
import xml.etree.ElementTree as ET

from ansible_collections.llmops.serving.plugins.module_utils.engines import REGISTRY, pick

GIB = float(1 << 30)

# The memory figures each engine logs at start-up: the engine registry's "startup_log" (figure,
# pattern with one number group) per engine, compiled once. Values are GiB. The last match in the
# text wins: a log file that holds several starts is read for its newest one.
_NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
LOG_PATTERNS = dict(
    (name, tuple((figure, re.compile(pattern.replace("{N}", _NUM))) for figure, pattern in REGISTRY[name]["startup_log"]))
    for name in REGISTRY)
INTEGER_FIGURES = ("kv_tokens", "kv_blocks", "max_total_num_tokens")


class ValidationError(Exception):
    """An input validate cannot work with; the message names the variable."""


def _number(text):
    text = text.replace(",", "")
    return float(text)


def parse_engine_log(engine, text):
    """The memory figures the engine logged, as a dict (missing figures are absent). The newest
    occurrence of each figure wins."""
    if engine not in LOG_PATTERNS:
        raise ValidationError("engine %r has no log format here (known: %s)"
                              % (engine, ", ".join(sorted(LOG_PATTERNS))))
    found = {}
    for line in (text or "").splitlines():
        for key, pattern in LOG_PATTERNS[engine]:
            match = pattern.search(line)
            if match:
                found[key] = _number(match.group(1))
    for key in INTEGER_FIGURES:
        if key in found:
            found[key] = int(found[key])
    if engine == "sglang" and "kv_size_gib" not in found and "k_size_gib" in found and "v_size_gib" in found:
        found["kv_size_gib"] = round(found["k_size_gib"] + found["v_size_gib"], 2)
    return found


def logged_engine_args(engine, text):
    """The arguments the engine logged at its last start in text (the engine registry's "args_log"
    line), with the parts that change between starts of one configuration masked; None without
    such a line (another engine, or a log that does not reach back to the start)."""
    spec = REGISTRY.get(engine, {}).get("args_log")
    if not spec:
        return None
    line, found = re.compile(spec["line"]), None
    for row in (text or "").splitlines():
        match = line.search(row)
        if match:
            found = match.group(1)
    for volatile in spec["volatile"] if found is not None else ():
        found = re.sub(volatile, lambda match: match.group(0).split("=", 1)[0] + "=<varies>", found)
    return found


def logged_memory_fraction(engine, version, args):
    """(fraction, named) of a start: the GPU memory fraction its logged arguments name (named), else
    the engine version's default where the registry records it; (None, False) when unknown."""
    spec = REGISTRY.get(engine, {}).get("args_log") or {}
    if args is None or not spec.get("memory_fraction"):
        return None, False
    match = re.search(spec["memory_fraction"], args)
    if match:
        return float(match.group(1)), True
    return (pick(spec["memory_fraction_default"], version) if spec.get("memory_fraction_default") else None), False


def check_memory_fraction(fraction, named, plan):
    """A problem line when the engine runs another memory fraction than the plan it is checked
    against (its KV figures are then another engine's), else None. fraction, named: as
    logged_memory_fraction gives them."""
    planned = (plan or {}).get("gpu_memory_fraction")
    if planned is None or fraction is None or abs(float(planned) - fraction) < 0.0005:
        return None
    return ("memory: the engine runs with memory fraction %s (its logged arguments%s) and the plan is for %s: its KV "
            "figures are not the plan's. Serve the planned fraction (serving_gpu_memory_fraction), or plan for the "
            "engine's" % (fraction, "" if named else ", which name none: its default", planned))


def _deviation(logged, planned):
    if not planned:
        return None
    return round(100.0 * (float(logged) - float(planned)) / float(planned), 3)


def expected_figures(engine, plan, kv_space_gib=None, max_total_tokens=None, kv_bytes_per_token=None,
                     block_size=16):
    """What the engine should log, from the plan (GPU) or from the CPU stack's own caps.
    Returns (expected dict, source words). kv_space_gib: VLLM_CPU_KVCACHE_SPACE of a vLLM CPU
    engine, whose token count needs kv_bytes_per_token; max_total_tokens: SGLang's
    --max-total-tokens cap."""
    plan = plan or {}
    if plan.get("kv_tokens"):
        # SGLang keeps no more tokens than its --max-total-tokens cap, whatever the memory allows
        cap = int(max_total_tokens) if engine == "sglang" and max_total_tokens else None
        expected = {"kv_tokens": min(int(plan["kv_tokens"]), cap) if cap else int(plan["kv_tokens"])}
        if plan.get("weights_per_gpu_bytes"):
            expected["weights_gib"] = plan["weights_per_gpu_bytes"] / GIB
        if plan.get("available_kv_bytes") and engine == "vllm":
            expected["available_kv_gib"] = plan["available_kv_bytes"] / GIB
        if plan.get("gpu_memory_bytes") and plan.get("non_torch_bytes") and engine == "sglang":
            # what SGLang's budget starts from: the GPU less its CUDA context and NCCL
            expected["free_before_weights_gib"] = (plan["gpu_memory_bytes"] - plan["non_torch_bytes"]) / GIB
        return expected, "the plan (%s)" % plan.get("available_kv_source", "serving_plan")
    if engine == "vllm" and kv_space_gib and kv_bytes_per_token:
        block = int(block_size)
        blocks = int(float(kv_space_gib) * GIB) // (block * int(kv_bytes_per_token))
        return ({"kv_tokens": blocks * block, "available_kv_gib": float(kv_space_gib)},
                "VLLM_CPU_KVCACHE_SPACE=%g GiB" % float(kv_space_gib))
    if engine == "sglang" and max_total_tokens:
        return {"kv_tokens": int(max_total_tokens)}, "--max-total-tokens %s" % max_total_tokens
    return {}, None


def compare_memory(engine, logged, expected, tolerance_pct, block_size=16):
    """Each expected figure against the logged one. Returns a list of checks
    {figure, logged, expected, deviation_pct, ok}; a figure the log lacks is a failed check."""
    logged = dict(logged)
    if "kv_tokens" not in logged and "kv_blocks" in logged:
        logged["kv_tokens"] = int(logged["kv_blocks"]) * int(block_size)
    checks = []
    for figure in ("free_before_weights_gib", "weights_gib", "available_kv_gib", "kv_tokens"):
        if figure not in expected:
            continue
        want = expected[figure]
        got = logged.get(figure)
        if got is None:
            checks.append({"figure": figure, "logged": None, "expected": _round(want), "deviation_pct": None,
                           "ok": False})
            continue
        dev = _deviation(got, want)
        checks.append({"figure": figure, "logged": _round(got), "expected": _round(want), "deviation_pct": dev,
                       "ok": dev is not None and abs(dev) <= float(tolerance_pct)})
    return checks


def _round(value):
    return int(value) if isinstance(value, int) else round(float(value), 2)


# ------------------------------------------------------------------------------------ GPU health
# Kernel log lines of the NVIDIA driver: "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen
# off the bus." Meanings from NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors); the ones
# listed are those that mean the GPU or its memory needs attention (a process's own fault, 13/31/43,
# is reported as a notice).
XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+)")
XID_MEANING = {
    13: "graphics engine exception (often the application)",
    31: "GPU memory page fault (often the application)",
    43: "GPU stopped processing (often the application)",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
}
XID_APPLICATION = (13, 31, 43, 45)


# coreutils timeout's exit status when it stopped the command (124), or had to kill it (128 + 9)
TIMED_OUT = (124, 137)


def bounded(argv, seconds, timeout_bin):
    """argv run under coreutils timeout: TERM after `seconds`, KILL 5 s later. A GPU that fell off the
    bus hangs nvidia-smi, and a damaged journal journalctl; a check must end and say so. Unbounded when
    seconds is 0 or there is no timeout binary."""
    if not seconds or not timeout_bin:
        return list(argv)
    return [timeout_bin, "--kill-after=5", str(int(seconds))] + list(argv)


def timed_out_msg(argv, rc, seconds):
    """The message for a command that timeout stopped, or None when it ended by itself."""
    if not seconds or rc not in TIMED_OUT:
        return None
    return ("%s did not answer in %d s and was stopped (a GPU that fell off the bus or a damaged journal hangs it)"
            % (" ".join(argv[:2]), int(seconds)))


def kernel_xids(text):
    """XID events of the kernel log: [{bus, xid, meaning, line}], oldest first."""
    events = []
    for line in (text or "").splitlines():
        match = XID_RE.search(line)
        if match:
            xid = int(match.group(2))
            events.append({"bus": match.group(1).lower(), "xid": xid,
                           "meaning": XID_MEANING.get(xid, "see NVIDIA's XID catalogue"), "line": line.strip()[:300]})
    return events


def _text(elem, path):
    node = elem.find(path)
    if node is None or node.text is None:
        return None
    value = node.text.strip()
    return None if value in ("N/A", "", "[N/A]", "Not Supported") else value


def _int(value):
    try:
        return int(str(value).rstrip("x").split()[0])
    except (TypeError, ValueError, IndexError):
        return None


THROTTLE_PROBLEMS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
THROTTLE_NOTICES = ("sw_power_cap",)


def gpu_health(smi_xml):
    """Per-GPU health from ``nvidia-smi -q -x``. Returns a list of
    {index, name, bus_id, problems: [...], notices: [...], figures: {...}}."""
    try:
        root = ET.fromstring(smi_xml)
    except ET.ParseError as exc:
        raise ValidationError("nvidia-smi -q -x gave no readable XML (%s)" % exc)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        problems, notices = [], []
        figures = {}
        for scope in ("volatile", "aggregate"):
            for kind in ("dram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded",
                         "sram_uncorrectable", "dram_correctable", "sram_correctable"):
                value = _int(_text(gpu, "ecc_errors/%s/%s" % (scope, kind)))
                if value is None:
                    continue
                figures["ecc_%s_%s" % (scope, kind)] = value
                if not value:
                    continue
                # volatile: since the driver loaded; aggregate: the GPU's lifetime, which a repaired
                # fault never leaves (a notice, or every later run would fail)
                if "uncorrectable" in kind and scope == "volatile":
                    problems.append("%d uncorrectable ECC errors since the driver loaded (%s)" % (value, kind))
                elif "uncorrectable" in kind:
                    notices.append("%d uncorrectable ECC errors in the GPU's lifetime (%s)" % (value, kind))
                elif scope == "volatile":
                    notices.append("%d correctable ECC errors since the driver loaded (%s)" % (value, kind))
        for kind in ("multiple_single_bit_retirement", "double_bit_retirement"):
            count = _int(_text(gpu, "retired_pages/%s/retired_count" % kind))
            if count:
                figures["retired_pages_" + kind] = count
                (problems if kind == "double_bit_retirement" else notices).append(
                    "%d retired pages (%s)" % (count, kind))
        if (_text(gpu, "retired_pages/pending_retirement") or "").lower() == "yes":
            problems.append("a page retirement is pending: reset the GPU (or reboot) to apply it")
        if (_text(gpu, "remapped_rows/remapped_row_pending") or "").lower() == "yes":
            problems.append("a row remapping is pending: reset the GPU (or reboot) to apply it")
        if (_text(gpu, "remapped_rows/remapped_row_failure") or "").lower() == "yes":
            problems.append("row remapping failed: the GPU needs service")
        unc_rows = _int(_text(gpu, "remapped_rows/remapped_row_unc"))
        if unc_rows:
            figures["remapped_rows_uncorrectable"] = unc_rows
            notices.append("%d rows remapped after uncorrectable errors" % unc_rows)
        reasons = gpu.find("clocks_event_reasons")
        if reasons is None:
            reasons = gpu.find("clocks_throttle_reasons")
        active = []
        if reasons is not None:
            for node in list(reasons):
                if (node.text or "").strip() == "Active":
                    active.append(re.sub(r"^clocks?_(?:event|throttle)_reason_", "", node.tag))
        figures["clock_event_reasons"] = active
        for reason in active:
            if reason in THROTTLE_PROBLEMS:
                problems.append("clocks held down: %s" % reason)
            elif reason in THROTTLE_NOTICES:
                notices.append("clocks held down: %s" % reason)
        width, max_width = (_int(_text(gpu, "pci/pci_gpu_link_info/link_widths/%s" % k))
                            for k in ("current_link_width", "max_link_width"))
        gen, max_gen = (_int(_text(gpu, "pci/pci_gpu_link_info/pcie_gen/%s" % k))
                        for k in ("current_link_gen", "max_link_gen"))
        figures.update({"pcie_width": width, "pcie_width_max": max_width, "pcie_gen": gen, "pcie_gen_max": max_gen})
        if width and max_width and width < max_width:
            problems.append("PCIe link x%d of x%d: reseat the card or check the slot" % (width, max_width))
        # The link generation drops while idle to save power: only a notice.
        if gen and max_gen and gen < max_gen:
            notices.append("PCIe gen %d of %d (normal while idle)" % (gen, max_gen))
        gpus.append({"index": index, "name": _text(gpu, "product_name"), "bus_id": _text(gpu, "pci/pci_bus_id"),
                     "problems": problems, "notices": notices, "figures": figures})
    return gpus


def xid_findings(events, gpus=()):
    """XID events as (problems, notices), each naming the GPU when its bus id is known."""
    index_by_bus = {}
    for gpu in gpus:
        bus = (gpu.get("bus_id") or "").lower()
        if bus:
            # nvidia-smi: 00000000:3B:00.0; kernel: 0000:3b:00
            index_by_bus[bus.split(":", 1)[-1].rsplit(".", 1)[0]] = gpu["index"]
    problems, notices = [], []
    for event in events:
        short = event["bus"].split(":", 1)[-1].rsplit(".", 1)[0] if event["bus"].count(":") > 1 else event["bus"]
        where = "GPU %s" % index_by_bus[short] if short in index_by_bus else "PCI %s" % event["bus"]
        text = "XID %d on %s: %s" % (event["xid"], where, event["meaning"])
        (notices if event["xid"] in XID_APPLICATION else problems).append(text)
    return problems, notices


# ------------------------------------------------------------------------------------ benchmark
# The figures compared with the baseline: (key path in the load generator's summary, better).
BENCH_FIGURES = (
    ("output_tokens_per_s", ("output_tokens_per_s",), "higher"),
    ("ttft_p50_s", ("ttft_s", "p50"), "lower"),
    ("itl_p50_s", ("itl_s", "p50"), "lower"),
    ("e2e_p50_s", ("e2e_s", "p50"), "lower"),
)


def bench_figures(summary):
    """The compared figures of a load generator ``run`` summary (mixed workload)."""
    out = {"requests": summary.get("requests"), "errors": summary.get("errors")}
    for name, path, dummy in BENCH_FIGURES:
        value = summary
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        out[name] = value
    return out


def best_bench_figures(summaries):
    """The figures of repeated samples of one load: each figure's best sample (the lowest latency,
    the highest throughput), the requests and errors of all of them. A neighbour that steals the
    CPU or the PCIe bus makes a sample slower, never faster: the best sample is the engine's own
    figure, and a real regression slows every sample."""
    each = [bench_figures(summary) for summary in summaries]
    out = {"requests": sum(f["requests"] or 0 for f in each), "errors": sum(f["errors"] or 0 for f in each),
           "samples": len(each)}
    for name, dummy, better in BENCH_FIGURES:
        values = [float(f[name]) for f in each if f.get(name) is not None]
        out[name] = (max(values) if better == "higher" else min(values)) if values else None
    return out


def baseline_key(context):
    """What a baseline is only valid for: engine, version, model, flags, GPUs and the load."""
    text = json.dumps(context, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# What an upgrade keeps: a run of a new engine version is held to the baseline the version before it
# recorded when these are the same (the unit and the environment change with the version's venv).
# A new configuration of the same version (new flags, another engine, model or load) starts a new
# baseline: it is meant to perform differently.
UPGRADE_KEEPS = ("engine", "model", "gpus", "gpu_count", "load")


def previous_version_baseline(stored_context, context):
    """Whether a stored baseline is the previous engine version's of this configuration."""
    stored_context = stored_context or {}
    return (stored_context.get("version") not in (None, context.get("version"))
            and all(stored_context.get(k) == context.get(k) for k in UPGRADE_KEEPS))


def compare_bench(figures, baseline_figures, regression_pct, floor_s=0.0, floor_tokens_per_s=0.0):
    """Each figure against the baseline's. Returns a list of {figure, value, baseline, change_pct,
    worse_pct, ok}. worse_pct is how much more time the run took than the baseline: a latency's
    increase, or for throughput the baseline's rate over the run's, less one (25: a quarter more time
    per token either way). A figure worse by more than regression_pct fails, except a latency that is
    worse by less than floor_s seconds, or a throughput lower by less than floor_tokens_per_s (noise
    on a small figure)."""
    checks = []
    for name, dummy, better in BENCH_FIGURES:
        value, base = figures.get(name), baseline_figures.get(name)
        if value is None or not base:
            continue
        value, base = float(value), float(base)
        change = round(100.0 * (value - base) / base, 1)
        if better == "higher":
            worse = float("inf") if value <= 0 else 100.0 * (base / value - 1)
        else:
            worse = change
        below_floor = value - base < float(floor_s) if better == "lower" else base - value < float(floor_tokens_per_s)
        checks.append({"figure": name, "value": round(value, 4), "baseline": round(base, 4), "change_pct": change,
                       "worse_pct": round(worse, 1), "ok": worse <= float(regression_pct) or below_floor})
    return checks


# ------------------------------------------------------------------------------------ summary
def summary_lines(result):
    """The readable per-host summary."""
    lines = []
    mem = result.get("memory") or {}
    if mem.get("skipped"):
        lines.append("memory: not checked (%s)" % mem["skipped"])
    elif mem:
        parts = []
        for check in mem.get("checks", []):
            if check["logged"] is None:
                parts.append("%s not in the log (expected %s)" % (check["figure"], check["expected"]))
            else:
                verdict = "" if check["ok"] else " OUTSIDE"
                parts.append("%s %s vs %s (%+.2f %%)%s" % (
                    check["figure"], check["logged"], check["expected"], check["deviation_pct"], verdict))
        lines.append("memory (%s, tolerance %s %%, expected from %s): %s" % (
            mem.get("log_source"), mem.get("tolerance_pct"), mem.get("expected_from"), "; ".join(parts) or "-"))
    gpu = result.get("gpu") or {}
    if gpu.get("skipped"):
        lines.append("GPU health: not checked (%s)" % gpu["skipped"])
    elif gpu:
        for entry in gpu.get("gpus", []):
            found = "; ".join(entry["problems"] + entry["notices"]) or "healthy"
            lines.append("GPU %s %s (%s): %s" % (entry["index"], entry.get("name") or "?", entry.get("bus_id") or "?",
                                                 found))
        events = "; ".join(gpu.get("xid_problems", []) + gpu.get("xid_notices", []))
        lines.append("kernel log (%s): %s" % (gpu.get("kernel_log_source") or "?", events or "no XID events"))
    bench = result.get("benchmark") or {}
    if bench.get("skipped"):
        lines.append("benchmark: not compared (%s)" % bench["skipped"])
    elif bench:
        if bench.get("recorded"):
            lines.append("benchmark: baseline %s (%s)" % (bench["recorded"], _figures_text(bench.get("figures", {}))))
        else:
            parts = ["%s %s vs %s (%+.1f %%)%s" % (c["figure"], c["value"], c["baseline"], c["change_pct"],
                                                   "" if c["ok"] else " REGRESSION: %.1f %% more time" % c["worse_pct"])
                     for c in bench.get("checks", [])]
            lines.append("benchmark vs baseline of %s (regression limit %s %%): %s" % (
                bench.get("baseline_date"), bench.get("regression_pct"), "; ".join(parts)))
        if bench.get("errors"):
            lines.append("benchmark: %d of %d requests failed" % (bench["errors"], bench.get("requests") or 0))
    return lines


def _figures_text(figures):
    return ", ".join("%s %s" % (k, round(v, 4) if isinstance(v, float) else v)
                     for k, v in sorted(figures.items()) if v is not None)
