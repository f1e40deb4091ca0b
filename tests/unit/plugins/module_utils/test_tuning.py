# -*- coding: utf-8 -*-
"""module_utils/tuning: the SLA and search space checks, the grid and its refinement, cache keys,
the choice of the best candidate from real load-generator results, and the suggestion file."""
import argparse
import os
import re
import sys

import pytest
import yaml

from ansible_collections.llmops.serving.plugins.module_utils import tuning

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "bench", "loadgen"))
import llmops_loadgen as lg  # noqa: E402  pylint: disable=wrong-import-position

SLA = [{"metric": "ttft", "percentile": 99, "bound_ms": 500}, {"metric": "tpot", "percentile": 99, "bound_ms": 50}]
BASE = {"serving_max_batched_tokens": None, "serving_max_concurrency": 256}


def test_the_sla_metrics_are_the_load_generators():
    assert tuning.SLA_METRICS == lg.SLA_METRICS


def test_a_checked_sla_is_the_load_generators_argument():
    checked = tuning.check_sla(SLA)
    assert checked == [{"metric": "ttft", "percentile": 99.0, "bound_ms": 500.0},
                       {"metric": "tpot", "percentile": 99.0, "bound_ms": 50.0}]
    assert tuning.sla_argument(checked) == "ttft:p99:500ms,tpot:p99:50ms"
    assert lg.parse_sla(tuning.sla_argument(checked)) == checked


@pytest.mark.parametrize("sla,message", [
    ([], "tune_sla must be a non-empty list of {metric, percentile, bound_ms}"),
    ({"metric": "ttft"}, "tune_sla must be a non-empty list"),
    ([{"metric": "latency", "percentile": 99, "bound_ms": 500}],
     "tune_sla[0].metric 'latency' is not a metric the load generator measures: use one of ttft, tpot, itl, e2el"),
    ([SLA[0], {"metric": "ttft", "percentile": 0, "bound_ms": 500}], "tune_sla[1].percentile must be a number in (0, 100]"),
    ([{"metric": "ttft", "percentile": 100.5, "bound_ms": 500}], "tune_sla[0].percentile must be a number in (0, 100]"),
    ([{"metric": "ttft", "percentile": "p99", "bound_ms": 500}], "got 'p99'"),
    ([{"metric": "ttft", "percentile": 99, "bound_ms": 0}], "tune_sla[0].bound_ms must be a number of milliseconds above 0"),
    ([{"metric": "ttft", "percentile": 99, "bound": 500}], "tune_sla[0] must have exactly metric, percentile and bound_ms"),
])
def test_a_bad_sla_is_named(sla, message):
    with pytest.raises(tuning.TuningError) as err:
        tuning.check_sla(sla)
    assert message in str(err.value), str(err.value)


@pytest.mark.parametrize("space,message", [
    ({}, "tune_space must name at least one spec variable"),
    ({"serving_max_batched_tokens": []}, "tune_space.serving_max_batched_tokens must be a non-empty list"),
    ({"serving_max_num_seqs": [64]}, "tune_space.serving_max_num_seqs cannot be tuned (did you mean "
                                     "serving_max_concurrency?); the variables a search may vary are serving_block_size, serving_chunked_prefill"),
    ({"serving_tensor_parallel": [1, 2]}, "tune_space.serving_tensor_parallel cannot be tuned"),
    ({"serving_max_concurency": [64]}, "cannot be tuned (did you mean serving_max_concurrency?)"),
    ({"serving_max_concurrency": [0]}, "0 is not an integer >= 1"),
    ({"serving_max_concurrency": [True]}, "True is not an integer >= 1"),
    ({"serving_kv_cache_dtype": ["fp4"]}, "'fp4' is not auto, fp8_e4m3 or fp8_e5m2"),
    ({"serving_block_size": [16, 0]}, "tune_space.serving_block_size: 0 is not an integer >= 1, or null"),
    ({"serving_chunked_prefill": [{"chunk": 512}]}, "is not true, false, null, or a dict of chunk_tokens"),
    ({"serving_speculative": [{"method": "medusa"}]}, "is not null or a dict with method"),
    ({"serving_max_batched_tokens": [2048, 2048]}, "lists a value twice"),
])
def test_a_bad_search_space_is_named(space, message):
    with pytest.raises(tuning.TuningError) as err:
        tuning.check_space(space)
    assert message in str(err.value), str(err.value)


def test_the_grid_starts_with_the_baseline_and_holds_each_candidate_once():
    space = tuning.check_space({"serving_max_batched_tokens": [2048, None], "serving_max_concurrency": [128, 256]})
    candidates = tuning.grid(space, BASE)
    assert candidates[0] == BASE and len(candidates) == 4  # 2 x 2, the baseline among them
    assert {"serving_max_batched_tokens": 2048, "serving_max_concurrency": 128} in candidates
    assert len(set(tuning.candidate_key(c, {"engine": "vllm"}) for c in candidates)) == 4


def test_the_refinement_tries_the_midpoints_next_to_the_best_value():
    space = {"serving_max_batched_tokens": [2048, 8192, 16384], "serving_enable_prefix_caching": [True, False]}
    best = {"serving_max_batched_tokens": 8192, "serving_enable_prefix_caching": True}
    assert tuning.refine(space, BASE, best) == [dict(best, serving_max_batched_tokens=5120),
                                                dict(best, serving_max_batched_tokens=12288)]
    edge = dict(best, serving_max_batched_tokens=2048)
    assert tuning.refine(space, BASE, edge) == [dict(edge, serving_max_batched_tokens=5120)]


def test_the_cache_key_changes_with_anything_that_changes_the_figures():
    context = {"engine": "vllm", "engine_version": "0.26.0", "model": "m", "rates": [4, 8]}
    key = tuning.candidate_key(BASE, context)
    assert key == tuning.candidate_key(dict(BASE), dict(context)) and len(key) == 16
    assert key != tuning.candidate_key(dict(BASE, serving_max_concurrency=128), context)
    assert key != tuning.candidate_key(BASE, dict(context, engine_version="0.27.0"))
    assert key != tuning.candidate_key(BASE, dict(context, rates=[4, 8, 16]))


def test_the_same_settings_share_a_key_whatever_space_found_them():
    # the spec's other inputs are in the context; a candidate's values replace theirs
    context = {"engine": "vllm", "spec": {"serving_max_concurrency": 8, "serving_speculative": None}}
    alone = tuning.candidate_key({"serving_max_concurrency": 8}, context)
    assert alone == tuning.candidate_key({"serving_max_concurrency": 8, "serving_speculative": None}, context)
    assert alone == tuning.candidate_key({"serving_speculative": None}, context)
    assert alone != tuning.candidate_key({"serving_speculative": {"method": "eagle"}}, context)
    assert alone != tuning.candidate_key({"serving_max_concurrency": 8},
                                         dict(context, spec={"serving_max_concurrency": 8, "serving_speculative": 1}))


def test_a_budget_below_one_candidate_is_refused():
    tuning.check_budget(900, 600)
    with pytest.raises(tuning.TuningError, match="tune_time_budget_s 300 is too small for one candidate, which takes "
                                                 "up to 600 s here"):
        tuning.check_budget(300, 600)


def load_result(peaks):
    """A load-generator result (its own phase records and SLA evaluation): the rates 4, 8, 16,
    each with latency that stays low up to `peaks` req/s and then runs past the TTFT bound."""
    args = argparse.Namespace(sla=tuning.check_sla(SLA), percentiles=[50, 99])
    phases = []
    for rate in (4.0, 8.0, 16.0):
        ttft = 0.1 if rate <= peaks else 0.9
        records = [{"index": i, "kind": "new_chat", "ok": True, "ttft_s": ttft, "e2e_s": ttft + 10 * 0.02,
                    "itl": [0.02] * 10, "output_tokens": 11, "prompt_tokens": 5} for i in range(20)]
        phases.append(lg._open_phase_result(rate, records, 20 / rate, args))
        if not phases[-1]["sla"]["met"]:
            break
    met = [p["rate"] for p in phases if p["sla"]["met"]]
    return {"phases": phases, "max_rate_meeting_sla": max(met) if met else None}


def test_the_best_candidate_holds_the_highest_rate_then_the_fewest_changes():
    tried = [{"candidate": BASE, "result": load_result(8)},
             {"candidate": dict(BASE, serving_max_batched_tokens=2048), "result": load_result(4)},
             {"candidate": dict(BASE, serving_max_concurrency=128), "result": load_result(16)},
             {"candidate": dict(BASE, serving_max_concurrency=128, serving_max_batched_tokens=8192),
              "result": load_result(16)}]
    choice = tuning.choose(tried, BASE)
    assert choice["met"] and choice["best"] is tried[2] and choice["baseline"] is tried[0]
    assert [r["peak_rate"] for r in choice["ranking"]] == [16.0, 16.0, 8.0, 4.0]
    text = tuning.suggestion(choice, tuning.check_sla(SLA), {"host": "gpu-01", "engine": "vllm",
                                                             "engine_version": "0.26.0", "model": "qwen2.5-32b"})
    assert yaml.safe_load(text) == {"serving_max_batched_tokens": None, "serving_max_concurrency": 128}
    assert "# This candidate met the SLA up to 16 req/s" in text and "# The current settings met it up to 8 req/s." in text


def test_goodputs_within_the_tolerance_are_equal_and_the_fewest_changes_win():
    tried = [{"candidate": dict(BASE, serving_max_concurrency=128), "result": load_result(16)},
             {"candidate": BASE, "result": load_result(16)}]
    # the changed candidate's goodput 1 % higher: noise, the baseline is kept
    tried[0]["result"]["phases"][-1]["sla"]["goodput_rps"] *= 1.01
    choice = tuning.choose(tried, BASE)
    assert choice["best"] is tried[1] and [r["changes"] for r in choice["ranking"]][0] == {"serving_max_concurrency": 128}
    text = tuning.suggestion(choice, tuning.check_sla(SLA), {})
    assert yaml.safe_load(text) == BASE
    tried[0]["result"]["phases"][-1]["sla"]["goodput_rps"] *= 1.1  # 11 % more: a real gain
    assert tuning.choose(tried, BASE)["best"] is tried[0]


def test_a_phase_without_figures_misses_by_the_most():
    empty = {"phases": [{"rate": 4.0, "sla": {"met": False, "criteria": [dict(SLA[0], value_ms=None)]}}],
             "max_rate_meeting_sla": None}
    tried = [{"candidate": dict(BASE, serving_max_concurrency=128), "result": empty},
             {"candidate": dict(BASE, serving_max_concurrency=64), "result": load_result(0)}]
    assert tuning.choose(tried, BASE)["best"] is tried[1]


def test_the_sla_argument_keeps_every_digit():
    sla = tuning.check_sla([{"metric": "e2el", "percentile": 99.9, "bound_ms": 1234567}])
    assert tuning.sla_argument(sla) == "e2el:p99.9:1234567ms" and lg.parse_sla(tuning.sla_argument(sla)) == sla


def test_when_no_candidate_meets_the_sla_the_closest_is_named_and_nothing_suggested():
    tried = [{"candidate": BASE, "result": load_result(0)},
             {"candidate": dict(BASE, serving_max_concurrency=128), "result": load_result(0)}]
    choice = tuning.choose(tried, BASE)
    assert not choice["met"] and choice["best"] is tried[0]  # equal misses: the fewest changes
    with pytest.raises(tuning.TuningError, match=r"no candidate met the SLA \(ttft:p99:500ms,tpot:p99:50ms\)"):
        tuning.suggestion(choice, tuning.check_sla(SLA), {})
    assert tuning.closest(tried[0]["result"], tuning.check_sla(SLA)) == (
        "at 4 req/s: TTFT P99 900 ms against 500 ms; TPOT P99 20 ms against 50 ms")
    assert tuning.closest({"phases": []}, []) == "no rate was loaded"


@pytest.mark.parametrize("rates, message", [
    ([], "tune_rates must be a non-empty list"),
    ([1, 0], "tune_rates: 0 is not a request rate"),
    ([-2], "tune_rates: -2 is not a request rate"),
    (["fast"], "tune_rates: \"fast\" is not a request rate"),
    ([2, 2], "tune_rates lists a rate twice"),
])
def test_a_bad_rate_is_named(rates, message):
    with pytest.raises(tuning.TuningError, match=re.escape(message)):
        tuning.check_rates(rates)


def test_rates_are_loaded_lowest_first():
    assert tuning.check_rates([4, 0.5, 2]) == [0.5, 2.0, 4.0]


LOAD = {"restart_s": 100, "request_timeout_s": 30, "requests_per_rate": 20, "rate_duration_s": 15, "warmup_requests": 4}


def test_every_problem_of_the_inputs_is_listed_with_its_variable():
    found = tuning.inputs([{"metric": "ttfb", "percentile": 99, "bound_ms": 500}], {}, [0], 10, LOAD)["problems"]
    assert [p.split(" ")[0].split(".")[0].split("[")[0].rstrip(":") for p in found] == [
        "tune_sla", "tune_space", "tune_rates"]
    right = tuning.inputs(SLA, {"serving_max_concurrency": [64]}, [1, 2], 600, LOAD)
    assert right == {"problems": [], "per_candidate_s": 100 + (4 + 30) + (15 + 30) + (10 + 30),
                     "sla_argument": "ttft:p99:500ms,tpot:p99:50ms"}
    short = tuning.inputs(SLA, {"serving_max_concurrency": [64]}, [1, 2], 278, LOAD)["problems"]
    assert short == ["tune_time_budget_s 278 is too small for one candidate, which takes up to 279 s here with the "
                     "run's setup (the engine's restart and readiness, then each rate's arrivals and their answers): "
                     "give at least 279"]
    # -e tune_time_budget_s=279 arrives as text
    assert tuning.inputs(SLA, {"serving_max_concurrency": [64]}, [1, 2], "279", LOAD)["problems"] == []
    assert tuning.inputs(SLA, {"serving_max_concurrency": [64]}, [1, 2], "an hour", LOAD)["problems"] == [
        "tune_time_budget_s must be a number of seconds (at least 279 here); got 'an hour'"]


def test_a_candidate_is_named_by_what_it_changes():
    assert tuning.label(BASE, BASE) == "current settings"
    assert tuning.label(dict(BASE, serving_max_concurrency=1, serving_chunked_prefill={"chunk_tokens": 512}), BASE) == (
        'chunked_prefill={"chunk_tokens": 512}, max_concurrency=1')
