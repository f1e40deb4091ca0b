# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.serving
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one translation point from the engine-neutral serving spec to engine argv.

render()   spec + stack args + extra args -> argv, env, API-key variable for one engine version.
validate() checks that argv against the engine installed in a venv: its own argument parser
           (vLLM: make_arg_parser on a FlexibleArgumentParser; SGLang: ServerArgs.add_cli_args),
           or, when that parser cannot be built, the flags listed by the CLI's --help.
build()    both, as the engine_args module runs them.

Only the standard library and two sibling module_utils are used here, so tests/unit imports this
file directly and the code runs on any Python 3.8+ that Ansible runs modules with. Commands are
run through a `runner` callable (argv, stdin_text, env) -> (rc, stdout, stderr): the module passes
one built on AnsibleModule.run_command, tests pass fakes.

Two programs that run elsewhere are real Python files beside this one, so linters, sanity tests and
coverage see them; their source text is read at run time (from the AnsiballZ zip inside a module
run, through the import system's loader) and sent on:
  engine_probe.py   run as `python -c SOURCE` by the engine venv's interpreter (validate());
  sglang_launch.py  installed into the SGLang venv as llmops_sglang_launch.py (launcher_info()).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import inspect
import json
import os
import re
import subprocess

# Imported (not only read) so that AnsiballZ packs them with this file.
from ansible_collections.llmops.serving.plugins.module_utils import engine_probe, engines, sglang_launch
from ansible_collections.llmops.serving.plugins.module_utils.engines import ENGINES, REGISTRY


# The serving_* variable each spec key comes from: named in every error about that key.
SPEC_VARIABLES = {
    "model_path": "serving_model",
    "served_model_name": "serving_model.name",
    "host": "serving_listen",
    "port": "serving_listen",
    "tensor_parallel": "serving_tensor_parallel",
    "max_model_len": "serving_max_model_len",
    "gpu_memory_fraction": "serving_gpu_memory_fraction",
    "max_concurrency": "serving_max_concurrency",
    "chat_template": "serving_chat_template",
    "enable_prefix_caching": "serving_enable_prefix_caching",
    "enable_metrics": "serving_enable_metrics",
    "trust_remote_code": "serving_trust_remote_code",
    "dtype": "serving_dtype",
    "api_key": "serving_api_key",
}

SPEC_DEFAULTS = {
    "model_path": None,
    "served_model_name": None,
    "host": None,
    "port": None,
    "tensor_parallel": 1,
    "max_model_len": None,
    "gpu_memory_fraction": None,
    "max_concurrency": None,
    "chat_template": None,
    "enable_prefix_caching": True,
    "enable_metrics": True,
    "trust_remote_code": False,
    "dtype": None,
}
REQUIRED_SPEC = ("model_path", "served_model_name", "host", "port")

# ---------------------------------------------------------------------------------------------
# The translation table. Per engine and spec key, a list of (first engine version, rule); the
# last row whose version is <= the engine version applies. A rule is the flag (str), or for
# booleans a pair (flag when true, flag when false), None meaning "no flag". Rows for versions
# that were never installed here are best effort; validate() against the installed engine is
# the gate either way.
# ---------------------------------------------------------------------------------------------
FLAG_TABLE = {
    "vllm": {
        "served_model_name": [((0, 0, 0), "--served-model-name")],
        "host": [((0, 0, 0), "--host")],
        "port": [((0, 0, 0), "--port")],
        "tensor_parallel": [((0, 0, 0), "--tensor-parallel-size")],
        "max_model_len": [((0, 0, 0), "--max-model-len")],
        "gpu_memory_fraction": [((0, 0, 0), "--gpu-memory-utilization")],
        "max_concurrency": [((0, 0, 0), "--max-num-seqs")],
        "chat_template": [((0, 0, 0), "--chat-template")],
        # V0 engines: prefix caching off by default, store_true flag only. From 0.9 a
        # BooleanOptionalAction (--no-...); from 0.33 every negative boolean is spelled --disable-...
        "enable_prefix_caching": [
            ((0, 0, 0), ("--enable-prefix-caching", None)),
            ((0, 9, 0), ("--enable-prefix-caching", "--no-enable-prefix-caching")),
            ((0, 33, 0), ("--enable-prefix-caching", "--disable-prefix-caching")),
        ],
        # vLLM always serves /metrics; there is no flag to turn it on or off.
        "enable_metrics": [((0, 0, 0), (None, None))],
        "trust_remote_code": [((0, 0, 0), ("--trust-remote-code", None))],
        "dtype": [((0, 0, 0), "--dtype")],
    },
    "sglang": {
        "served_model_name": [((0, 0, 0), "--served-model-name")],
        "host": [((0, 0, 0), "--host")],
        "port": [((0, 0, 0), "--port")],
        "tensor_parallel": [((0, 0, 0), "--tp-size")],
        "max_model_len": [((0, 0, 0), "--context-length")],
        "gpu_memory_fraction": [((0, 0, 0), "--mem-fraction-static")],
        "max_concurrency": [((0, 0, 0), "--max-running-requests")],
        "chat_template": [((0, 0, 0), "--chat-template")],
        # The radix (prefix) cache is on by default and has only a disable flag.
        "enable_prefix_caching": [((0, 0, 0), (None, "--disable-radix-cache"))],
        "enable_metrics": [((0, 0, 0), ("--enable-metrics", None))],
        "trust_remote_code": [((0, 0, 0), ("--trust-remote-code", None))],
        "dtype": [((0, 0, 0), "--dtype")],
    },
}

# How each engine starts (entry module, words before the flags, how the model is passed), the
# variable its API key is read from and the distributions that carry it: the engine registry's.
ENTRY_TABLE = dict((name, [(engines.version_tuple(first), entry) for first, entry in REGISTRY[name]["entry"]])
                   for name in REGISTRY)
API_KEY_ENV = dict((name, REGISTRY[name]["api_key_env"]) for name in REGISTRY)
DISTRIBUTIONS = dict((name, REGISTRY[name]["distributions"]) for name in REGISTRY)

# Spec-owned flags and every spelling that reaches the same setting: extra/stack args may not
# carry them. The installed parser adds any alias it knows (same argparse dest) at validation.
SPEC_OWNED = {
    "vllm": {
        "model": "model_path", "model-tag": "model_path",
        "served-model-name": "served_model_name",
        "host": "host", "port": "port",
        "tensor-parallel-size": "tensor_parallel", "tp": "tensor_parallel",
        "max-model-len": "max_model_len",
        "gpu-memory-utilization": "gpu_memory_fraction",
        "device-memory-utilization": "gpu_memory_fraction",
        "max-num-seqs": "max_concurrency",
        "chat-template": "chat_template",
        "enable-prefix-caching": "enable_prefix_caching",
        "no-enable-prefix-caching": "enable_prefix_caching",
        "disable-prefix-caching": "enable_prefix_caching",
        "trust-remote-code": "trust_remote_code",
        "no-trust-remote-code": "trust_remote_code",
        "dtype": "dtype",
        "api-key": "api_key",
    },
    "sglang": {
        "model-path": "model_path", "model": "model_path",
        "served-model-name": "served_model_name",
        "host": "host", "port": "port",
        "tp-size": "tensor_parallel", "tensor-parallel-size": "tensor_parallel", "tp": "tensor_parallel",
        "context-length": "max_model_len",
        "mem-fraction-static": "gpu_memory_fraction",
        "max-running-requests": "max_concurrency",
        "chat-template": "chat_template",
        "disable-radix-cache": "enable_prefix_caching",
        "enable-metrics": "enable_metrics",
        "trust-remote-code": "trust_remote_code",
        "dtype": "dtype",
        "api-key": "api_key",
    },
}

# Flags that would take the argv out of the spec's hands altogether.
FORBIDDEN_EXTRA = {
    "config": "an engine config file would bypass the serving_* spec and this validation; "
              "put the flags themselves in serving_engine_extra_args",
    "help": "not a serving flag",
}

# Flags whose list values are given by repeating the flag (argparse `append`); every other list
# value is written once, space-separated (argparse nargs '+' / '*').
REPEATED_LIST_FLAGS = {"vllm": {"middleware"}, "sglang": set()}

# Spellings from old docs, field reports and older versions, with the accepted replacement.
# Used as the suggestion when the replacement is accepted by the installed engine; difflib's
# closest match otherwise.
KNOWN_RENAMES = {
    "vllm": {
        "--disable-log-requests": "--enable-log-requests",  # removed; request logging is off by default
        "--scheduler-policy": "--scheduling-policy",
        "--chunked-prefill-enabled": "--enable-chunked-prefill",
    },
    "sglang": {
        "--max-num-sequences": "--max-running-requests",
        "--max-num-seqs": "--max-running-requests",
        "--grammar-json-schema": "--grammar-backend",
        "--tensor-parallel": "--tp-size",
        "--max-model-len": "--context-length",
        "--gpu-memory-utilization": "--mem-fraction-static",
    },
}

VALIDATION_TIMEOUT = 900
RESULT_MARKER = engine_probe.RESULT_MARKER


class EngineArgsError(Exception):
    """Bad input or a flag the engine does not accept; the message says what to do."""

    def __init__(self, msg, **details):
        super(EngineArgsError, self).__init__(msg)
        self.msg = msg
        self.details = details


# ---------------------------------------------------------------------------------------------
# versions and table look-ups
# ---------------------------------------------------------------------------------------------
def parse_version(version):
    """'0.32.0+cpu' -> (0, 32, 0); '0.5.23.post1' -> (0, 5, 23); at least three numbers."""
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)", str(version))
    if not match:
        raise EngineArgsError("engine_version %r is not a version number (like 0.32.0)" % (version,))
    numbers = [int(part) for part in match.group(1).split(".")]
    while len(numbers) < 3:
        numbers.append(0)
    return tuple(numbers)


def base_version(version):
    """The release part of a version string, without local labels or post/dev suffixes."""
    return ".".join(str(n) for n in parse_version(version)[:3])


def _pick(rows, version):
    chosen = None
    for since, rule in rows:
        if version >= since:
            chosen = rule
    return chosen


def entry_for(engine, engine_version):
    return dict(_pick(ENTRY_TABLE[engine], parse_version(engine_version)))


def flag_table(engine, engine_version):
    """{spec key: rule} for one engine version."""
    version = parse_version(engine_version)
    return dict((key, _pick(rows, version)) for key, rows in FLAG_TABLE[engine].items())


# ---------------------------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------------------------
def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def normalize_spec(spec):
    """Spec with defaults filled in, checked; errors name the serving_* variable."""
    if not isinstance(spec, dict):
        raise EngineArgsError("spec must be a dict of the serving spec (model_path, served_model_name, host, port, ...)")
    unknown = sorted(set(spec) - set(SPEC_DEFAULTS))
    if unknown:
        raise EngineArgsError(
            "spec has unknown keys %s; known keys: %s. Engine flags outside the spec go to "
            "serving_engine_extra_args." % (", ".join(unknown), ", ".join(sorted(SPEC_DEFAULTS))))
    out = dict(SPEC_DEFAULTS)
    for key, value in spec.items():
        if value is not None:
            out[key] = value
        elif key not in ("enable_prefix_caching", "enable_metrics", "trust_remote_code", "tensor_parallel"):
            out[key] = None

    def bad(key, what):
        raise EngineArgsError("%s (spec.%s) %s; got %r" % (SPEC_VARIABLES[key], key, what, out[key]))

    for key in REQUIRED_SPEC:
        if out[key] is None or (isinstance(out[key], str) and not out[key].strip()):
            bad(key, "is required")
    for key in ("model_path", "served_model_name", "host"):
        if not isinstance(out[key], str):
            bad(key, "must be a string")
    if not _is_int(out["port"]) or not 1 <= out["port"] <= 65535:
        bad("port", "must be a port number 1-65535")
    if not _is_int(out["tensor_parallel"]) or out["tensor_parallel"] < 1:
        bad("tensor_parallel", "must be an integer >= 1")
    for key in ("max_model_len", "max_concurrency"):
        if out[key] is not None and (not _is_int(out[key]) or out[key] < 1):
            bad(key, "must be an integer >= 1 or null (engine default)")
    fraction = out["gpu_memory_fraction"]
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            bad("gpu_memory_fraction", "must be a number in (0, 1] or null (engine default)")
    for key in ("chat_template", "dtype"):
        if out[key] is not None and (not isinstance(out[key], str) or not out[key].strip()):
            bad(key, "must be a non-empty string or null")
    for key in ("enable_prefix_caching", "enable_metrics", "trust_remote_code"):
        if not isinstance(out[key], bool):
            bad(key, "must be true or false")
    if any(ch.isspace() for ch in out["served_model_name"]):
        bad("served_model_name", "must not contain whitespace")
    return out


def _flag_key(raw, where):
    if not isinstance(raw, str) or not raw.strip("-").strip():
        raise EngineArgsError("%s: %r is not a flag name" % (where, raw))
    key = raw.strip().lstrip("-")
    if re.search(r"\s|=", key):
        raise EngineArgsError("%s: %r is not a flag name (give the value as the dict value, "
                              "without '=' or spaces in the key)" % (where, raw))
    # Both engines spell flags with dashes; keep anything after a '.' (vLLM's --json-arg.key) as is.
    head, dot, tail = key.partition(".")
    return head.replace("_", "-") + dot + tail


def _render_value(engine, key, value, where):
    """[] (omitted), or the argv pieces for one flag and its value."""
    flag = "--" + key
    if value is None or value is False:
        return []
    if value is True:
        return [flag]
    if isinstance(value, dict):
        return [flag, json.dumps(value, sort_keys=True, separators=(",", ":"))]
    if isinstance(value, (list, tuple)):
        items = [_scalar(v, where, key) for v in value]
        if not items:
            return []
        if key in REPEATED_LIST_FLAGS[engine]:
            out = []
            for item in items:
                out.extend([flag, item])
            return out
        return [flag] + items
    return [flag, _scalar(value, where, key)]


def _scalar(value, where, key):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    raise EngineArgsError("%s: value of %s must be a string, number, boolean, list or dict; got %r"
                          % (where, key, value))


def _owned_by_spec(engine, key):
    head = key.partition(".")[0]
    return SPEC_OWNED[engine].get(head)


# ---------------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------------
def render(engine, engine_version, spec, extra_args=None, stack_args=None):
    """Render the argv. Returns a dict with command (without the interpreter: see build()),
    flags, env, api_key_env, sources ({flag: 'spec'|'stack'|'extra'}), warnings, entry."""
    if engine not in ENGINES:
        raise EngineArgsError("serving_engine must be one of %s; got %r" % (", ".join(ENGINES), engine))
    if not engine_version or not isinstance(engine_version, str):
        raise EngineArgsError("engine_version is required (the %s version of the stack profile)" % engine)
    parse_version(engine_version)
    spec = normalize_spec(spec)
    extra_args = extra_args or {}
    stack_args = stack_args or {}
    for name, args in (("serving_engine_extra_args", extra_args), ("stack profile args", stack_args)):
        if not isinstance(args, dict):
            raise EngineArgsError("%s must be a dict of flag name -> value; got %r" % (name, args))
    warnings = []
    entry = entry_for(engine, engine_version)
    table = flag_table(engine, engine_version)

    flags = []
    names = []
    sources = {}

    def add(pieces, source):
        # pieces: flag [value ...] [flag value ...] (one flag name, repeated for append lists)
        if pieces:
            sources[pieces[0]] = source
            names.append(pieces[0])
            flags.extend(pieces)

    prefix = list(entry["prefix"])
    if entry["model"] == "positional":
        prefix.append(spec["model_path"])
    else:
        add([entry["model"], spec["model_path"]], "spec")
    for key in ("served_model_name", "host", "port", "tensor_parallel", "max_model_len",
                "gpu_memory_fraction", "max_concurrency", "chat_template", "dtype"):
        if spec[key] is not None:
            add([table[key], _scalar(spec[key], "spec", key)], "spec")
    for key in ("enable_prefix_caching", "enable_metrics", "trust_remote_code"):
        when_true, when_false = table[key]
        flag = when_true if spec[key] else when_false
        if flag:
            add([flag], "spec")
        elif key == "enable_metrics" and not spec[key] and engine == "vllm":
            warnings.append("vLLM always serves /metrics; serving_enable_metrics=false has no vLLM flag "
                            "(keep /metrics behind the gateway)")

    # stack args first, extra args may override them (not the spec)
    merged = {}
    for where, args, source in (("stack profile args", stack_args, "stack"),
                                ("serving_engine_extra_args", extra_args, "extra")):
        for raw in sorted(args, key=str):
            key = _flag_key(raw, where)
            owner = _owned_by_spec(engine, key)
            if owner:
                raise EngineArgsError(_override_msg(engine, where, key, owner))
            if key in FORBIDDEN_EXTRA:
                raise EngineArgsError("%s: --%s is not allowed: %s" % (where, key, FORBIDDEN_EXTRA[key]))
            if key in merged and merged[key][1] == "stack":
                warnings.append("serving_engine_extra_args overrides the stack profile's --%s (%r -> %r)"
                                % (key, merged[key][0], args[raw]))
            merged[key] = (args[raw], source, where)
    for key in sorted(merged):
        value, source, where = merged[key]
        add(_render_value(engine, key, value, where), source)

    env = {}
    if os.path.isabs(spec["model_path"]):
        # weights and tokenizer are local: never reach the Hugging Face hub at start
        env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    if engine == "vllm":
        env.update({"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"})
    if engine == "sglang" and "device" in merged and str(merged["device"][0]).lower() == "cpu":
        env["SGLANG_USE_CPU_ENGINE"] = "1"

    return {
        "engine": engine,
        "engine_version": engine_version,
        "entry_module": entry["module"],
        "argv_prefix": prefix,
        "flags": flags,
        "flag_names": names,
        "sources": sources,
        "env": env,
        "api_key_env": API_KEY_ENV[engine],
        "warnings": warnings,
        "launcher": launcher_info() if engine == "sglang" else None,
    }


def _override_msg(engine, where, key, owner):
    variable = SPEC_VARIABLES[owner]
    if owner == "api_key":
        return ("%s: --%s is not allowed: the API key never goes on the command line; set %s "
                "(the engine reads it from %s)" % (where, key, variable, API_KEY_ENV[engine]))
    return ("%s: --%s sets what the serving spec owns (%s); set %s instead of passing --%s"
            % (where, key, owner, variable, key))


def engine_argv(rendered):
    """What the engine's parser sees (the argv after `python -m <entry module>`, minus prefix words)."""
    prefix = list(rendered["argv_prefix"])
    if prefix and prefix[0] == "serve":
        prefix = prefix[1:]
    return prefix + list(rendered["flags"])


# ---------------------------------------------------------------------------------------------
# --help text
# ---------------------------------------------------------------------------------------------
def help_options(text):
    """{option string: first option string of its line} from argparse --help output.

    Only option header lines count (two to six spaces, then '-'); flags mentioned inside help
    text or the usage block do not. Aliases on one line share a group (e.g. --tp-size and
    --tensor-parallel-size).
    """
    options = {}
    for line in text.splitlines():
        match = re.match(r"^ {1,6}(-[^\s,].*)$", line)
        if not match:
            continue
        invocation = re.split(r"\s{2,}", match.group(1).strip())[0]
        group = []
        for part in invocation.split(", "):
            token = part.split(" ")[0]
            if re.match(r"^--?[A-Za-z0-9][A-Za-z0-9_.\-]*$", token):
                group.append(token)
        for token in group:
            options.setdefault(token, group[0])
    return options


# ---------------------------------------------------------------------------------------------
# validation against the installed engine
# ---------------------------------------------------------------------------------------------
def source_of(module):
    """The source text of a module_utils module, also when it was imported from a zip (AnsiballZ)."""
    return inspect.getsource(module)


# Runs in the venv's interpreter (engine_probe.py). Reads {"engine", "argv", "launcher"} on stdin;
# prints one line RESULT_MARKER + JSON. Engine imports may print to stdout/stderr: both are captured.
VALIDATE_SCRIPT = source_of(engine_probe)


def default_runner(argv, data=None, env=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=full_env, universal_newlines=True)
    try:
        out, err = proc.communicate(data, timeout=VALIDATION_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return 124, out, (err or "") + "\ntimed out after %d s" % VALIDATION_TIMEOUT
    return proc.returncode, out, err


def _parse_marker(stdout):
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(RESULT_MARKER):
            return json.loads(line[len(RESULT_MARKER):])
    return None


def _pick_installed(engine, found):
    """(distribution, version) of the engine in the venv, or (None, None)."""
    if not found:
        return None, None
    by_name = dict((item["name"], item["version"]) for item in found)
    for name in DISTRIBUTIONS[engine]:
        if name in by_name:
            return name, by_name[name]
    return None, None


def help_argv(python, rendered, variant):
    engine = rendered["engine"]
    entry = entry_for(engine, rendered["engine_version"])
    module = entry.get("engine_module", entry["module"])
    argv = [python, "-m", module] + list(entry["prefix"])
    return argv + (["--help=all"] if variant == "all" else ["--help"])


def _close(engine, flag, accepted):
    rename = KNOWN_RENAMES.get(engine, {}).get(flag)
    if rename and rename in accepted:
        return rename
    matches = difflib.get_close_matches(flag, sorted(accepted), n=1, cutoff=0.5)
    return matches[0] if matches else None


def validate(rendered, python, runner=None):
    """Check rendered flags against the engine installed for `python`. Returns a dict with
    validated, validation_method, installed_distribution, installed_version, parser_source,
    launcher_present; raises EngineArgsError naming the flag, engine, version and closest flag."""
    runner = runner or default_runner
    engine = rendered["engine"]
    request = json.dumps({"engine": engine, "argv": engine_argv(rendered),
                          "distributions": DISTRIBUTIONS[engine],
                          "launcher": rendered["entry_module"] if rendered.get("launcher") else None})
    rc, out, err = runner([python, "-c", VALIDATE_SCRIPT], request, rendered["env"])
    result = _parse_marker(out)
    if result is None:
        raise EngineArgsError(
            "could not run the validation script with %s (rc=%s): %s. Is python the interpreter of "
            "the %s venv?" % (python, rc, _tail(err or out), engine), rc=rc, stderr=_tail(err, 4000))
    dist, installed_version = _pick_installed(engine, result.get("installed"))
    if installed_version is None:
        raise EngineArgsError(
            "%s is not installed in the venv of %s (no distribution %s found); build the venv "
            "(python_env role) before rendering the engine command"
            % (engine, python, " or ".join(DISTRIBUTIONS[engine])))
    label = "%s %s" % (engine, installed_version)
    if dist != engine:
        label += " (distribution %s)" % dist
    if base_version(installed_version) != base_version(rendered["engine_version"]):
        raise EngineArgsError(
            "the venv of %s has %s (distribution %s) but the stack profile asks for %s %s; the flags are "
            "rendered per version: rebuild the venv or fix the stack profile's engine version"
            % (python, label, dist, engine, rendered["engine_version"]),
            installed_version=installed_version)
    info = {
        "installed_distribution": dist,
        "installed_version": installed_version,
        "parser_source": result.get("parser_source"),
        "launcher_present": result.get("launcher_present"),
    }

    if result.get("options"):
        method = "parser"
        accepted = dict((opt, meta["dest"]) for opt, meta in result["options"].items())
        how = "its argument parser"
    else:
        method = "help"
        accepted, help_output = None, ""
        for variant in (("all", "plain") if engine == "vllm" else ("plain",)):
            hrc, hout, herr = runner(help_argv(python, rendered, variant), None, rendered["env"])
            help_output = hout or herr or "rc=%s" % hrc
            options = help_options(hout or "")
            if len(options) > 10:
                accepted = options
                break
        if accepted is None:
            raise EngineArgsError(
                "cannot check the flags against %s: its argument parser could not be built (%s) and "
                "`--help` listed no flags (%s)" % (label, result.get("build_error"), _tail(help_output)),
                build_error=result.get("build_error"))
        how = "its --help; the parser could not be built: %s" % result.get("build_error")

    # 1. every flag name exactly (argparse would take unique prefixes: --max-num-seq)
    for flag in rendered["flag_names"]:
        name = flag.partition(".")[0]
        if name not in accepted:
            raise EngineArgsError(_unknown_msg(rendered, flag, name, label, how, accepted),
                                  flag=flag, closest=_close(engine, name, accepted))
    # 2. aliases of spec-owned flags, as the installed engine defines them (same argparse dest,
    #    or the same --help line), whether or not the spec sets that flag this time
    spec_groups = {}
    for key, spec_flag in _spec_flags(engine, rendered["engine_version"]):
        if spec_flag in accepted:
            spec_groups.setdefault(accepted[spec_flag], (spec_flag, key))
    for flag in rendered["flag_names"]:
        source = rendered["sources"].get(flag)
        group = accepted.get(flag.partition(".")[0])
        if source in ("extra", "stack") and group in spec_groups:
            spec_flag, key = spec_groups[group]
            where = "serving_engine_extra_args" if source == "extra" else "stack profile args"
            raise EngineArgsError(
                "%s: %s is an alias of %s in %s, which the serving spec owns; set %s instead"
                % (where, flag, spec_flag, label, SPEC_VARIABLES[key]), flag=flag)
    # 3. values, by the parser itself
    if method == "parser" and result.get("parse_error"):
        message = result["parse_error"]
        flag = _flag_in(message, rendered["flag_names"])
        origin = _origin(rendered, flag)
        raise EngineArgsError("%s's argument parser rejected the command line%s: %s"
                              % (label, (" at %s (%s)" % (flag, origin)) if flag else "", message),
                              flag=flag)
    info.update({"validated": True, "validation_method": method})
    return info


def _spec_flags(engine, engine_version):
    """(spec key, flag) for every flag the table can render for this version, model included."""
    out = []
    entry = entry_for(engine, engine_version)
    if entry["model"] != "positional":
        out.append(("model_path", entry["model"]))
    for key, rule in sorted(flag_table(engine, engine_version).items()):
        for flag in (rule if isinstance(rule, tuple) else (rule,)):
            if flag:
                out.append((key, flag))
    return out


def _spec_key_of(engine, rendered, flag):
    for key, spec_flag in _spec_flags(engine, rendered["engine_version"]):
        if spec_flag == flag:
            return key
    return None


def _origin(rendered, flag):
    source = rendered["sources"].get(flag)
    if source == "extra":
        return "from serving_engine_extra_args"
    if source == "stack":
        return "from the stack profile's engine args"
    if source == "spec":
        key = _spec_key_of(rendered["engine"], rendered, flag)
        return "rendered from %s" % SPEC_VARIABLES.get(key, "the serving spec")
    return "from the serving spec"


def _flag_in(message, flags):
    for flag in sorted(flags, key=len, reverse=True):
        if re.search(r"(^|[\s/'\"])%s($|[\s:/'\"=,])" % re.escape(flag), message):
            return flag
    return None


def _unknown_msg(rendered, flag, name, label, how, accepted):
    engine = rendered["engine"]
    closest = _close(engine, name, accepted)
    source = rendered["sources"].get(flag)
    suggestion = ("; closest accepted flag: %s" % closest) if closest else "; no similar flag is accepted"
    owner = _spec_key_of(engine, rendered, closest) if closest else None
    if owner and source != "spec":
        suggestion += ", which the serving spec owns: set %s instead" % SPEC_VARIABLES[owner]
    if source == "extra":
        fix = "fix or remove it in serving_engine_extra_args"
    elif source == "stack":
        fix = "fix the stack profile's engines.%s.args (serving_stacks_file)" % engine
    else:
        key = _spec_key_of(engine, rendered, flag)
        fix = ("the llmops.serving translation table renders it from %s for this version: report it, "
               "or pin the engine version the table knows" % SPEC_VARIABLES.get(key, "the serving spec"))
    return ("%s is not accepted by the installed %s (checked with %s)%s. %s."
            % (flag, label, how, suggestion, fix[0].upper() + fix[1:]))


def _tail(text, size=600):
    text = (text or "").strip()
    return text[-size:] if text else "no output"


# ---------------------------------------------------------------------------------------------
# the module's whole job
# ---------------------------------------------------------------------------------------------
def build(engine, engine_version, spec, extra_args=None, stack_args=None, validate_flags=True,
          python=None, runner=None):
    """render() + validate(); the dict the engine_args module returns (without `changed`)."""
    rendered = render(engine, engine_version, spec, extra_args=extra_args, stack_args=stack_args)
    interpreter = python or "python3"
    command = [interpreter, "-m", rendered["entry_module"]] + rendered["argv_prefix"] + rendered["flags"]
    result = {
        "command": command,
        "flags": rendered["flags"],
        "env": rendered["env"],
        "api_key_env": rendered["api_key_env"],
        "entry_module": rendered["entry_module"],
        "flag_sources": rendered["sources"],
        "warnings": rendered["warnings"],
        "launcher": rendered["launcher"],
        "validated": False,
        "validation_method": None,
        "installed_version": None,
    }
    if validate_flags:
        if not python:
            raise EngineArgsError("python (the venv's interpreter) is required when validate is true")
        result.update(validate(rendered, python, runner=runner))
        if rendered["launcher"] and result.get("launcher_present") is False:
            result["warnings"].append(
                "the launcher module %s is not importable in the venv yet: install launcher.content as "
                "%s in the venv's site-packages before starting the unit"
                % (rendered["entry_module"], rendered["launcher"]["filename"]))
        result["msg"] = "%d flags for %s %s, all accepted by the installed engine (%s)" % (
            len(rendered["flag_names"]), engine, result["installed_version"], result["validation_method"])
    else:
        result["msg"] = "%d flags rendered for %s %s (not validated)" % (
            len(rendered["flag_names"]), engine, engine_version)
    return result


# ---------------------------------------------------------------------------------------------
# SGLang API key launcher
# ---------------------------------------------------------------------------------------------
# SGLang 0.5.23 reads its API key only from --api-key (ServerArgs.api_key; no environment
# variable), and logs the resolved server args, api_key included, at start. This launcher,
# installed into the SGLang venv as llmops_sglang_launch.py, takes the key from the environment
# (EnvironmentFile / credential, never argv), removes it from the environment children inherit,
# hands it to sglang.launch_server in-process (so /proc/<pid>/cmdline never shows it), and masks
# the key in everything the process writes to stdout/stderr (the journal).
# The launcher's source is sglang_launch.py.
LAUNCHER_MODULE = "llmops_sglang_launch"
LAUNCHER_SOURCE = source_of(sglang_launch)


def launcher_info():
    return {
        "module": LAUNCHER_MODULE,
        "filename": LAUNCHER_MODULE + ".py",
        "install_to": "the venv's site-packages (python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')",
        "key_env": API_KEY_ENV["sglang"],
        "key_file_env": API_KEY_ENV["sglang"] + "_FILE",
        "content": LAUNCHER_SOURCE,
    }
