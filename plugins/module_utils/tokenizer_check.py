# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prove a tokenizer + chat template pair by token ids.

`check()` runs in an engine venv's interpreter (it imports transformers lazily, inside the
function); `expected_ids`, `chatml_expected`, `diff` and `special_token_problems` are pure and unit
tested without transformers. This file's source is sent to the child by venv_runner, so it imports
only the standard library at module level.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import json
import re

# Qwen's added tokens in id order from <|endoftext|> (151643). Qwen2.5 has the first 22, Qwen3 all 26.
QWEN_ADDED = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
    "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
    "<tool_response>", "</tool_response>", "<think>", "</think>",
]
QWEN_ENDOFTEXT_ID = 151643
# Tokens each template writes (and so must be single ids).
TEMPLATE_TOKENS = {
    # Qwen2.5 writes <tool_response> as plain text: its vocabulary has no such token.
    "qwen2.5": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"],
    "qwen3": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
              "<tool_response>", "</tool_response>", "<think>", "</think>"],
}

SYSTEM = "You are a helpful assistant."
MULTI_TURN = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "请总结这份报告。"},
    {"role": "assistant", "content": "The report covers latency and memory."},
    {"role": "user", "content": "Explain the error <b>briefly</b>."},
]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
TOOL_CALL = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "{\"temp_c\": 21}"},
]


def expected_ids(vocab_ids, names, real_qwen):
    """Expected id of each special token: real Qwen ids, or Qwen's ORDER from <|endoftext|>'s id.

    vocab_ids maps token -> id as the tokenizer reports (None when absent).
    """
    base = QWEN_ENDOFTEXT_ID if real_qwen else vocab_ids.get("<|endoftext|>")
    if base is None:
        return dict((n, None) for n in names)
    return dict((n, base + QWEN_ADDED.index(n)) for n in names)


def special_token_problems(vocab_ids, expected):
    problems = []
    for name in sorted(expected, key=lambda n: QWEN_ADDED.index(n) if n in QWEN_ADDED else 99):
        got, want = vocab_ids.get(name), expected[name]
        if got is None:
            problems.append("%s is absent from the vocabulary (expected id %s)" % (name, want))
        elif want is not None and got != want:
            problems.append("%s has id %s, expected %s" % (name, got, want))
    return problems


def chatml_expected(messages, thinking_block=False):
    """ChatML rendering of plain (no tools) messages with a generation prompt: what both templates must emit."""
    out = []
    for m in messages:
        out.append("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m["content"]))
    out.append("<|im_start|>assistant\n")
    if thinking_block:
        out.append("<think>\n\n</think>\n\n")
    return "".join(out)


def diff(expected, got, label="rendered prompt"):
    lines = difflib.unified_diff(expected.splitlines(True), got.splitlines(True),
                                 "expected " + label, "template's " + label, n=2)
    return "".join(lines)


def token_count_problems(text, ids, token_ids):
    """Each special token written in text must appear as its one id, as often as in the text."""
    problems = []
    for name, tid in sorted(token_ids.items()):
        if tid is None:
            continue
        n_text = text.count(name)
        n_ids = sum(1 for i in ids if i == tid)
        if n_text != n_ids:
            problems.append("%s appears %d times in the prompt but its id %d is encoded %d times "
                            "(the tokenizer splits it into plain text)" % (name, n_text, tid, n_ids))
    return problems


def check(tokenizer_path, template_path=None, template_name=None, real_qwen=None, enable_thinking=None):
    """Load the tokenizer, render probes with the template the engine uses, check ids. Runs in the venv."""
    from transformers import AutoTokenizer

    result = dict(ok=False, problems=[], template=template_name)
    try:
        tok = AutoTokenizer.from_pretrained(tokenizer_path, trust_remote_code=False)
    except Exception as e:
        result["problems"].append("the tokenizer in %s does not load: %s" % (tokenizer_path, str(e).splitlines()[0] if str(e) else type(e).__name__))
        return result
    template = None
    if template_path:
        with open(template_path) as f:
            template = f.read()
    if template is None:
        template = getattr(tok, "chat_template", None)
    if not template:
        result["problems"].append("no chat template: neither a template file nor tokenizer_config.json's chat_template")
        return result
    if template_name not in TEMPLATE_TOKENS:
        template_name = "qwen3" if "<think>" in template or "enable_thinking" in template else "qwen2.5"
    result["template"] = template_name
    if real_qwen is None:
        real_qwen = len(tok) > 151000
    names = TEMPLATE_TOKENS[template_name]
    vocab = tok.get_vocab()
    vocab_ids = dict((n, vocab.get(n)) for n in QWEN_ADDED)
    expected = expected_ids(vocab_ids, names, real_qwen)
    result.update(real_qwen=real_qwen, tokenizer_length=len(tok),
                  special_token_ids=dict((n, vocab_ids.get(n)) for n in names), expected_ids=expected)
    problems = special_token_problems(vocab_ids, expected)
    # each special token alone must encode to exactly its one id
    for n in names:
        if vocab_ids.get(n) is None:
            continue
        enc = tok.encode(n, add_special_tokens=False)
        if enc != [vocab_ids[n]]:
            problems.append("%s encodes to %s, not to its one id %s" % (n, enc, vocab_ids[n]))
    thinking = template_name == "qwen3"
    renders = {}
    probes = [("multi-turn", MULTI_TURN, None, {})]
    if thinking:
        probes.append(("multi-turn, enable_thinking=false", MULTI_TURN, None, dict(enable_thinking=False)))
    probes.append(("tool call", TOOL_CALL, TOOLS, {}))
    for label, msgs, tools, kw in probes:
        try:
            text = tok.apply_chat_template(msgs, tools=tools, chat_template=template, tokenize=False,
                                           add_generation_prompt=True, **kw)
        except Exception as e:
            problems.append("the chat template does not render the %s probe: %s: %s" % (label, type(e).__name__, e))
            continue
        renders[label] = text
        ids = tok(text, add_special_tokens=False)["input_ids"]
        problems.extend("%s probe: %s" % (label, p) for p in token_count_problems(
            text, ids, dict((n, vocab_ids.get(n)) for n in names)))
        if label.startswith("multi-turn"):
            want = chatml_expected(MULTI_TURN, thinking_block=bool(kw))
            if text != want:
                problems.append("the %s probe renders differently from ChatML:\n%s" % (label, diff(want, text)))
        else:
            tool_checks = [
                ("<tools>\n" + json.dumps(TOOLS[0], ensure_ascii=False), "the tool's JSON inside <tools>"),
                ("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                 "the assistant's call inside <tool_call>"),
                ("<|im_start|>user\n<tool_response>\n{\"temp_c\": 21}\n</tool_response><|im_end|>",
                 "the tool result as a user turn inside <tool_response>"),
            ]
            for needle, what in tool_checks:
                if needle not in _norm_json(text):
                    problems.append("tool call probe: the rendering lacks %s; expected to find\n%s\nin\n%s"
                                    % (what, _indent(needle), _indent(text)))
        if thinking and enable_thinking is not False and not kw and label == "multi-turn":
            if text.count("<think>") and not text.endswith("</think>\n\n"):
                problems.append("the qwen3 template opened <think> without closing it in the prompt")
    result["renders"] = renders
    result["problems"] = problems
    result["ok"] = not problems
    return result


def _norm_json(text):
    # tojson in transformers' sandbox may sort or space keys differently from json.dumps: normalise spacing.
    return re.sub(r'":\s+', '": ', text)


def _indent(text):
    return "\n".join("    | " + line for line in text.splitlines())
