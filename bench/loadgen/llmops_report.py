#!/usr/bin/env python3
# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render the side-by-side benchmark report (Markdown + PNG plots) from llmops_loadgen results.

    python llmops_report.py --out DIR results-vllm.json results-sglang.json

Closed-loop results (`llmops_loadgen.py run`) compare the mixed workload and the concurrency sweep;
open-loop results (`llmops_loadgen.py open`) compare latency and goodput by request rate, with the
SLA's bounds and each result's highest rate that met them.

Plots need matplotlib (pinned in tests/requirements-dev.txt); without it the Markdown is still
written and says the plots were skipped.
"""
import argparse
import json
import os
import sys

ROWS = (
    ("Requests ok / sent", lambda s: "%d / %d" % (s["ok"], s["requests"])),
    ("Errors", lambda s: "%d" % s["errors"]),
    ("Output tokens/s", lambda s: _num(s["output_tokens_per_s"], 1)),
    ("Requests/s", lambda s: _num(s["requests_per_s"], 2)),
    ("TTFT P50 / P95 / P99 (ms)", lambda s: _triple(s["ttft_s"])),
    ("ITL P50 / P95 / P99 (ms)", lambda s: _triple(s["itl_s"])),
    ("E2E P50 / P95 / P99 (ms)", lambda s: _triple(s["e2e_s"])),
)


def _num(value, digits):
    return "n/a" if value is None else "%.*f" % (digits, value)


def _ms(value):
    return "n/a" if value is None else "%.0f" % (value * 1000) if value >= 0.1 else "%.1f" % (value * 1000)


def _triple(dist):
    return " / ".join(_ms(dist.get(key)) for key in ("p50", "p95", "p99"))


def _gib(value):
    return "n/a" if not value else "%.2f GiB" % (value / 2 ** 30)


def peak_memory(result):
    """The engine's peak memory: the cgroup's own peak when known, else the sampled one."""
    memory = result.get("memory") or {}
    return memory.get("cgroup_peak_bytes") or memory.get("sampled_peak_bytes") or memory.get("rss_peak_bytes")


def _label(result):
    return ("%s %s" % (result["engine"], result.get("engine_version", ""))).strip()


def _context_lines(results, label):
    """What each result was measured on (its --run-context): GPUs, the collection, the engine flags."""
    lines = []
    for r in results:
        context = r.get("context") or {}
        if context:
            lines.append("- %s: GPUs %s; collection %s; flags `%s`" % (
                label(r), context.get("gpus") or "none", context.get("collection") or "unknown",
                " ".join(context.get("flags") or []) or "-"))
    return (["Measured on:", ""] + lines + [""]) if lines else []


def _plot_lines(plots):
    if plots:
        return ["## Plots", ""] + ["![%s](%s)" % (name, name) for name in plots] + [""]
    return ["(plots skipped: matplotlib is not installed in this Python)", ""]


def markdown(results, plots):
    first = results[0]
    config = first["config"]
    lines = [
        "# Benchmark: %s" % " vs ".join(_label(r) for r in results),
        "",
        "Same host (`%s`), same model (`%s`). Mixed workload: %s; temperature %s; %d requests at "
        "concurrency %d%s; Chinese document %d characters. Bounded at %d s per engine."
        % (first["host"], first["model"],
           ", ".join("%d%% %s" % (share * 100, kind) for kind, share in config["mix"].items()),
           config["temperature"], config["requests"], config["concurrency"],
           ("; max_tokens capped at %d" % config["max_tokens_cap"]) if config.get("max_tokens_cap") else "",
           config["document_chars"], config["duration_limit_s"]),
        "",
    ] + _context_lines(results, _label) + [
        "| metric (mixed workload) | " + " | ".join(_label(r) for r in results) + " |",
        "|---|" + "---|" * len(results),
    ]
    for title, render in ROWS:
        lines.append("| %s | %s |" % (title, " | ".join(render(r["mixed"]["summary"]) for r in results)))
    lines.append("| Engine peak memory | %s |" % " | ".join(_gib(peak_memory(r)) for r in results))
    if len(results) == 2 and peak_memory(results[0]) and peak_memory(results[1]):
        delta = (peak_memory(results[1]) / float(peak_memory(results[0])) - 1) * 100
        lines += ["", "%s uses %+.1f%% peak memory against %s." % (_label(results[1]), delta, _label(results[0]))]
    lines += ["", "## Per request kind (E2E P99 ms, errors)", "",
              "| kind | " + " | ".join(_label(r) for r in results) + " |", "|---|" + "---|" * len(results)]
    for kind in config["mix"]:
        cells = []
        for r in results:
            s = r["mixed"]["by_kind"].get(kind)
            cells.append("%s (%d err)" % (_ms(s["e2e_s"]["p99"]), s["errors"]) if s and s["requests"] else "n/a")
        lines.append("| %s | %s |" % (kind, " | ".join(cells)))
    if any(r.get("sweep") for r in results):
        lines += ["", "## Fixed-concurrency sweep", "",
                  "| concurrency | " + " | ".join("%s tok/s, E2E P99 ms" % _label(r) for r in results) + " |",
                  "|---|" + "---|" * len(results)]
        levels = sorted({p["concurrency"] for r in results for p in r.get("sweep", [])})
        for level in levels:
            cells = []
            for r in results:
                phase = next((p for p in r.get("sweep", []) if p["concurrency"] == level), None)
                cells.append("%s, %s" % (_num(phase["summary"]["output_tokens_per_s"], 1), _ms(phase["summary"]["e2e_s"]["p99"]))
                             if phase else "n/a")
            lines.append("| %d | %s |" % (level, " | ".join(cells)))
    errors = [(r["engine"], e) for r in results for e in r["mixed"]["summary"].get("error_samples", [])]
    if errors:
        lines += ["", "## Error samples", ""] + ["- %s: `%s`" % pair for pair in errors]
    lines += [""]
    return "\n".join(lines + _plot_lines(plots))


def _pyplot():
    """matplotlib.pyplot drawing to files, or None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def plot(results, out_dir):
    plt = _pyplot()
    if plt is None:
        return []
    written = []
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    width = 0.8 / len(results)
    for axis, key, title in zip(axes, ("ttft_s", "itl_s", "e2e_s"), ("TTFT", "Inter-token latency", "End-to-end")):
        for i, r in enumerate(results):
            dist = r["mixed"]["summary"][key]
            values = [(dist.get(q) or 0) * 1000 for q in ("p50", "p95", "p99")]
            axis.bar([x + i * width for x in range(3)], values, width, label=_label(r))
        axis.set_xticks([x + width * (len(results) - 1) / 2 for x in range(3)])
        axis.set_xticklabels(["P50", "P95", "P99"])
        axis.set_title(title)
        axis.set_ylabel("ms")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "latency.png"), dpi=90)
    plt.close(fig)
    written.append("latency.png")
    if any(r.get("sweep") for r in results):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for r in results:
            levels = [p["concurrency"] for p in r.get("sweep", [])]
            axes[0].plot(levels, [p["summary"]["output_tokens_per_s"] or 0 for p in r["sweep"]], marker="o", label=_label(r))
            axes[1].plot(levels, [(p["summary"]["e2e_s"]["p99"] or 0) * 1000 for p in r["sweep"]], marker="o", label=_label(r))
        axes[0].set_title("Output tokens/s by concurrency")
        axes[1].set_title("E2E P99 (ms) by concurrency")
        for axis in axes:
            axis.set_xlabel("concurrency")
            axis.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "sweep.png"), dpi=90)
        plt.close(fig)
        written.append("sweep.png")
    return written


# ------------------------------------------------------------------------------------ open loop
def _rate_label(phase):
    return "%g" % phase["rate"] if phase["rate"] is not None else "schedule"


def _open_label(result):
    return ("%s %s" % (_label(result), result.get("label") or "")).strip()


def _sla_text(sla):
    return ", ".join("%s P%g <= %g ms" % (c["metric"].upper(), c["percentile"], c["bound_ms"]) for c in sla) or "none"


def markdown_open(results, plots):
    first = results[0]
    config = first["config"]
    lines = [
        "# Open-loop load: %s" % " vs ".join(_open_label(r) for r in results),
        "",
        "Host `%s`, model `%s`. Requests arrive as a Poisson process (burstiness %g) at each rate, at most %d "
        "per rate over %g s; workload: %s. SLA: %s (a failed request misses every bound)."
        % (first["host"], first["model"], config["burstiness"], config["requests_per_rate"],
           config["rate_duration_s"], config["workload"], _sla_text(config["sla"])),
        "",
    ] + _context_lines(results, _open_label)
    for r in results:
        lines += ["## %s" % _open_label(r), "",
                  "| rate (req/s) | ok / sent | goodput (req/s) | TTFT P50 / P99 (ms) | TPOT P99 (ms) | "
                  "E2EL P50 / P99 (ms) | output tok/s | SLA |",
                  "|---|---|---|---|---|---|---|---|"]
        for phase in r["phases"]:
            bench, sla = phase["bench_serve"], phase.get("sla") or {}
            lines.append("| %s | %d / %d | %s | %s / %s | %s | %s / %s | %s | %s |" % (
                _rate_label(phase), phase["summary"]["ok"], phase["requests"], _num(sla.get("goodput_rps"), 2),
                _num(bench.get("median_ttft_ms"), 0), _num(bench.get("p99_ttft_ms"), 0), _num(bench.get("p99_tpot_ms"), 1),
                _num(bench.get("median_e2el_ms"), 0), _num(bench.get("p99_e2el_ms"), 0),
                _num(bench.get("output_throughput"), 1),
                "met" if sla.get("met") else ("missed" if sla else "-")))
        best = r.get("max_rate_meeting_sla")
        lines += ["", "Highest rate that met the SLA: %s." % ("%g req/s" % best if best is not None else "none"), ""]
    return "\n".join(lines + _plot_lines(plots))


def markdown_tuning(tuning):
    """The tune playbook's summary (tune.json): what was measured on, the ranking and the choice."""
    context = tuning["context"]
    title = "# Tuning on %s: %s %s serving %s" % tuple(context[k] for k in ("host", "engine", "engine_version", "model"))
    measured = "SLA: %s. Collection %s. GPUs: %s." % (_sla_text(tuning["sla"]), context.get("collection") or "unknown",
                                                      context.get("gpus") or "none")
    lines = [title, "", measured, "", "**%s**" % tuning["message"], "",
             "| candidate | highest rate meeting the SLA (req/s) | goodput there (req/s) | engine flags |",
             "|---|---|---|---|"]
    by_key = dict((t["key"], t) for t in tuning["tried"])
    for t in sorted(tuning["tried"], key=lambda t: t["key"] != tuning.get("chosen")):
        peak = t["result"].get("max_rate_meeting_sla")
        phase = next((p for p in t["result"]["phases"] if p["rate"] == peak), None) if peak is not None else None
        failed = t["result"].get("failed")
        lines.append("| %s%s | %s | %s | `%s` |" % (
            t["name"], " (chosen)" if t["key"] == tuning.get("chosen") else "",
            ("failed: %s" % failed.replace("|", "/")) if failed else ("%g" % peak if peak is not None else "none"),
            _num((phase or {}).get("sla", {}).get("goodput_rps"), 2), " ".join(t.get("flags") or []) or "-"))
    skipped = [c["name"] for c in tuning.get("not_tried") or [] if c["key"] not in by_key]
    if skipped:
        lines += ["", "Not tried within the time budget: %s." % "; ".join(skipped)]
    return "\n".join(lines + ["", ""])


def plot_open(results, out_dir, chosen=""):
    plt = _pyplot()
    if plt is None:
        return []
    sla = results[0]["config"]["sla"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for number, r in enumerate(results):
        # one colour per result; P50 dashed, P99 solid
        colour = "C%d" % number
        phases = [p for p in r["phases"] if p["rate"] is not None]
        rates = [p["rate"] for p in phases]
        for axis, metric in zip(axes[:2], ("ttft", "e2el")):
            for q, style in (("median", "--"), ("p99", "-")):
                axis.plot(rates, [p["bench_serve"].get("%s_%s_ms" % (q, metric)) or 0 for p in phases], style,
                          color=colour, marker="o", label="%s %s" % (_open_label(r), "P50" if q == "median" else "P99"))
        axes[2].plot(rates, [(p.get("sla") or {}).get("goodput_rps") or 0 for p in phases], color=colour, marker="o",
                     label=_open_label(r))
        best = r.get("max_rate_meeting_sla")
        if best is not None:
            point = next(p for p in phases if p["rate"] == best)
            picked = chosen and r.get("label") == chosen
            axes[2].plot([best], [point["sla"]["goodput_rps"]], marker="*", markersize=22 if picked else 14,
                         color="red" if picked else "black")
            if picked:
                axes[2].annotate("chosen", (best, point["sla"]["goodput_rps"]), textcoords="offset points",
                                 xytext=(6, 6), color="red")
    for axis, metric, title in zip(axes[:2], ("ttft", "e2el"), ("TTFT (ms) by rate", "End-to-end (ms) by rate")):
        for criterion in sla:
            if criterion["metric"] == metric:
                axis.axhline(criterion["bound_ms"], color="red", linestyle=":",
                             label="SLA P%g <= %g ms" % (criterion["percentile"], criterion["bound_ms"]))
        axis.set_title(title)
    offered = sorted({p["rate"] for r in results for p in r["phases"] if p["rate"] is not None})
    axes[2].plot(offered, offered, ":", color="grey", label="offered rate")
    axes[2].set_title("Goodput (req/s within the SLA)\n* the highest rate that met it")
    for axis in axes:
        axis.set_xlabel("request rate (req/s)")
        axis.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "open_loop.png"), dpi=90)
    plt.close(fig)
    return ["open_loop.png"]


def render(result_files, out_dir, with_plots=True, tuning_file=""):
    results = []
    for path in result_files:
        with open(path, encoding="utf-8") as handle:
            results.append(json.load(handle))
    if not results:
        raise SystemExit("no results to report")
    modes = set(r.get("mode", "closed") for r in results)
    if len(modes) > 1:
        raise SystemExit("open-loop and closed-loop results do not compare: report them apart")
    os.makedirs(out_dir, exist_ok=True)
    if modes == {"open"} and len(set(json.dumps(r["config"]["sla"], sort_keys=True) for r in results)) > 1:
        raise SystemExit("these open-loop results ran against different SLAs: report them apart")
    tuning = None
    if tuning_file:
        if modes != {"open"}:
            raise SystemExit("a tuning summary goes with open-loop results only")
        with open(tuning_file, encoding="utf-8") as handle:
            tuning = json.load(handle)
        # a cached result (cache/KEY.json) is named as this run names its candidate
        names = dict((t["key"], t["name"]) for t in tuning["tried"])
        for path, result in zip(result_files, results):
            result["label"] = names.get(os.path.basename(path)[:-len(".json")], result.get("label"))
    if modes == {"open"}:
        chosen = next((t["name"] for t in tuning["tried"] if t["key"] == tuning.get("chosen")), "") if tuning else ""
        plots = plot_open(results, out_dir, chosen) if with_plots else []
        text = (markdown_tuning(tuning) if tuning else "") + markdown_open(results, plots)
    else:
        plots = plot(results, out_dir) if with_plots else []
        text = markdown(results, plots)
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as handle:
        handle.write(text)
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="report folder (report.md, *.png)")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--tuning", default="", help="the tune playbook's tune.json: its ranking and choice head the report")
    parser.add_argument("results", nargs="+")
    args = parser.parse_args(argv)
    print(render(args.results, args.out, not args.no_plots, args.tuning))
    return 0


if __name__ == "__main__":
    sys.exit(main())
