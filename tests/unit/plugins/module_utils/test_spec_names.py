# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_names: typos of the serving spec's variables are named with the option meant, read from the
role's real argument spec."""
import os

import pytest
import yaml

from ansible_collections.llmops.serving.plugins.module_utils.spec_names import describe, unknown_names

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
with open(os.path.join(ROOT, "roles", "serving_spec", "meta", "argument_specs.yml")) as f:
    KNOWN = sorted(yaml.safe_load(f)["argument_specs"]["spec"]["options"])


@pytest.mark.parametrize("typo, meant", [
    ("serving_modle", "serving_model"),
    ("serving_max_model_length", "serving_max_model_len"),
    ("serving_tensor_paralel", "serving_tensor_parallel"),
    ("serving_engines", "serving_engine"),
    ("serving_gpu_memory_utilization", "serving_gpu_memory_fraction"),
])
def test_a_typo_names_the_option_meant(typo, meant):
    assert unknown_names([typo, "serving_model"], KNOWN) == [(typo, meant)]
    assert describe(unknown_names([typo], KNOWN)) == (
        "%s is not a variable of the serving spec: did you mean %s?" % (typo, meant))


def test_known_options_published_facts_and_play_level_names_pass():
    names = KNOWN + ["serving_spec_python", "serving_spec_venv", "serving_hosts", "serving_stack_profiles"]
    assert unknown_names(names, KNOWN) == []


def test_names_outside_the_namespace_are_not_the_specs_business():
    assert unknown_names(["engine_restart", "model_weights_timeout_s", "server_name"], KNOWN) == []


def test_a_name_like_nothing_says_where_the_options_are():
    assert describe(unknown_names(["serving_zzz"], KNOWN)) == (
        "serving_zzz is not a variable of the serving spec: remove it, or see roles/serving_spec/meta/argument_specs.yml.")


def test_every_unknown_name_is_reported_once_in_order():
    out = unknown_names(["serving_modle", "serving_stak", "serving_modle"], KNOWN)
    assert out == [("serving_modle", "serving_model"), ("serving_stak", "serving_stack")]
