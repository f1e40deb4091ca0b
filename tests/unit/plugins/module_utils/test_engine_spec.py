# -*- coding: utf-8 -*-
"""engine_spec: the spec's schema and checks. Flags the spec owns cannot come in through extra or
stack args, and bad values fail naming their serving_* variable."""

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import engine_args as ea
from ansible_collections.llmops.serving.plugins.module_utils import engine_flags as ef

from engine_cases import PY, spec


# ---------------------------------------------------------------------------------------------
# spec-owned flags cannot be overridden; bad input names the variable
# ---------------------------------------------------------------------------------------------
OVERRIDES = [
    ("vllm", "max-num-seqs", "serving_max_concurrency"),
    ("vllm", "max_num_seqs", "serving_max_concurrency"),
    ("vllm", "--tensor-parallel-size", "serving_tensor_parallel"),
    ("vllm", "tp", "serving_tensor_parallel"),
    ("vllm", "device-memory-utilization", "serving_gpu_memory_fraction"),
    ("vllm", "gpu-memory-utilization", "serving_gpu_memory_fraction"),
    ("vllm", "max-model-len", "serving_max_model_len"),
    ("vllm", "model", "serving_model"),
    ("vllm", "served-model-name", "serving_model.name"),
    ("vllm", "port", "serving_listen"),
    ("vllm", "no-enable-prefix-caching", "serving_enable_prefix_caching"),
    ("vllm", "disable-prefix-caching", "serving_enable_prefix_caching"),
    ("vllm", "trust-remote-code", "serving_trust_remote_code"),
    ("vllm", "chat-template", "serving_chat_template"),
    ("vllm", "dtype", "serving_dtype"),
    ("sglang", "max-running-requests", "serving_max_concurrency"),
    ("sglang", "tensor-parallel-size", "serving_tensor_parallel"),
    ("sglang", "tp-size", "serving_tensor_parallel"),
    ("sglang", "context-length", "serving_max_model_len"),
    ("sglang", "mem-fraction-static", "serving_gpu_memory_fraction"),
    ("sglang", "model", "serving_model"),
    ("sglang", "model-path", "serving_model"),
    ("sglang", "disable-radix-cache", "serving_enable_prefix_caching"),
    ("sglang", "enable-metrics", "serving_enable_metrics"),
    ("sglang", "host", "serving_listen"),
]


@pytest.mark.parametrize("engine,key,variable", OVERRIDES)
def test_extra_args_may_not_override_spec_flags(engine, key, variable):
    version = "0.32.0" if engine == "vllm" else "0.5.23"
    with pytest.raises(ef.EngineArgsError) as err:
        ea.build(engine, version, spec(), extra_args={key: 1}, validate_flags=False, python=PY)
    assert "serving_engine_extra_args" in err.value.msg
    assert variable in err.value.msg


def test_stack_args_may_not_override_spec_flags_either():
    with pytest.raises(ef.EngineArgsError) as err:
        ea.build("sglang", "0.5.23", spec(), stack_args={"context-length": 512}, validate_flags=False, python=PY)
    assert "stack profile args" in err.value.msg and "serving_max_model_len" in err.value.msg


@pytest.mark.parametrize("key", ["config", "--config"])
def test_config_files_are_refused(key):
    with pytest.raises(ef.EngineArgsError) as err:
        ea.build("vllm", "0.32.0", spec(), extra_args={key: "/tmp/x.yaml"}, validate_flags=False, python=PY)
    assert "--config" in err.value.msg and "serving_engine_extra_args" in err.value.msg


@pytest.mark.parametrize("field,value,variable", [
    ("port", 0, "serving_listen"),
    ("port", "8000", "serving_listen"),
    ("tensor_parallel", 0, "serving_tensor_parallel"),
    ("gpu_memory_fraction", 1.5, "serving_gpu_memory_fraction"),
    ("max_concurrency", -1, "serving_max_concurrency"),
    ("max_model_len", True, "serving_max_model_len"),
    ("served_model_name", "two words", "serving_model.name"),
    ("model_path", "", "serving_model"),
    ("enable_prefix_caching", "yes", "serving_enable_prefix_caching"),
])
def test_bad_spec_values_name_the_variable(field, value, variable):
    with pytest.raises(ef.EngineArgsError) as err:
        ea.render("vllm", "0.32.0", spec(**{field: value}))
    assert variable in err.value.msg


def test_unknown_spec_key_and_engine():
    with pytest.raises(ef.EngineArgsError, match="unknown keys max_num_seqs"):
        ea.render("vllm", "0.32.0", spec(max_num_seqs=4))
    with pytest.raises(ef.EngineArgsError, match="serving_engine must be one of"):
        ea.render("tgi", "1.0", spec())
    with pytest.raises(ef.EngineArgsError, match="not a version"):
        ea.render("vllm", "latest", spec())
