# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SLA-driven tuning: the SLA and the search space checked, the candidates of a grid and its
refinement, each candidate's cache key, the choice of the best one and the suggestion written for
review.

A candidate is a dict of serving-spec variables (serving_max_concurrency: 128, ...). Each is served
in turn and loaded at rising request rates by bench/loadgen/llmops_loadgen.py `open`; its result
is that run's JSON ({phases: [{rate, sla: {met, goodput_rps, criteria}}], max_rate_meeting_sla}).
Only the standard library: the functions run in filter plugins and modules alike.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import hashlib
import itertools
import json
import math

# bench/loadgen/llmops_loadgen.py's names (vllm bench serve's): a unit test keeps them equal.
SLA_METRICS = ("ttft", "tpot", "itl", "e2el")
# The spec variables a search may vary, and what each value must be.
SPACE = {
    "serving_max_concurrency": "an integer >= 1",
    "serving_max_batched_tokens": "an integer >= 1, or null (the engine's default)",
    "serving_block_size": "an integer >= 1, or null (the engine's default)",
    "serving_chunked_prefill": "true, false, null, or a dict of chunk_tokens / long_prefill_threshold",
    "serving_enable_prefix_caching": "true or false",
    "serving_kv_cache_dtype": "auto, fp8_e4m3 or fp8_e5m2",
    "serving_speculative": "null or a dict with method (ngram, mtp, eagle, eagle3) and tokens",
}
KV_DTYPES = ("auto", "fp8_e4m3", "fp8_e5m2")
# What the suggestion says it was measured on (keys of the context).
MEASURED_ON = ("host", "engine", "engine_version", "model")
SPECULATIVE_METHODS = ("ngram", "mtp", "eagle", "eagle3")


class TuningError(ValueError):
    """A tuning input the user must fix; the message names the variable."""


def _is_int(value, low=1):
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def check_sla(sla, variable="tune_sla"):
    """[{metric, percentile, bound_ms}] from [{metric, percentile, bound_ms}] (percentile in
    (0, 100], bound_ms above 0); raises TuningError naming the item."""
    if not isinstance(sla, list) or not sla:
        raise TuningError("%s must be a non-empty list of {metric, percentile, bound_ms}, e.g. "
                          "[{metric: ttft, percentile: 99, bound_ms: 500}]; got %s" % (variable, json.dumps(sla)))
    out = []
    for index, item in enumerate(sla):
        where = "%s[%d]" % (variable, index)
        if not isinstance(item, dict) or set(item) - {"metric", "percentile", "bound_ms"}:
            raise TuningError("%s must have exactly metric, percentile and bound_ms; got %s" % (where, json.dumps(item)))
        metric = item.get("metric")
        if metric not in SLA_METRICS:
            raise TuningError("%s.metric %r is not a metric the load generator measures: use one of %s"
                              % (where, metric, ", ".join(SLA_METRICS)))
        percentile = item.get("percentile")
        if isinstance(percentile, bool) or not isinstance(percentile, (int, float)) or not 0 < percentile <= 100:
            raise TuningError("%s.percentile must be a number in (0, 100] (99 for P99); got %r" % (where, percentile))
        bound = item.get("bound_ms")
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not bound > 0:
            raise TuningError("%s.bound_ms must be a number of milliseconds above 0; got %r" % (where, bound))
        out.append({"metric": metric, "percentile": float(percentile), "bound_ms": float(bound)})
    return out


def _exact(number):
    """A number as the load generator reads it back exactly (no exponent, no rounding)."""
    return str(int(number)) if float(number).is_integer() else repr(float(number))


def sla_argument(sla):
    """The load generator's --sla value for a checked SLA."""
    return ",".join("%s:p%s:%sms" % (c["metric"], _exact(c["percentile"]), _exact(c["bound_ms"])) for c in sla)


def check_rates(rates, variable="tune_rates"):
    """The request rates (requests/s) to load each candidate at: a non-empty list of numbers above 0,
    returned lowest first, each once."""
    if not isinstance(rates, list) or not rates:
        raise TuningError("%s must be a non-empty list of request rates (requests/s), e.g. [1, 2, 4]; got %s"
                          % (variable, json.dumps(rates)))
    for rate in rates:
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate < float("inf"):
            raise TuningError("%s: %s is not a request rate: each must be a number of requests per second above 0"
                              % (variable, json.dumps(rate)))
    if len(set(rates)) != len(rates):
        raise TuningError("%s lists a rate twice: %s" % (variable, json.dumps(rates)))
    return sorted(float(r) for r in rates)


# The run's own steps before the first candidate (reading the host, draining it) within the budget.
SETUP_S = 60


def candidate_bound(rates, load):
    """The most seconds one candidate takes: its restart with readiness, the warm-up at the first
    rate, then at each rate the arrivals (its requests or its duration, whichever ends first) and the
    answers of the last arrival. load: restart_s, request_timeout_s, requests_per_rate,
    rate_duration_s, warmup_requests."""
    rates = sorted(float(r) for r in rates)
    phases = sum(min(float(load["rate_duration_s"]), load["requests_per_rate"] / rate) + load["request_timeout_s"]
                 for rate in rates)
    warmup = (load["warmup_requests"] / rates[0] + load["request_timeout_s"]) if load["warmup_requests"] else 0
    return int(math.ceil(load["restart_s"] + warmup + phases))


def inputs(sla, space, rates, budget_s, load):
    """{problems, per_candidate_s, sla_argument}: every problem of the tuning inputs, each naming its
    variable ([] when they are right), the most one candidate takes (0 when the rates are wrong) and
    the load generator's --sla ('' when the SLA is wrong)."""
    found, bound, argument = [], 0, ""
    try:
        argument = sla_argument(check_sla(sla))
    except TuningError as e:
        found.append(str(e))
    for check, args in ((check_space, (space,)), (check_rates, (rates,))):
        try:
            check(*args)
        except TuningError as e:
            found.append(str(e))
    if not any(p.startswith("tune_rates") for p in found):
        bound = candidate_bound(rates, load)
        # -e tune_time_budget_s=7200 arrives as text
        if isinstance(budget_s, str) and budget_s.strip().replace(".", "", 1).isdigit():
            budget_s = float(budget_s)
        try:
            check_budget(budget_s, bound + SETUP_S)
        except TuningError as e:
            found.append(str(e))
    return {"problems": found, "per_candidate_s": bound, "sla_argument": argument}


def label(candidate, baseline):
    """A candidate's short name: what it changes from the baseline, or 'current settings'."""
    diff = changes(candidate, baseline)
    if not diff:
        return "current settings"
    return ", ".join("%s=%s" % (k.replace("serving_", ""), json.dumps(v, sort_keys=True)) for k, v in diff.items())


def _value_problem(name, value):
    """Why value cannot be a value of name in the search space, or None."""
    if name == "serving_max_concurrency":
        ok = _is_int(value)
    elif name in ("serving_max_batched_tokens", "serving_block_size"):
        ok = value is None or _is_int(value)
    elif name == "serving_chunked_prefill":
        ok = value is None or isinstance(value, bool) or (
            isinstance(value, dict) and value and set(value) <= {"chunk_tokens", "long_prefill_threshold"}
            and all(_is_int(v) for v in value.values()))
    elif name == "serving_enable_prefix_caching":
        ok = isinstance(value, bool)
    elif name == "serving_kv_cache_dtype":
        ok = value in KV_DTYPES
    else:
        ok = value is None or (isinstance(value, dict) and value.get("method") in SPECULATIVE_METHODS
                               and _is_int(value.get("tokens", 1)))
    return None if ok else "%r is not %s" % (value, SPACE[name])


def check_space(space, variable="tune_space"):
    """The search space ({spec variable: [values]}) checked: known variables, each with at least one
    value of the right kind and no value twice; raises TuningError naming the variable."""
    if not isinstance(space, dict) or not space:
        raise TuningError("%s must name at least one spec variable with its values, e.g. "
                          "{serving_max_batched_tokens: [2048, 8192]}; got %s" % (variable, json.dumps(space)))
    for name in sorted(space):
        if name not in SPACE:
            close = difflib.get_close_matches(name, sorted(SPACE), n=1, cutoff=0.6)
            raise TuningError("%s.%s cannot be tuned%s; the variables a search may vary are %s"
                              % (variable, name, (" (did you mean %s?)" % close[0]) if close else "",
                                 ", ".join(sorted(SPACE))))
        values = space[name]
        if not isinstance(values, list) or not values:
            raise TuningError("%s.%s must be a non-empty list of values; got %s" % (variable, name, json.dumps(values)))
        for value in values:
            problem = _value_problem(name, value)
            if problem:
                raise TuningError("%s.%s: %s" % (variable, name, problem))
        if len(set(json.dumps(v, sort_keys=True) for v in values)) != len(values):
            raise TuningError("%s.%s lists a value twice: %s" % (variable, name, json.dumps(values)))
    return space


def grid(space, baseline):
    """The candidates of the space's grid, each the baseline (the current spec values of the
    space's variables) with one combination applied; the baseline first, each candidate once."""
    names = sorted(space)
    out = [dict(baseline)]
    for combination in itertools.product(*(space[name] for name in names)):
        candidate = dict(baseline)
        candidate.update(zip(names, combination))
        if candidate not in out:
            out.append(candidate)
    return out


def refine(space, baseline, best):
    """The second, finer round: for each integer variable of the space, the midpoints between the
    best candidate's value and its neighbours in the space's sorted values, the rest as in best."""
    out = []
    for name in sorted(space):
        values = sorted(v for v in space[name] if _is_int(v))
        value = best.get(name)
        if value not in values or len(values) < 2:
            continue
        index = values.index(value)
        for neighbour in values[max(0, index - 1):index] + values[index + 1:index + 2]:
            middle = (value + neighbour) // 2
            if middle not in (value, neighbour):
                candidate = dict(best)
                candidate[name] = middle
                if candidate not in out and candidate != baseline:
                    out.append(candidate)
    return out


def candidate_key(candidate, context):
    """The cache key of a candidate's result: the spec it is served with (context's spec, the other
    serving_* inputs, with the candidate's values applied) and what else decides the figures
    (engine, version, model, host, load settings), so a changed input never reuses an old result
    and the same settings reached through another search space do. The SLA is no part of it: each
    run holds a cached result to its own SLA (the load generator's judge)."""
    rest = dict(context)
    spec = dict(rest.pop("spec", None) or {})
    spec.update(candidate)
    text = json.dumps({"spec": spec, "context": rest}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def check_budget(budget_s, needed_s, variable="tune_time_budget_s"):
    """The budget must hold the run's setup and at least one candidate (its restart, readiness and
    load phases)."""
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)):
        raise TuningError("%s must be a number of seconds (at least %d here); got %r" % (variable, needed_s, budget_s))
    if budget_s < needed_s:
        raise TuningError("%s %s is too small for one candidate, which takes up to %d s here with the run's setup "
                          "(the engine's restart and readiness, then each rate's arrivals and their answers): give at "
                          "least %d" % (variable, _exact(budget_s), needed_s, needed_s))


def _peak(result):
    """(highest rate that met the SLA or 0, goodput there or 0) of a candidate's load result."""
    best = result.get("max_rate_meeting_sla")
    if best is None:
        return 0.0, 0.0
    phase = next(p for p in result["phases"] if p["rate"] == best)
    return float(best), float(phase["sla"]["goodput_rps"] or 0.0)


def changes(candidate, baseline):
    """{variable: value} where candidate differs from the baseline."""
    return dict((k, v) for k, v in sorted(candidate.items()) if baseline.get(k) != v)


# Goodputs this close (relative) are the same measurement, and the fewer changes win.
GOODPUT_TOLERANCE = 0.03


def closest(result, sla):
    """How a result missed the SLA at its lowest rate, in words: each criterion's value and bound."""
    phases = result.get("phases") or []
    if not phases:
        return "no rate was loaded"
    phase = phases[0]
    criteria = (phase.get("sla") or {}).get("criteria") or []
    words = []
    for c in criteria:
        value = c.get("value_ms")
        shown = "no answer" if not isinstance(value, (int, float)) or math.isnan(value) else "%.0f ms" % value
        words.append("%s P%g %s against %g ms" % (c["metric"].upper(), c["percentile"], shown, c["bound_ms"]))
    return "at %g req/s: %s" % (phase["rate"], "; ".join(words) or "no figures")


def _miss(result):
    """How far the lowest rate missed the SLA: its worst criterion's value over its bound (inf
    when it has no value)."""
    phases = result.get("phases") or []
    criteria = ((phases[0].get("sla") or {}).get("criteria") or []) if phases else []
    ratios = []
    for c in criteria:
        value = c.get("value_ms")
        ok = isinstance(value, (int, float)) and not math.isnan(value)
        ratios.append(value / c["bound_ms"] if ok else float("inf"))
    return max(ratios or [float("inf")])


def choose(tried, baseline):
    """The best of tried [{candidate, result}]: the highest rate that met the SLA, then the goodput
    there (within GOODPUT_TOLERANCE counted equal), then the fewest changes from the baseline.
    Returns {met, best, baseline, ranking}; when no candidate met the SLA, best is the one whose
    lowest rate missed it by the least."""
    ranked = sorted(tried, key=lambda t: (-_peak(t["result"])[0], -_peak(t["result"])[1],
                                          bool(t["result"].get("failed")), len(changes(t["candidate"], baseline))))
    base = next((t for t in tried if t["candidate"] == baseline), None)
    met = [t for t in ranked if _peak(t["result"])[0] > 0]
    if met:
        peak, goodput = _peak(met[0]["result"])
        level = [t for t in met if _peak(t["result"])[0] == peak
                 and _peak(t["result"])[1] >= goodput * (1 - GOODPUT_TOLERANCE)]
        best = min(level, key=lambda t: len(changes(t["candidate"], baseline)))
    else:
        best = min(ranked, key=lambda t: (_miss(t["result"]), len(changes(t["candidate"], baseline)))) if ranked else None
    return {"met": bool(met), "best": best, "baseline": base,
            "ranking": [dict(changes=changes(t["candidate"], baseline), peak_rate=_peak(t["result"])[0],
                             goodput_rps=_peak(t["result"])[1], failed=t["result"].get("failed") or "")
                        for t in ranked]}


def suggestion(choice, sla, context):
    """The group_vars/host_vars text suggested for review: the best candidate's variables, with what
    was measured as comments. Raises TuningError when no candidate met the SLA."""
    if not choice["met"]:
        raise TuningError("no candidate met the SLA (%s); nothing is suggested" % sla_argument(sla))
    best, base = choice["best"], choice["baseline"]
    peak, goodput = _peak(best["result"])
    bounds = ", ".join("%s P%g <= %g ms" % (c["metric"].upper(), c["percentile"], c["bound_ms"]) for c in sla)
    lines = ["---",
             "# Suggested by llmops.serving tune.yml: review it, then put it in your inventory.",
             "# SLA: %s" % bounds,
             "# Measured on %s: %s %s serving %s." % tuple(context.get(k) for k in MEASURED_ON),
             "# This candidate met the SLA up to %g req/s (goodput %.2f req/s)." % (peak, goodput)]
    if base is not None:
        base_peak = _peak(base["result"])[0]
        lines.append(("# The current settings met it up to %g req/s." % base_peak) if base_peak
                     else "# The current settings met it at none of the rates tried.")
    for name, value in sorted(best["candidate"].items()):
        lines.append("%s: %s" % (name, json.dumps(value)))
    return "\n".join(lines) + "\n"
