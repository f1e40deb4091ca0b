# -*- coding: utf-8 -*-
"""tokenizer_check as Ansible runs it: the check in a real child interpreter (the engine venv of
LLMOPS_TEST_VENV_PYTHON) on the real Qwen tokenizers of tests/fixtures/qwen, or, for what needs no
transformers, AnsibleModule.run_command answering like that venv."""
import json
import os

import pytest
import yaml

from ansible_collections.llmops.serving.plugins.module_utils import venv_runner
from ansible_collections.llmops.serving.plugins.modules import tokenizer_check as module

from .module_harness import documented_by, no_site_python, run_module, subprocess_run_command

VENV_PY = os.environ.get("LLMOPS_TEST_VENV_PYTHON")
needs_venv = pytest.mark.skipif(not VENV_PY, reason="set LLMOPS_TEST_VENV_PYTHON to a venv with transformers")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
QWEN = os.path.join(REPO, "tests", "fixtures", "qwen")
TEMPLATES = os.path.join(REPO, "templates", "chat")
RETURNS = yaml.safe_load(module.RETURN)
documented = documented_by(RETURNS)
ALWAYS = documented("always")
# what a check that ran returns, and what it adds once the tokenizer loaded and a template was found
RAN = ALWAYS | documented("when the check ran (always but when I(python) cannot run it)")
LOADED = RAN | documented("when the tokenizer loaded and a chat template was found (always on success)")
QWEN3_IDS = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<tool_call>": 151657,
             "</tool_call>": 151658, "<tool_response>": 151665, "</tool_response>": 151666, "<think>": 151667,
             "</think>": 151668}


def run(monkeypatch, args, run_command=subprocess_run_command, check_mode=False):
    """The result; fail_json's carries failed=True."""
    return run_module(monkeypatch, module, args, run_command, check_mode, failed_key=True)[1]


def nothing_runs(self, argv, **kwargs):
    raise AssertionError("the venv was started again: %s" % argv[:2])


# ------------------------------------------------------------------------------ with the engine venv
@needs_venv
def test_real_qwen3_tokenizer_is_proven_and_the_answer_kept_for_check_mode(monkeypatch, tmp_path):
    args = {"python": VENV_PY, "tokenizer_path": os.path.join(QWEN, "Qwen3-4B"),
            "template_path": os.path.join(TEMPLATES, "qwen3.jinja"), "cache_dir": str(tmp_path / "cache")}
    first = run(monkeypatch, args)
    assert not first.get("failed"), first.get("msg")
    assert set(first) - {"changed"} == LOADED, set(first) ^ LOADED
    assert first["changed"] is False and first["cached"] is False and first["problems"] == []
    assert first["template"] == "qwen3" and first["special_token_ids"] == first["expected_ids"] == QWEN3_IDS
    assert sorted(first["renders"]) == ["multi-turn", "multi-turn, enable_thinking=false", "tool call"]
    assert first["msg"].startswith("qwen3 template proven: <|endoftext|>=151643, <|im_start|>=151644, ")
    # check mode reads the kept answer and starts no interpreter
    again = run(monkeypatch, args, run_command=nothing_runs, check_mode=True)
    assert again["cached"] is True and dict(again, cached=False) == first


@needs_venv
def test_qwen3_template_on_a_qwen25_tokenizer_fails_with_the_tokens_it_lacks(monkeypatch):
    # Qwen2.5's vocabulary has no <tool_response> or <think>, which the Qwen3 template writes.
    tokenizer = os.path.join(QWEN, "Qwen2.5-32B-Instruct")
    result = run(monkeypatch, {"python": VENV_PY, "tokenizer_path": tokenizer,
                               "template_path": os.path.join(TEMPLATES, "qwen3.jinja")})
    assert result["failed"]
    assert result["msg"].startswith("the tokenizer or chat template is wrong for %s:\n- " % tokenizer)
    assert "<think> is absent from the vocabulary (expected id 151667)" in result["problems"]
    assert "<tool_response> is absent from the vocabulary (expected id 151665)" in result["problems"]
    assert set(result) - {"failed"} == LOADED and result["template"] == "qwen3"


# ------------------------------------------------------------------------------ without it
def venv_answer(answer):
    """run_command answering like the venv does: the check's result after the runner's marker."""
    calls = []

    def run_command(self, argv, data=None, binary_data=False, environ_update=None, **kwargs):
        calls.append(json.loads(data))
        return 0, "transformers noise\n" + venv_runner.MARKER + json.dumps(answer) + "\n", ""
    return run_command, calls


PROVEN = {"ok": True, "problems": [], "template": "qwen3", "real_qwen": True, "tokenizer_length": 151669,
          "special_token_ids": QWEN3_IDS, "expected_ids": QWEN3_IDS, "renders": {"multi-turn": "..."}}


def fake_venv(tmp_path):
    """A venv the probe cache can key on (its pyvenv.cfg); its python never runs here."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return str(tmp_path / "venv" / "bin" / "python")


def test_check_mode_checks_but_keeps_no_answer(monkeypatch, tmp_path):
    args = {"python": fake_venv(tmp_path), "tokenizer_path": os.path.join(QWEN, "Qwen3-4B"), "template": "qwen3",
            "cache_dir": str(tmp_path / "cache")}
    run_command, calls = venv_answer(PROVEN)
    checked = run(monkeypatch, args, run_command, check_mode=True)
    assert checked["changed"] is False and checked["cached"] is False and set(checked) - {"changed"} == LOADED
    assert not os.path.exists(str(tmp_path / "cache"))
    assert calls == [{"tokenizer_path": args["tokenizer_path"], "template_path": None, "template_name": "qwen3",
                      "real_qwen": None}]
    run(monkeypatch, args, run_command)
    assert len(os.listdir(str(tmp_path / "cache"))) == 1
    assert run(monkeypatch, args, nothing_runs, check_mode=True)["cached"] is True


NOT_CHECKED = [
    # (id, the venv's answer when the check stops before the ids: see tokenizer_check.check)
    ("tokenizer does not load", {"ok": False, "template": None, "problems": [
        "the tokenizer in /models/x does not load: Can't load tokenizer for '/models/x'."]}),
    ("no chat template", {"ok": False, "template": "qwen3", "problems": [
        "no chat template: neither a template file nor tokenizer_config.json's chat_template"]}),
]


@pytest.mark.parametrize("answer", [c[1] for c in NOT_CHECKED], ids=[c[0] for c in NOT_CHECKED])
def test_a_check_that_stops_before_the_ids_returns_what_return_documents(monkeypatch, tmp_path, answer):
    args = {"python": fake_venv(tmp_path), "tokenizer_path": os.path.join(QWEN, "Qwen3-4B")}
    result = run(monkeypatch, args, venv_answer(answer)[0])
    assert result["failed"] and set(result) - {"failed"} == RAN, set(result) ^ RAN
    assert result["problems"] == answer["problems"] and result["template"] == answer["template"]
    assert result["msg"] == "the tokenizer or chat template is wrong for %s:\n- %s" % (
        args["tokenizer_path"], answer["problems"][0])


def test_a_python_that_cannot_run_the_check_returns_what_return_documents(monkeypatch, tmp_path):
    result = run(monkeypatch, {"python": no_site_python(tmp_path), "tokenizer_path": os.path.join(QWEN, "Qwen3-4B")})
    assert result["failed"] and result["rc"] == 1
    assert set(result) - {"failed"} == ALWAYS | documented("failure, when I(python) cannot run the check")


BAD_INPUTS = [
    # (id, args (python "{host}": an interpreter without transformers), message parts)
    ("python without transformers", {"python": "{host}"},
     ["the tokenizer check could not run; python must be an engine venv's interpreter (with transformers).",
      "No module named 'transformers'"]),
    ("unknown template family", {"python": "{host}", "template": "qwen4"},
     ["value of template must be one of: qwen2.5, qwen3, got: qwen4"]),
    ("no tokenizer_path", {"python": "{host}", "tokenizer_path": None}, ["missing required arguments: tokenizer_path"]),
]


@pytest.mark.parametrize("over,parts", [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_fail_naming_the_option(monkeypatch, tmp_path, over, parts):
    args = {"tokenizer_path": os.path.join(QWEN, "Qwen3-4B")}
    args.update((k, v.format(host=no_site_python(tmp_path)) if isinstance(v, str) else v) for k, v in over.items())
    args = dict((k, v) for k, v in args.items() if v is not None)
    result = run(monkeypatch, args)
    assert result["failed"]
    for part in parts:
        assert part in result["msg"]


def test_documentation_matches_the_argument_spec():
    doc = yaml.safe_load(module.DOCUMENTATION)
    yaml.safe_load(module.EXAMPLES)
    assert set(doc["options"]) == {"python", "tokenizer_path", "template_path", "template", "real_qwen", "cache_dir"}
    assert doc["options"]["template"]["choices"] == ["qwen2.5", "qwen3"]
    assert ALWAYS == {"msg"}
    assert RAN == {"msg", "problems", "template", "cached"}
    assert LOADED == RAN | {"real_qwen", "tokenizer_length", "special_token_ids", "expected_ids", "renders"}
    assert set(RETURNS) == LOADED | {"rc"}
    for name, spec in RETURNS.items():
        assert {"description", "returned", "type", "sample"} <= set(spec), name
