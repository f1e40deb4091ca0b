# -*- coding: utf-8 -*-
"""weights_convert as Ansible runs it: the build and the tokenizer check in a real child
interpreter (the engine venv of LLMOPS_TEST_VENV_PYTHON), on a source holding the real Qwen3-4B
config and tokenizer (tests/fixtures/qwen) and a tiny safetensors file. weights.convert's own cases
are in tests/unit/plugins/module_utils/test_weights_convert.py."""
import json
import os
import shutil
import sys

import pytest
import yaml

from ansible_collections.llmops.serving.plugins.module_utils import venv_runner, weights
from ansible_collections.llmops.serving.plugins.modules import weights_convert as module

from .module_harness import documented_by, module_utils_helper, no_site_python, run_module, subprocess_run_command

safetensors_bytes = module_utils_helper("safetensors_file").safetensors_bytes

VENV_PY = os.environ.get("LLMOPS_TEST_VENV_PYTHON")
needs_venv = pytest.mark.skipif(not VENV_PY, reason="set LLMOPS_TEST_VENV_PYTHON to a venv with transformers")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
QWEN3 = os.path.join(REPO, "tests", "fixtures", "qwen", "Qwen3-4B")
TEMPLATE = os.path.join(REPO, "templates", "chat", "qwen3.jinja")
RETURNS = yaml.safe_load(module.RETURN)
documented = documented_by(RETURNS)
UNTOUCHED = "Nothing served was changed."


CHECK_MSG = "failure, or in check mode when the folder would be built"


def nothing_runs(self, argv, **kwargs):
    raise AssertionError("the venv was started: %s" % argv[:2])


def run(monkeypatch, args, run_command=subprocess_run_command, check_mode=False):
    """The result; fail_json's carries failed=True."""
    return run_module(monkeypatch, module, args, run_command, check_mode, failed_key=True)[1]


@pytest.fixture
def src(tmp_path):
    """Qwen3-4B's config and tokenizer with two small tensors as its weights."""
    folder = tmp_path / "src"
    shutil.copytree(QWEN3, str(folder))
    (folder / "model.safetensors").write_bytes(safetensors_bytes(
        {"model.norm.weight": ([4], "BF16", b"\0" * 8), "lm_head.weight": ([2, 4], "BF16", b"\1" * 16)}))
    return str(folder)


# ------------------------------------------------------------------------------ with the engine venv
@needs_venv
def test_build_proves_the_real_tokenizer_and_a_rerun_changes_nothing(monkeypatch, src, tmp_path):
    args = {"python": VENV_PY, "src": src, "dest": str(tmp_path / "served"), "template_path": TEMPLATE,
            "template": "qwen3"}
    built = run(monkeypatch, args)
    assert not built.get("failed"), built.get("msg")
    expected = documented("success", "when built", "when built or current")
    assert set(built) - {"changed"} == expected, set(built) ^ expected
    assert built["changed"] is True and built["manifest_recorded"] is True
    assert built["source_format"] == "safetensors" and built["tensors"] == 2 and built["merged_dtype"] is None
    assert built["special_token_ids"]["<|im_start|>"] == 151644 and built["special_token_ids"]["<think>"] == 151667
    assert os.path.realpath(args["dest"]) == built["build"] and built["previous_build"] is None
    with open(os.path.join(args["dest"], "tokenizer_config.json")) as f, open(TEMPLATE) as t:
        assert json.load(f)["chat_template"] == t.read()
    # check mode on the same recipe: current, no venv started, nothing cleaned
    again = run(monkeypatch, args, nothing_runs, check_mode=True)
    assert set(again) - {"changed"} == documented("success", "when built or current")
    assert again == {"changed": False, "path": args["dest"], "digest": built["digest"], "manifest_recorded": False,
                     "build": built["build"], "cleaned": []}


# ------------------------------------------------------------------------------ without it
def test_check_mode_at_first_sight_records_no_manifest(monkeypatch, src, tmp_path):
    dest = str(tmp_path / "served")
    result = run(monkeypatch, {"python": "/venv/bin/python", "src": src, "dest": dest}, nothing_runs, check_mode=True)
    assert set(result) - {"changed"} == documented("success", CHECK_MSG)
    assert result == {"changed": True, "path": dest, "digest": None, "manifest_recorded": False,
                      "msg": "would record the source's manifest and build %s" % dest}
    assert not os.path.exists(os.path.join(src, weights.MANIFEST)) and not os.path.exists(dest)


def answering_the_check(self, argv, data=None, **kwargs):
    """The build really runs (a safetensors source needs only the standard library); the tokenizer
    check answers as the engine venv does for Qwen3-4B."""
    if "_result = check(**_args)" in argv[2]:
        answer = {"ok": True, "problems": [], "special_token_ids": {"<|im_start|>": 151644}, "renders": {}}
        return 0, "\n" + venv_runner.MARKER + json.dumps(answer) + "\n", ""
    return subprocess_run_command(self, argv, data)


def test_check_mode_names_why_it_would_rebuild(monkeypatch, src, tmp_path):
    dest = str(tmp_path / "served")
    built = run(monkeypatch, {"python": sys.executable, "src": src, "dest": dest}, answering_the_check)
    assert built["changed"] is True and built["manifest_recorded"] is True
    result = run(monkeypatch, {"python": sys.executable, "src": src, "dest": dest, "template_path": TEMPLATE},
                 nothing_runs, check_mode=True)
    assert result == {"changed": True, "path": dest, "digest": result["digest"], "manifest_recorded": False,
                      "msg": "would build %s: not built from this source/adapter/template" % dest}
    assert result["digest"] != built["digest"] and os.path.realpath(dest) == built["build"]


FAILURE_PROBLEMS = ("failure, when the source is incomplete or differs from its manifest, or the built folder's "
                    "tokenizer check fails")
FAILURE_RC = "failure, when I(python) cannot run the build or the tokenizer check"


def test_a_build_whose_tokenizer_check_fails_returns_what_return_documents(monkeypatch, src, tmp_path):
    dest = str(tmp_path / "served")
    answer = {"ok": False, "problems": ["<think> is absent from the vocabulary (expected id 151667)"],
              "renders": {"multi-turn": "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"}}

    def failing_check(self, argv, data=None, **kwargs):
        if "_result = check(**_args)" in argv[2]:
            return 0, "\n" + venv_runner.MARKER + json.dumps(answer) + "\n", ""
        return subprocess_run_command(self, argv, data)

    result = run(monkeypatch, {"python": sys.executable, "src": src, "dest": dest}, failing_check)
    assert result["failed"] and set(result) - {"failed"} == documented(
        CHECK_MSG, FAILURE_PROBLEMS, "failure, when the built folder's tokenizer check fails")
    assert result["problems"] == answer["problems"] and result["renders"] == answer["renders"]
    assert not os.path.lexists(dest)


def _no_config(src):
    os.remove(os.path.join(src, "config.json"))


def _missing_shard(src):
    with open(os.path.join(src, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": {"model.norm.weight": "model.safetensors",
                                  "lm_head.weight": "model-00002-of-00002.safetensors"}}, f)


BAD_INPUTS = [
    # (id, source change, args over the defaults ({python}: one without transformers, {tmp}), message parts)
    ("source without config.json", _no_config, {}, ["source {src} holds no config.json: not a model folder"]),
    ("source missing a shard", _missing_shard, {},
     ["source {src} is incomplete (copy the missing files, or fetch again):\n  model.safetensors.index.json names "
      "shard model-00002-of-00002.safetensors, which is missing\n" + UNTOUCHED]),
    ("adapter that is no PEFT adapter", None, {"adapter": "{tmp}"},
     ["adapter {tmp} has no adapter_config.json: not a PEFT adapter folder"]),
    ("python without transformers", None, {},
     ["tokenizer_check.check failed under {python} (rc=1):", "No module named 'transformers'",
      "; python must be an engine venv's interpreter (torch, safetensors, transformers)"]),
    ("unknown template family", None, {"template": "qwen4"},
     ["value of template must be one of: qwen2.5, qwen3, got: qwen4"]),
    ("unknown verify mode", None, {"verify": "fast"}, ["value of verify must be one of: cheap, full, got: fast"]),
]


@pytest.mark.parametrize("change,over,parts", [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_fail_naming_the_option_and_serve_nothing(monkeypatch, src, tmp_path, change, over, parts):
    fmt = {"python": no_site_python(tmp_path), "src": src, "tmp": str(tmp_path)}
    if change:
        change(src)
    args = dict({"python": fmt["python"], "src": src, "dest": str(tmp_path / "served")},
                **dict((k, v.format(**fmt)) for k, v in over.items()))
    result = run(monkeypatch, args)
    assert result["failed"]
    for part in parts:
        assert part.format(**fmt) in result["msg"]
    assert set(result) - {"failed"} <= documented(CHECK_MSG, FAILURE_PROBLEMS, FAILURE_RC)
    if "problems" in result:
        assert result["problems"] and all(p in result["msg"] for p in result["problems"])
    assert not os.path.lexists(str(tmp_path / "served"))


def test_documentation_matches_the_argument_spec():
    doc = yaml.safe_load(module.DOCUMENTATION)
    yaml.safe_load(module.EXAMPLES)
    assert set(doc["options"]) == set(module.ARGUMENT_SPEC)
    assert documented("success") == {"path", "digest", "manifest_recorded"}
    assert documented(CHECK_MSG, FAILURE_PROBLEMS, FAILURE_RC,
                      "failure, when the built folder's tokenizer check fails") == {"msg", "problems", "rc", "renders"}
    for name, spec in RETURNS.items():
        assert {"description", "returned", "type", "sample"} <= set(spec), name
