# -*- coding: utf-8 -*-
"""tokenizer_check: pure id/rendering logic everywhere; the real Qwen2.5-32B-Instruct and Qwen3-4B
tokenizers (tests/fixtures/qwen) when LLMOPS_TEST_VENV_PYTHON names a venv with transformers."""
import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import tokenizer_check as tc
from ansible_collections.llmops.serving.plugins.module_utils import venv_runner

VENV_PY = os.environ.get("LLMOPS_TEST_VENV_PYTHON")
needs_venv = pytest.mark.skipif(not VENV_PY, reason="set LLMOPS_TEST_VENV_PYTHON to a venv with transformers")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIX = os.path.join(REPO, "tests", "fixtures", "qwen")
TPL = os.path.join(REPO, "templates", "chat")


def test_real_qwen_expected_ids():
    exp = tc.expected_ids({}, tc.TEMPLATE_TOKENS["qwen3"], real_qwen=True)
    assert exp["<|endoftext|>"] == 151643 and exp["<|im_start|>"] == 151644 and exp["<|im_end|>"] == 151645
    assert exp["<think>"] == 151667 and exp["</think>"] == 151668 and exp["<tool_call>"] == 151657


def test_synthetic_ids_follow_qwens_order():
    ids = dict((t, 998 + i) for i, t in enumerate(tc.QWEN_ADDED))
    exp = tc.expected_ids(ids, tc.TEMPLATE_TOKENS["qwen3"], real_qwen=False)
    assert tc.special_token_problems(ids, exp) == []
    ids["<|im_end|>"], ids["<|im_start|>"] = ids["<|im_start|>"], ids["<|im_end|>"]
    assert tc.special_token_problems(ids, exp) == ["<|im_start|> has id 1000, expected 999", "<|im_end|> has id 999, expected 1000"]


def test_absent_token_is_named():
    ids = dict((t, 151643 + i) for i, t in enumerate(tc.QWEN_ADDED))
    ids["<think>"] = None
    probs = tc.special_token_problems(ids, tc.expected_ids(ids, tc.TEMPLATE_TOKENS["qwen3"], True))
    assert probs == ["<think> is absent from the vocabulary (expected id 151667)"]


def test_chatml_and_diff():
    want = tc.chatml_expected([{"role": "user", "content": "hi"}], thinking_block=True)
    assert want == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    d = tc.diff(want, want.replace("<|im_end|>", "<|endoftext|>"))
    assert "-hi<|im_end|>\n" in d and "+hi<|endoftext|>\n" in d


def test_token_split_into_text_is_caught():
    probs = tc.token_count_problems("<|im_start|>user", [27, 91, 318], {"<|im_start|>": 151644})
    assert probs and "splits it into plain text" in probs[0]


def run_command(argv, data=None, binary_data=False, environ_update=None):
    p = subprocess.run(argv, input=data, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check(**kw):
    return venv_runner.call(run_command, VENV_PY, tc, "check", kw)


@needs_venv
@pytest.mark.parametrize("folder,template", [("Qwen2.5-32B-Instruct", "qwen2.5"), ("Qwen3-4B", "qwen3")])
def test_real_qwen_tokenizers_pass(folder, template):
    r = check(tokenizer_path=os.path.join(FIX, folder), template_path=os.path.join(TPL, template + ".jinja"))
    assert r["problems"] == [] and r["real_qwen"] and r["template"] == template
    assert r["special_token_ids"]["<|im_start|>"] == 151644 and r["special_token_ids"]["<|im_end|>"] == 151645
    if template == "qwen3":
        assert r["special_token_ids"]["<think>"] == 151667
        assert r["renders"]["multi-turn, enable_thinking=false"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert "<tool_call>\n{\"name\": \"get_weather\"" in r["renders"]["tool call"]


@needs_venv
def test_wrong_template_fails_with_a_diff(tmp_path):
    bad = tmp_path / "bad.jinja"
    bad.write_text(open(os.path.join(TPL, "qwen2.5.jinja")).read().replace("'<|im_end|>' + '\\n'", "'<|endoftext|>' + '\\n'"))
    r = check(tokenizer_path=os.path.join(FIX, "Qwen2.5-32B-Instruct"), template_path=str(bad), template_name="qwen2.5")
    text = "\n".join(r["problems"])
    assert "renders differently from ChatML" in text and "+" in text and "<|endoftext|>" in text


@needs_venv
def test_template_that_does_not_render(tmp_path):
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in messages %}{{ m.content | no_such_filter }}{% endfor %}")
    r = check(tokenizer_path=os.path.join(FIX, "Qwen3-4B"), template_path=str(bad), template_name="qwen3")
    assert any("does not render" in p for p in r["problems"])


@needs_venv
def test_special_token_absent_from_vocab(tmp_path):
    d = tmp_path / "tok"
    shutil.copytree(os.path.join(FIX, "Qwen3-4B"), str(d))
    cfg = json.load(open(str(d / "tokenizer_config.json")))
    cfg["added_tokens_decoder"] = dict((k, v) for k, v in cfg["added_tokens_decoder"].items() if v["content"] != "<think>")
    json.dump(cfg, open(str(d / "tokenizer_config.json"), "w"))
    r = check(tokenizer_path=str(d), template_path=os.path.join(TPL, "qwen3.jinja"), template_name="qwen3")
    assert "<think> is absent from the vocabulary (expected id 151667)" in r["problems"]
