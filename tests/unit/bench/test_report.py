# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/loadgen/llmops_report.py renders the side-by-side report from recorded results."""
import copy
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "bench", "loadgen"))
import llmops_loadgen as lg  # noqa: E402
import llmops_report as report  # noqa: E402


def _result(engine, version, e2e, memory):
    records = [{"index": i, "kind": kind, "ok": True, "ttft_s": 0.05 * e2e, "e2e_s": e2e + i * 0.01,
                "itl": [0.01] * 3, "output_tokens": 4}
               for i, kind in enumerate(r["kind"] for r in lg.build_workload(10))]
    records[-1] = {"index": 9, "kind": records[-1]["kind"], "ok": False, "e2e_s": 0.1, "error": "TimeoutError: "}
    by_kind = {k: lg.summarize([r for r in records if r["kind"] == k], 2.0) for k, _ in lg.MIX}
    mixed = {"concurrency": 32, "summary": lg.summarize(records, 2.0), "by_kind": by_kind, "records": records}
    sweep = [{"concurrency": c, "summary": lg.summarize(records[:4], 1.0 * c), "by_kind": {}} for c in (1, 8)]
    return {"schema": 1, "engine": engine, "engine_version": version, "model": "qwen3-tiny", "host": "h1",
            "config": {"requests": 10, "concurrency": 32, "seed": 0, "max_tokens_cap": 32, "document_chars": 400,
                       "temperature": 0.7, "sweep": [1, 8], "sweep_requests": 4, "duration_limit_s": 120,
                       "mix": dict(lg.MIX)},
            "mixed": mixed, "sweep": sweep, "memory": {"cgroup_peak_bytes": memory}}


@pytest.fixture()
def results(tmp_path):
    paths = []
    for engine, version, e2e, memory in (("vllm", "0.32.0", 0.4, 2 * 2 ** 30), ("sglang", "0.5.23", 0.5, int(2.226 * 2 ** 30))):
        path = tmp_path / ("%s.json" % engine)
        path.write_text(json.dumps(_result(engine, version, e2e, memory)), encoding="utf-8")
        paths.append(str(path))
    return paths


def test_markdown_table_side_by_side(results, tmp_path):
    text = report.render(results, str(tmp_path / "out"), with_plots=False)
    assert text.startswith("# Benchmark: vllm 0.32.0 vs sglang 0.5.23")
    assert "| metric (mixed workload) | vllm 0.32.0 | sglang 0.5.23 |" in text
    assert "| Requests ok / sent | 9 / 10 | 9 / 10 |" in text
    assert "| Errors | 1 | 1 |" in text
    assert "| Engine peak memory | 2.00 GiB | 2.23 GiB |" in text
    assert "sglang 0.5.23 uses +11.3% peak memory against vllm 0.32.0." in text
    assert "| 8 |" in text and "TimeoutError" in text
    assert (tmp_path / "out" / "report.md").read_text(encoding="utf-8") == text


def test_sampled_memory_is_the_fallback():
    result = {"memory": {"cgroup_peak_bytes": None, "sampled_peak_bytes": 5, "rss_peak_bytes": 4}}
    assert report.peak_memory(result) == 5
    assert report.peak_memory({"memory": {}}) is None


def test_plots_are_png(results, tmp_path):
    pytest.importorskip("matplotlib")
    text = report.render(results, str(tmp_path))
    for name in ("latency.png", "sweep.png"):
        assert "![%s](%s)" % (name, name) in text
        with open(tmp_path / name, "rb") as handle:
            assert handle.read(8) == b"\x89PNG\r\n\x1a\n"


def test_single_engine_report(results, tmp_path):
    text = report.render(results[:1], str(tmp_path), with_plots=False)
    assert "| metric (mixed workload) | vllm 0.32.0 |" in text and "peak memory against" not in text


def test_no_results_is_an_error(tmp_path):
    with pytest.raises(SystemExit):
        report.render([], str(tmp_path))


def test_percentiles_in_the_table_are_milliseconds(results, tmp_path):
    data = json.loads(open(results[0], encoding="utf-8").read())
    single = copy.deepcopy(data)
    single["mixed"]["summary"]["e2e_s"] = {"p50": 0.25, "p95": 0.5, "p99": 1.5}
    path = tmp_path / "one.json"
    path.write_text(json.dumps(single), encoding="utf-8")
    assert "| E2E P50 / P95 / P99 (ms) | 250 / 500 / 1500 |" in report.render([str(path)], str(tmp_path), with_plots=False)


def _open_result(tmp_path, engine, slow_from):
    """An open-loop result: three rates, latency rising from `slow_from` req/s on."""
    import argparse
    args = argparse.Namespace(sla=lg.parse_sla("ttft:p99:500ms,e2el:p99:3s"), percentiles=[50, 99])
    phases = []
    for rate in (1.0, 2.0, 4.0):
        slow = 3.0 if rate >= slow_from else 1.0
        records = [{"index": i, "kind": "new_chat", "ok": True, "ttft_s": 0.1 * slow, "e2e_s": 1.0 * slow + i * 0.01,
                    "itl": [0.05] * 9, "output_tokens": 10, "prompt_tokens": 20, "send_lag_s": 0.0}
                   for i in range(20)]
        phases.append(lg._open_phase_result(rate, records, 20 / rate, args))
    met = [p["rate"] for p in phases if p["sla"]["met"]]
    result = {"schema": 1, "mode": "open", "engine": engine, "engine_version": "1.0", "model": "qwen3-tiny",
              "host": "h1", "label": "", "phases": phases, "max_rate_meeting_sla": max(met) if met else None,
              "config": {"rates": [1.0, 2.0, 4.0], "schedule": [], "burstiness": 1.0, "requests_per_rate": 20,
                         "rate_duration_s": 30.0, "sla": args.sla, "seed": 0, "max_tokens_cap": 0,
                         "workload": "seed mix", "percentiles": [50, 99], "duration_limit_s": 600}}
    path = tmp_path / ("open-%s.json" % engine)
    path.write_text(json.dumps(result), encoding="utf-8")
    return str(path)


def test_open_loop_results_are_compared_by_rate_with_the_sla(tmp_path):
    paths = [_open_result(tmp_path, "vllm", 4.0), _open_result(tmp_path, "sglang", 2.0)]
    text = report.render(paths, str(tmp_path / "out"), with_plots=False)
    assert text.startswith("# Open-loop load: vllm 1.0 vs sglang 1.0")
    assert "SLA: TTFT P99 <= 500 ms, E2EL P99 <= 3000 ms" in text
    # vLLM holds at 1 and 2 req/s (E2EL P99 1188 ms), misses at 4 (3188 ms: one request of 20 within
    # 3 s in a 5 s run, goodput 0.2); SGLang misses from 2 on
    assert "| 2 | 20 / 20 | 2.00 | 100 / 100 | 120.9 | 1095 / 1188 | 20.0 | met |" in text
    assert "| 4 | 20 / 20 | 0.20 | 300 / 300 | 320.9 | 3095 / 3188 | 40.0 | missed |" in text
    sections = text.split("## ")
    assert "Highest rate that met the SLA: 2 req/s." in sections[1] and "Highest rate that met the SLA: 1 req/s." in sections[2]
    closed = tmp_path / "closed.json"
    closed.write_text(json.dumps(_result("vllm", "0.32.0", 0.4, 1)), encoding="utf-8")
    with pytest.raises(SystemExit, match="do not compare"):
        report.render([paths[0], str(closed)], str(tmp_path / "mixed"))
    other = json.loads(open(paths[1], encoding="utf-8").read())
    other["config"]["sla"] = lg.parse_sla("e2el:p99:1s")
    (tmp_path / "other.json").write_text(json.dumps(other), encoding="utf-8")
    with pytest.raises(SystemExit, match="ran against different SLAs"):
        report.render([paths[0], str(tmp_path / "other.json")], str(tmp_path / "mixed"))


def test_open_loop_plot_is_png(tmp_path):
    pytest.importorskip("matplotlib")
    text = report.render([_open_result(tmp_path, "vllm", 4.0)], str(tmp_path))
    assert "![open_loop.png](open_loop.png)" in text
    with open(tmp_path / "open_loop.png", "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_tuning_summary_heads_the_report_with_the_chosen_candidate(tmp_path):
    paths = [_open_result(tmp_path, "vllm", 4.0), _open_result(tmp_path, "sglang", 2.0)]
    tried = []
    named = []
    for path, name, key in zip(paths, ("current settings", "max_concurrency=1"), ("k-current", "k-one")):
        result = json.loads(open(path, encoding="utf-8").read())
        # measured under another name (another baseline): this run's name is the one shown
        result["label"] = "measured as " + name
        named.append(str(tmp_path / (key + ".json")))
        with open(named[-1], "w", encoding="utf-8") as handle:
            json.dump(result, handle)
        tried.append({"name": name, "key": key, "candidate": {}, "flags": ["-m", "vllm", "--max-num-seqs", "9"],
                      "result": result})
    summary = {"context": {"host": "gpu-01", "engine": "vllm", "engine_version": "0.26.0", "model": "qwen3-tiny",
                           "collection": "commit abc123", "gpus": "1 x NVIDIA H200, driver 580.95.05"},
               "sla": lg.parse_sla("ttft:p99:500ms,e2el:p99:3s"), "tried": tried, "chosen": "k-current",
               "message": "best: current settings, meeting the SLA up to 2 req/s",
               "not_tried": [{"name": "max_concurrency=64", "key": "k-64"}]}
    summary["tried"].append({"name": "speculative={\"method\": \"eagle\"}", "key": "k-eagle", "candidate": {},
                             "flags": [], "result": {"failed": "Serve the candidate: needs draft_model | x",
                                                     "phases": [], "max_rate_meeting_sla": None}})
    (tmp_path / "tune.json").write_text(json.dumps(summary), encoding="utf-8")
    text = report.render(named, str(tmp_path / "out"), with_plots=False, tuning_file=str(tmp_path / "tune.json"))
    assert text.startswith("# Tuning on gpu-01: vllm 0.26.0 serving qwen3-tiny")
    assert "Collection commit abc123. GPUs: 1 x NVIDIA H200, driver 580.95.05." in text
    lines = text.splitlines()
    row = lines.index("| candidate | highest rate meeting the SLA (req/s) | goodput there (req/s) | engine flags |")
    assert lines[row + 2] == "| current settings (chosen) | 2 | 2.00 | `-m vllm --max-num-seqs 9` |"
    assert lines[row + 3] == "| max_concurrency=1 | 1 | 1.00 | `-m vllm --max-num-seqs 9` |"
    assert lines[row + 4] == '| speculative={"method": "eagle"} | failed: Serve the candidate: needs draft_model / x | n/a | `-` |'

    assert "Not tried within the time budget: max_concurrency=64." in text
    assert "# Open-loop load: vllm 1.0 current settings vs sglang 1.0 max_concurrency=1" in text
    closed = tmp_path / "closed.json"
    closed.write_text(json.dumps(_result("vllm", "0.32.0", 0.4, 1)), encoding="utf-8")
    with pytest.raises(SystemExit, match="open-loop results only"):
        report.render([str(closed)], str(tmp_path / "closed"), tuning_file=str(tmp_path / "tune.json"))


def test_the_chosen_candidate_is_marked_in_the_plot(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    path = _open_result(tmp_path, "vllm", 4.0)
    result = json.loads(open(path, encoding="utf-8").read())
    result["label"] = "current settings"
    (tmp_path / "open-vllm.json").write_text(json.dumps(result), encoding="utf-8")
    marked = []
    import matplotlib.axes
    original = matplotlib.axes.Axes.annotate
    monkeypatch.setattr(matplotlib.axes.Axes, "annotate",
                        lambda self, text, xy, **kw: marked.append((text, xy)) or original(self, text, xy, **kw))
    report.plot_open([result], str(tmp_path), chosen="current settings")
    assert marked == [("chosen", (2.0, result["phases"][1]["sla"]["goodput_rps"]))]
    marked.clear()
    report.plot_open([result], str(tmp_path), chosen="another")
    assert marked == []


def test_what_each_result_was_measured_on_is_in_the_report(tmp_path):
    paths = [_open_result(tmp_path, "vllm", 4.0), _open_result(tmp_path, "sglang", 2.0)]
    result = json.loads(open(paths[0], encoding="utf-8").read())
    result["context"] = {"gpus": "1 x NVIDIA H200, driver 580.159.04", "collection": "commit 0123abcd",
                         "flags": ["--max-num-seqs", "256", "--enable-prefix-caching"]}
    with open(paths[0], "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    text = report.render(paths, str(tmp_path / "out"), with_plots=False)
    assert ("- vllm 1.0: GPUs 1 x NVIDIA H200, driver 580.159.04; collection commit 0123abcd; flags "
            "`--max-num-seqs 256 --enable-prefix-caching`") in text
    assert "- sglang 1.0:" not in text
    closed = tmp_path / "closed.json"
    closed.write_text(json.dumps(dict(_result("vllm", "0.32.0", 0.4, 1), context=result["context"])), encoding="utf-8")
    assert "- vllm 0.32.0: GPUs 1 x NVIDIA H200" in report.render([str(closed)], str(tmp_path / "closed"), with_plots=False)
