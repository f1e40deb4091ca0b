"""The tune playbook's filters: inputs checked with the bound of one candidate, candidates with
names and cache keys, and the choice with its suggestion or the closest miss."""
import os
import sys

import yaml

from ansible_collections.llmops.serving.plugins.filter.tune_candidates import tune_candidates
from ansible_collections.llmops.serving.plugins.filter.tune_choice import tune_choice
from ansible_collections.llmops.serving.plugins.filter.tune_inputs import tune_inputs

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "module_utils"))
from test_tuning import BASE, SLA, load_result  # noqa: E402  pylint: disable=wrong-import-position

CONTEXT = {"host": "gpu-01", "engine": "vllm", "engine_version": "0.26.0", "model": "qwen2.5-32b"}


def test_inputs_from_extra_variables_are_numbers_as_text():
    # -e tune_restart_s=100 arrives as text; the playbook checked that each is a whole number
    load = {"restart_s": "100", "request_timeout_s": "30", "requests_per_rate": "20", "rate_duration_s": "15",
            "warmup_requests": "0"}
    checked = tune_inputs(SLA, {"serving_max_concurrency": [64]}, [2], 200, load)
    assert checked == {"problems": [], "per_candidate_s": 100 + 10 + 30, "sla_argument": "ttft:p99:500ms,tpot:p99:50ms"}
    assert tune_inputs(SLA, {"serving_max_concurrency": [64]}, [2], 139, load)["problems"][0].startswith(
        "tune_time_budget_s 139 is too small for one candidate")


def test_the_grid_is_named_and_keyed_and_the_refinement_leaves_out_what_was_tried():
    space = {"serving_max_concurrency": [64, 128, 256]}
    grid = tune_candidates(space, BASE, CONTEXT)
    assert [c["name"] for c in grid] == ["current settings", "max_concurrency=64", "max_concurrency=128"]
    assert len(set(c["key"] for c in grid)) == 3
    assert tune_candidates(space, BASE, dict(CONTEXT, engine_version="0.27.0"))[0]["key"] != grid[0]["key"]
    best = dict(BASE, serving_max_concurrency=128)
    refined = tune_candidates(space, BASE, CONTEXT, best, [BASE, dict(BASE, serving_max_concurrency=96)])
    assert [c["name"] for c in refined] == ["max_concurrency=192"]


def test_the_choice_suggests_the_best_or_names_the_closest():
    tried = [{"candidate": BASE, "name": "current settings", "key": "a", "result": load_result(8)},
             {"candidate": dict(BASE, serving_max_concurrency=128), "name": "max_concurrency=128", "key": "b",
              "result": load_result(16)}]
    choice = tune_choice(tried, BASE, SLA, CONTEXT)
    assert choice["met"] and choice["best"]["key"] == "b"
    assert choice["message"] == "best: max_concurrency=128, meeting the SLA up to 16 req/s"
    assert yaml.safe_load(choice["suggestion"]) == {"serving_max_batched_tokens": None, "serving_max_concurrency": 128}
    missed = [dict(t, result=load_result(0)) for t in tried]
    choice = tune_choice(missed, BASE, SLA, CONTEXT)
    assert not choice["met"] and choice["suggestion"] == ""
    assert choice["message"] == ("no candidate met the SLA (ttft:p99:500ms,tpot:p99:50ms) at any rate tried; the closest "
                                 "was current settings, at 4 req/s: TTFT P99 900 ms against 500 ms; TPOT P99 20 ms "
                                 "against 50 ms")
    assert tune_choice([], BASE, SLA, CONTEXT)["message"] == "no candidate was tried: the time budget ended before the first"


def test_a_failed_candidate_ranks_last_and_is_named_when_every_candidate_failed():
    failed = {"failed": "Serve the candidate: ROLLOUT FAILED", "phases": [], "max_rate_meeting_sla": None}
    tried = [{"candidate": dict(BASE, serving_max_concurrency=128), "name": "max_concurrency=128", "key": "b",
              "result": failed},
             {"candidate": BASE, "name": "current settings", "key": "a", "result": load_result(0)}]
    choice = tune_choice(tried, BASE, SLA, CONTEXT)
    assert not choice["met"] and choice["best"]["key"] == "a"
    assert [r["failed"] for r in choice["ranking"]] == ["", "Serve the candidate: ROLLOUT FAILED"]
    choice = tune_choice(tried[:1], BASE, SLA, CONTEXT)
    assert choice["message"] == "every candidate tried failed; max_concurrency=128: Serve the candidate: ROLLOUT FAILED"
    met = tune_choice([tried[0], dict(tried[1], result=load_result(8))], BASE, SLA, CONTEXT)
    assert met["met"] and met["best"]["key"] == "a"
