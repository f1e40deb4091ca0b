# -*- coding: utf-8 -*-
"""engine_flag_problems: what serving_spec's validation refuses before a host changes, from the
same translation table that renders the flags."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.serving.plugins.filter.engine_flag_problems import engine_flag_problems
from ansible_collections.llmops.serving.plugins.module_utils import engine_args as ea
from ansible_collections.llmops.serving.plugins.module_utils import engine_flags as ef

SPEC = {"model_path": "/srv/models/m", "served_model_name": "m", "host": "10.0.0.5", "port": 8000,
        "tls_certfile": "/etc/llmops/tls/engine.crt", "tls_keyfile": "/etc/llmops/tls/engine.key"}


@pytest.mark.parametrize("engine,version", [("vllm", "0.8.5.post1"), ("vllm", "0.33.0"), ("sglang", "0.5.10.post1"),
                                            ("sglang", "0.5.23")])
def test_versions_with_the_flags_have_no_problem(engine, version):
    assert engine_flag_problems(engine, version, ["tls_certfile", "tls_keyfile"]) == []
    ea.render(engine, version, SPEC)


def test_a_version_without_the_flags_is_refused_as_rendering_would_refuse_it():
    problems = engine_flag_problems("sglang", "0.4.6.post5", ["tls_certfile"])
    assert len(problems) == 1
    with pytest.raises(ef.EngineArgsError) as err:
        ea.render("sglang", "0.4.6.post5", SPEC)
    assert problems[0] == err.value.msg
    assert "serving_engine_tls" in problems[0] and "0.5.10" in problems[0] and "serving_engine_tls: false" in problems[0]


def test_no_keys_no_problems_and_unknown_names_are_errors():
    assert engine_flag_problems("sglang", "0.4.6.post5", []) == []
    with pytest.raises(AnsibleFilterError, match="engine_flag_problems"):
        engine_flag_problems("sglang", "0.5.23", ["no_such_key"])
    with pytest.raises(AnsibleFilterError, match="engine_flag_problems"):
        engine_flag_problems("sglang", "not-a-version", ["tls_certfile"])


def test_values_are_checked_before_the_versions():
    settings = {"max_batched_tokens": None, "priority_scheduling": True, "speculative": {"method": "ngram"},
                "long_context": None}
    assert engine_flag_problems("sglang", "0.5.23", settings) == []
    old = engine_flag_problems("sglang", "0.4.6.post5", settings)
    assert [p.split(":")[0] for p in old] == ["serving_priority_scheduling", "serving_speculative"], old
    bad = engine_flag_problems("vllm", "0.32.0", dict(settings, long_context={"factor": 4.0}))
    assert len(bad) == 1 and bad[0].startswith("serving_long_context (spec.long_context) must be null or"), bad
