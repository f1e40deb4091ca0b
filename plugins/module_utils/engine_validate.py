# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.serving
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check of rendered flags against the engine installed in a venv: its own argument parser
(vLLM: make_arg_parser on a FlexibleArgumentParser; SGLang: ServerArgs.add_cli_args), or, when
that parser cannot be built, the flags its --help lists. The probe that runs in the venv's
interpreter is engine_probe.py, sent as source text (also from an AnsiballZ zip).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import inspect
import json
import os
import re
import subprocess

# Imported (not only read) so that AnsiballZ packs it with this file.
from ansible_collections.llmops.serving.plugins.module_utils import engine_probe
from ansible_collections.llmops.serving.plugins.module_utils.engine_flags import (
    DISTRIBUTIONS, KNOWN_RENAMES, EngineArgsError, base_version, entry_for, flag_table, rule_flags)
from ansible_collections.llmops.serving.plugins.module_utils.engine_spec import SPEC_VARIABLES

VALIDATION_TIMEOUT = 900

RESULT_MARKER = engine_probe.RESULT_MARKER


def engine_argv(rendered):
    """What the engine's parser sees (the argv after `python -m <entry module>`, minus prefix words)."""
    prefix = list(rendered["argv_prefix"])
    if prefix and prefix[0] == "serve":
        prefix = prefix[1:]
    return prefix + list(rendered["flags"])


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
        for flag in rule_flags(rule):
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
