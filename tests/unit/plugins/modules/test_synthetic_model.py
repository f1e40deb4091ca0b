# -*- coding: utf-8 -*-
"""synthetic_model as Ansible runs it: the build in a real child interpreter (the engine venv of
LLMOPS_TEST_VENV_PYTHON), or, for what needs no torch, AnsibleModule.run_command answering like
synthetic.create does in that venv."""
import json
import os
import tempfile

import pytest
import yaml

from ansible_collections.llmops.serving.plugins.module_utils import synthetic, venv_runner
from ansible_collections.llmops.serving.plugins.modules import synthetic_model as module

from .module_harness import documented_by, no_site_python, run_module, subprocess_run_command

VENV_PY = os.environ.get("LLMOPS_TEST_VENV_PYTHON")
needs_venv = pytest.mark.skipif(not VENV_PY, reason="set LLMOPS_TEST_VENV_PYTHON to a venv with torch, transformers")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
RETURNS = yaml.safe_load(module.RETURN)
documented = documented_by(RETURNS)
CURRENT = documented("success", "when built or current")
BUILT = CURRENT | documented("when built")
CHECK_MSG = "failure, or in check mode when the model would be built"
# Qwen's added tokens follow the BPE vocabulary: with the default 1024 tokens <|endoftext|> is 998.
IDS = dict((t, 998 + i) for i, t in enumerate(synthetic.QWEN_SPECIAL_TOKENS))


def fake_create(self, argv, data=None, **kwargs):
    """What synthetic.create answers in the venv: a finished folder beside path, and its marker."""
    args = json.loads(data)
    tmp = tempfile.mkdtemp(prefix=".%s.tmp-" % os.path.basename(args["path"]), dir=os.path.dirname(args["path"]))
    marker = dict(params=args["params"], digest=synthetic.params_digest(args["params"]), parameters=92480,
                  special_token_ids=IDS)
    with open(os.path.join(tmp, synthetic.MARKER), "w") as f:
        json.dump(marker, f)
    return 0, "\n" + venv_runner.MARKER + json.dumps(dict(marker, tmp=tmp)) + "\n", ""


def nothing_runs(self, argv, **kwargs):
    raise AssertionError("the venv was started: %s" % argv[:2])


def run(monkeypatch, args, run_command, check_mode=False):
    """The result; fail_json's carries failed=True."""
    return run_module(monkeypatch, module, args, run_command, check_mode, failed_key=True)[1]


def beside(path):
    return sorted(n for n in os.listdir(os.path.dirname(path)) if n != "python")


# ------------------------------------------------------------------------------ with the engine venv
@needs_venv
def test_builds_a_real_model_once(monkeypatch, tmp_path):
    with open(os.path.join(REPO, "templates", "chat", "qwen3.jinja")) as f:
        template = f.read()
    args = {"python": VENV_PY, "path": str(tmp_path / "qwen3-tiny"), "chat_template": template}
    built = run(monkeypatch, args, subprocess_run_command)
    assert not built.get("failed"), built.get("msg")
    assert set(built) - {"changed"} == BUILT, set(built) ^ BUILT
    assert built["changed"] is True and built["special_token_ids"] == IDS
    assert built["previous_build"] is None and built["cleaned"] == []
    assert os.path.realpath(args["path"]) == built["build"]
    with open(os.path.join(args["path"], "config.json")) as f:
        config = json.load(f)
    assert config["architectures"] == ["Qwen3ForCausalLM"] and config["vocab_size"] == 1024
    assert config["num_hidden_layers"] == 2 and config["eos_token_id"] == IDS["<|im_end|>"]
    with open(os.path.join(args["path"], "tokenizer_config.json")) as f:
        assert json.load(f)["chat_template"] == template
    # the same parameters again: nothing is built, the marker answers
    again = run(monkeypatch, args, nothing_runs)
    assert again == {"changed": False, "path": args["path"], "parameters": built["parameters"],
                     "special_token_ids": IDS}


# ------------------------------------------------------------------------------ without it
def test_new_parameters_build_beside_the_served_one_and_keep_it(monkeypatch, tmp_path):
    path = str(tmp_path / "qwen3-tiny")
    first = run(monkeypatch, {"python": "/venv/bin/python", "path": path}, fake_create)
    leftover = tmp_path / ".qwen3-tiny.tmp-abc123"  # an interrupted build
    leftover.mkdir()
    second = run(monkeypatch, {"python": "/venv/bin/python", "path": path, "layers": 4}, fake_create)
    assert set(second) - {"changed"} == BUILT
    assert second["changed"] is True and second["build"] != first["build"]
    assert second["previous_build"] == first["build"] and second["cleaned"] == [str(leftover)]
    assert os.path.realpath(path) == second["build"] and os.path.isdir(first["build"])
    assert synthetic.read_marker(path)["params"]["layers"] == 4
    assert beside(path) == [".builds", "qwen3-tiny"]


CHECK_MODE = [
    # (id, args of the first (real) run, args of the check-mode run, changed)
    ("nothing built yet", None, {}, True),
    ("same parameters", {}, {}, False),
    ("another seed", {}, {"seed": 1}, True),
]


@pytest.mark.parametrize("first,over,changed", [c[1:] for c in CHECK_MODE], ids=[c[0] for c in CHECK_MODE])
def test_check_mode_predicts_and_builds_nothing(monkeypatch, tmp_path, first, over, changed):
    args = {"python": "/venv/bin/python", "path": str(tmp_path / "qwen3-tiny")}
    if first is not None:
        run(monkeypatch, dict(args, **first), fake_create)
    before = beside(args["path"])
    result = run(monkeypatch, dict(args, **over), nothing_runs, check_mode=True)
    assert result["changed"] is changed and result["path"] == args["path"]
    if changed:
        assert set(result) - {"changed"} == documented("success", CHECK_MSG)
        assert result["msg"] == "would build the synthetic model"
    else:
        assert set(result) - {"changed"} == CURRENT
        assert result["parameters"] == 92480 and result["special_token_ids"] == IDS
    assert beside(args["path"]) == before


BAD_INPUTS = [
    # (id, args over the defaults ({python}: an interpreter without torch), check mode, message parts)
    ("vocabulary too small", {"vocab_size": 200}, False,
     ["vocab_size must be at least 282 (the 256 byte tokens and Qwen's 26 added tokens)"]),
    ("vocabulary too small, in check mode", {"vocab_size": 200}, True,
     ["vocab_size must be at least 282 (the 256 byte tokens and Qwen's 26 added tokens)"]),
    ("python without torch", {}, False,
     ["building the synthetic model failed; python must be an engine venv's interpreter "
      "(with torch, transformers, tokenizers). synthetic.create failed under {python} (rc=1):",
      "ModuleNotFoundError: No module named"]),
    ("unknown architecture", {"architecture": "LlamaForCausalLM"}, False,
     ["value of architecture must be one of: Qwen2ForCausalLM, Qwen3ForCausalLM, got: LlamaForCausalLM"]),
]


@pytest.mark.parametrize("over,check_mode,parts", [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_fail_naming_the_option_and_leave_nothing(monkeypatch, tmp_path, over, check_mode, parts):
    python = no_site_python(tmp_path)
    result = run(monkeypatch, dict({"python": python, "path": str(tmp_path / "qwen3-tiny")}, **over),
                 subprocess_run_command, check_mode)
    assert result.get("failed"), result
    for part in parts:
        assert part.format(python=python) in result["msg"]
    assert set(result) - {"failed"} <= documented(CHECK_MSG, "failure, when I(python) cannot run the build")
    assert beside(str(tmp_path / "qwen3-tiny")) == []


def test_documentation_matches_the_argument_spec():
    doc = yaml.safe_load(module.DOCUMENTATION)
    yaml.safe_load(module.EXAMPLES)
    assert set(doc["options"]) == {"python", "path", "architecture", "vocab_size", "layers",
                                   "max_position_embeddings", "seed", "chat_template"}
    assert set(doc["options"]["architecture"]["choices"]) == set(synthetic.ARCHITECTURES)
    assert CURRENT == {"path", "parameters", "special_token_ids"}
    assert BUILT == CURRENT | {"build", "previous_build", "cleaned"}
    assert set(RETURNS) == BUILT | {"msg", "rc"}
    for name, spec in RETURNS.items():
        assert {"description", "returned", "type", "sample"} <= set(spec), name
