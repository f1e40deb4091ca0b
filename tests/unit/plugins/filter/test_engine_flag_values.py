# -*- coding: utf-8 -*-
"""engine_flag_values: the flags a unit gets from its stack profile and serving_engine_extra_args, with
the merge the engine_args module renders the unit from (what preflight's plan reads)."""
import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.serving.plugins.filter.engine_flag_values import engine_flag_values
from ansible_collections.llmops.serving.plugins.module_utils import engine_args as ea

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
SPEC = {"model_path": "/srv/models/m", "served_model_name": "m", "host": "127.0.0.1", "port": 8000}


def cpu_vllm():
    with open(os.path.join(ROOT, "stacks", "profiles.yml")) as handle:
        profiles = yaml.safe_load(handle)
    profiles = profiles.get("serving_stack_profiles", profiles)
    return profiles["cpu"]["engines"]["vllm"]


def test_an_instance_across_hosts_plans_with_its_pipeline_flags():
    vllm = cpu_vllm()
    # serving_spec_engine_args of a host whose instance spans hosts: args, then pipeline_args over them
    spanning = dict(vllm["args"], **vllm["pipeline_args"])
    assert engine_flag_values(vllm["args"], {}, "vllm")["enforce_eager"] is True
    values = engine_flag_values(spanning, {}, "vllm")
    assert values["enforce_eager"] is False and values["compilation_config"] == {"mode": 1, "backend": "eager"}


def test_the_values_are_those_the_unit_is_rendered_with():
    stack = {"enforce-eager": True, "max_total_tokens": 2048}
    extra = {"--enforce-eager": False, "disable-custom-all-reduce": True}
    values = engine_flag_values(stack, extra, "vllm")
    assert values == {"enforce_eager": False, "max_total_tokens": 2048, "disable_custom_all_reduce": True}
    flags = ea.render("vllm", "0.32.0", SPEC, extra_args=extra, stack_args=stack)["flags"]
    assert "--enforce-eager" not in flags and "--disable-custom-all-reduce" in flags


def test_a_flag_the_spec_owns_fails_with_the_translation_points_message():
    with pytest.raises(AnsibleFilterError) as err:
        engine_flag_values({}, {"max-model-len": 4096}, "vllm")
    assert "serving_engine_extra_args" in str(err.value) and "serving_max_model_len" in str(err.value)
