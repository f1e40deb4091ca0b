# -*- coding: utf-8 -*-
"""The tool-call and reasoning parsers the engine registry picks, run as the installed engine's own
parser classes (vLLM's ToolParserManager and ReasoningParserManager, SGLang's FunctionCallParser
and ReasoningParser) in the engine venvs `make unit` names (LLMOPS_TEST_VLLM_PYTHON /
LLMOPS_TEST_SGLANG_PYTHON).

The JSON format's model output is what the shipped chat templates themselves render for an
assistant turn with tool calls (the text the model is trained to write); the XML format's is the
Qwen3-Coder / Qwen3.5 chat template's rendering of the same call (Qwen/Qwen3-Coder-30B-A3B-Instruct,
chat_template.jinja: <tool_call><function=NAME><parameter=KEY>VALUE</parameter>...)."""
import json
import os
import re
import subprocess

import jinja2
import pytest

from ansible_collections.llmops.serving.plugins.module_utils import engines

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
TOKENIZER = os.path.join(ROOT, "tests", "fixtures", "qwen", "Qwen3-4B")
SGL_OVERLAY = os.path.join(ROOT, "tests", "fixtures", "sgl_kernel_cpu_shim", "overlay")
VLLM_PY = os.environ.get("LLMOPS_TEST_VLLM_PYTHON")
SGLANG_PY = os.environ.get("LLMOPS_TEST_SGLANG_PYTHON")
CALL = {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}
XML = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n"
       "</parameter>\n</function>\n</tool_call>")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]

# What both vLLM scripts start with: the request, its tokenizer and vLLM's request class (moved in
# later versions).
VLLM_PRELUDE = r'''
import json, sys
from transformers import AutoTokenizer
try:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
except ImportError:
    from vllm.entrypoints.openai.protocol import ChatCompletionRequest
req = json.loads(sys.stdin.read())
tok = AutoTokenizer.from_pretrained(req["tokenizer"])
'''

VLLM_SCRIPT = VLLM_PRELUDE + r'''
try:
    from vllm.tool_parsers import ToolParserManager
except ImportError:
    from vllm.entrypoints.openai.tool_parsers import ToolParserManager
request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}], tools=req["tools"])
out = []
for name, text in req["cases"]:
    cls = ToolParserManager.get_tool_parser(name)
    try:
        parser = cls(tok, tools=request.tools)
    except TypeError:
        parser = cls(tok)
    res = parser.extract_tool_calls(text, request)
    out.append({"content": res.content or "",
                "calls": [[c.function.name, json.loads(c.function.arguments)] for c in res.tool_calls]})
print("@@" + json.dumps(out))
'''

SGLANG_SCRIPT = r'''
import json, sys
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.entrypoints.openai.protocol import Tool
req = json.loads(sys.stdin.read())
tools = [Tool(**t) for t in req["tools"]]
out = []
for name, text in req["cases"]:
    normal, calls = FunctionCallParser(tools=tools, tool_call_parser=name).parse_non_stream(text)
    out.append({"content": normal or "", "calls": [[c.name, json.loads(c.parameters)] for c in calls]})
print("@@" + json.dumps(out))
'''


def rendered_tool_call(template):
    """The assistant turn the shipped chat template renders for one tool call, without the
    <|im_start|>assistant header and <|im_end|>: the model output a parser receives."""
    with open(os.path.join(ROOT, "templates", "chat", template + ".jinja")) as f:
        text = jinja2.Environment().from_string(f.read()).render(
            messages=[{"role": "user", "content": "Weather in Paris?"},
                      {"role": "assistant", "content": "Let me check.", "tool_calls": [{"function": CALL}]}],
            tools=TOOLS, add_generation_prompt=False)
    turn = text.split("<|im_start|>assistant\n", 1)[1].split("<|im_end|>", 1)[0]
    assert "<tool_call>" in turn, turn
    return turn


def installed_version(python, names):
    code = ("import importlib.metadata as m\nfor n in %r:\n    try:\n        print(m.version(n)); break\n"
            "    except Exception: pass" % (names,))
    return subprocess.check_output([python, "-c", code], universal_newlines=True).strip()


def in_engine_venv(engine, script, req):
    """Run one of the scripts above in the engine's venv with `req` on stdin; its printed result."""
    python = VLLM_PY if engine == "vllm" else SGLANG_PY
    env = dict(os.environ, **({"PYTHONPATH": SGL_OVERLAY} if engine == "sglang" else {}))
    proc = subprocess.run([python, "-c", script], input=json.dumps(dict(req, tokenizer=TOKENIZER)),
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@@")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][2:])


def engine_info_of_venv(engine):
    """The registry's entry at the version installed in the engine venv (skips without a venv)."""
    python = VLLM_PY if engine == "vllm" else SGLANG_PY
    if not python:
        pytest.skip("set LLMOPS_TEST_%s_PYTHON to the engine venv's python (make unit does)" % engine.upper())
    return engines.engine_info(engine, installed_version(python, engines.REGISTRY[engine]["distributions"]))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_registry_parser_reads_the_calls_the_templates_write(engine):
    parsers = engine_info_of_venv(engine)["tool_call_parsers"]
    cases = [[parsers["json"], rendered_tool_call(t)] for t in ("qwen2.5", "qwen3")]
    cases.append([parsers["xml"], XML])
    cases.append([parsers["json"], "It is sunny in Paris."])
    # the XML the real Qwen3.5/3.6 template writes (templates/chat/qwen3.5.jinja), thinking block and all
    cases.append([parsers["xml"], rendered_tool_call("qwen3.5")])
    results = in_engine_venv(engine, VLLM_SCRIPT if engine == "vllm" else SGLANG_SCRIPT, {"tools": TOOLS, "cases": cases})
    for (parser, text), res in zip(cases[:3], results):
        assert res["calls"] == [[CALL["name"], CALL["arguments"]]], (engine, parser, text, res)
    # the text before the call stays the answer's content (Qwen3's empty <think></think> block of
    # a last turn with it: only a reasoning parser takes that out)
    assert results[0]["content"].strip() == "Let me check."
    assert results[1]["content"].replace("<think>\n\n</think>\n\n", "").strip() == "Let me check."
    # no tool call in the output: all of it is the answer's content
    assert results[3] == {"content": "It is sunny in Paris.", "calls": []}
    assert results[4]["calls"] == [[CALL["name"], CALL["arguments"]]], (engine, results[4])
    # (the empty thinking block stays content without a reasoning parser; vLLM's qwen3_coder drops its </think>)
    assert re.sub(r"</?think>", "", results[4]["content"]).strip() == "Let me check.", results[4]


VLLM_REASONING_SCRIPT = VLLM_PRELUDE + r"""
from vllm.reasoning import ReasoningParserManager
request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}])
parser = ReasoningParserManager.get_reasoning_parser(req["parser"])(tok)
extract = getattr(parser, "extract_reasoning", None) or parser.extract_reasoning_content
print("@@" + json.dumps([list(extract(text, request)) for text in req["texts"]]))
"""

SGLANG_REASONING_SCRIPT = r"""
import json, sys
from sglang.srt.parser.reasoning_parser import ReasoningParser
req = json.loads(sys.stdin.read())
out = []
for text in req["texts"]:
    reasoning, content = ReasoningParser(model_type=req["parser"]).parse_non_stream(text)
    out.append([reasoning, content])
print("@@" + json.dumps(out))
"""


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_registry_reasoning_parser_splits_the_think_block(engine):
    parser = engine_info_of_venv(engine)["reasoning_parsers"]["think"]
    texts = ["<think>\nParis is in France; check the forecast.\n</think>\n\nIt is sunny in Paris.",
             # Qwen3's template opens the block in the prompt when thinking: the output starts inside it
             "Paris is in France.\n</think>\n\nIt is sunny in Paris."]
    results = in_engine_venv(engine, VLLM_REASONING_SCRIPT if engine == "vllm" else SGLANG_REASONING_SCRIPT,
                             {"parser": parser, "texts": texts})
    assert results[0][0].strip() == "Paris is in France; check the forecast."
    assert results[0][1].strip() == "It is sunny in Paris."
    if engine == "vllm":
        assert results[1][0].strip() == "Paris is in France." and results[1][1].strip() == "It is sunny in Paris."
    else:
        # SGLang's qwen3 parser needs the opening tag in the output (its qwen3-thinking parser is
        # the one for templates that open the block in the prompt): no reasoning split here
        assert not (results[1][0] or "").strip() and "It is sunny in Paris." in results[1][1]
