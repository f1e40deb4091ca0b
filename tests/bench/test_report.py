"""The vLLM-against-SGLang report `make bench-cpu` writes (molecule/default/side_effect.yml), read on
the controller: both engines served every request of the mixed workload, and the report, its raw
results (with what they were measured on) and its plots are there."""
import glob
import json
import os

REPORT_DIR = os.environ["LLMOPS_BENCH_REPORT_DIR"]


def test_benchmark_report_written():
    reports = glob.glob(os.path.join(REPORT_DIR, "*", "report.md"))
    assert reports, "no report under %s" % REPORT_DIR
    with open(reports[0], encoding="utf-8") as f:
        text = f.read()
    assert "| metric (mixed workload) |" in text and "Engine peak memory" in text
    raw = glob.glob(os.path.join(REPORT_DIR, "raw", "*.json"))
    assert raw
    for path in raw:
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        summary = result["mixed"]["summary"]
        assert summary["ok"] == summary["requests"] > 0, (path, summary["error_samples"])
        # what it was measured on: the flags the collection rendered for that engine, GPUs, the commit
        context = result["context"]
        assert "--served-model-name" in context["flags"] and context["gpus"] == "none", (path, context)
        assert context["collection"].startswith(("commit ", "version ")), (path, context)
        assert "- %s %s: GPUs none; collection %s" % (result["engine"], result["engine_version"], context["collection"]) in text
    for png in ("latency.png", "sweep.png"):
        assert os.path.exists(os.path.join(os.path.dirname(reports[0]), png))
