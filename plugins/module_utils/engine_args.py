# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.serving
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one translation point from the engine-neutral serving spec to engine argv: rendering and building.

render()   spec + stack args + extra args -> argv, env, API-key variable for one engine version.
build()    render() and engine_validate.validate() (the check against the installed engine), as the
           engine_args module runs them.

The translation point is four files, each importing only those before it:
  engine_flags.py     the per-version flag tables and their look-ups;
  engine_spec.py      the spec's schema and checks (normalize_spec, unsupported_msg);
  engine_validate.py  the check of rendered flags against the engine installed in a venv;
  engine_args.py      this file: rendering and building.
The model-folder reads (mtp_head, the config for a YaRN override) are model.py's.

Only the standard library and sibling module_utils are used, so tests/unit imports these files
directly and the code runs on any Python 3.8+ that Ansible runs modules with. Commands are run
through a `runner` callable (argv, stdin_text, env) -> (rc, stdout, stderr): the module passes one
built on AnsibleModule.run_command, tests pass fakes.

sglang_launch.py is a real Python file beside this one, so linters, sanity tests and coverage see
it; its source text is read at run time (from the AnsiballZ zip inside a module run, through the
import system's loader) and installed into the SGLang venv as llmops_sglang_launch.py
(launcher_info()).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

# Imported (not only read) so that AnsiballZ packs it with this file.
from ansible_collections.llmops.serving.plugins.module_utils import sglang_launch
from ansible_collections.llmops.serving.plugins.module_utils.engine_flags import (
    ADMIN_KEY_ENV, API_KEY_ENV, FLAG_TABLE, FORBIDDEN_EXTRA, LONG_CONTEXT_FORMATS, REPEATED_LIST_FLAGS,
    SGLANG_LORA_FLAGS_SINCE, SPEC_OWNED, VLLM_LORA_RANKS, EngineArgsError, entry_for, env_table, flag_table,
    node_launcher, node_launcher_problem, parse_version, speculative_methods, version_row)
from ansible_collections.llmops.serving.plugins.module_utils.engine_spec import (
    BOOL_SPEC_KEYS, OPTIONAL_BOOL_SPEC_KEYS, SPEC_VARIABLES, VALUE_SPEC_KEYS, normalize_spec, unsupported_msg)
from ansible_collections.llmops.serving.plugins.module_utils.engine_validate import source_of, validate
from ansible_collections.llmops.serving.plugins.module_utils.engines import ENGINES
from ansible_collections.llmops.serving.plugins.module_utils.model import model_config, mtp_head

# The first vLLM version seen to crash on a grammar-constrained request under ngram speculative
# decoding (the version measured; earlier ones were not tried).
NGRAM_GRAMMAR_CRASH_SINCE = (0, 32, 0)


def _nodes_pieces(engine, engine_version, nodes):
    """The argv pieces and environment that place this host in its instance."""
    kind = nodes.get("launcher") or "native"
    launcher = node_launcher(engine, engine_version, kind)
    if launcher is None:
        raise EngineArgsError(node_launcher_problem(engine, engine_version, kind))
    if kind == "ray":
        if nodes["rank"] > 0:
            raise EngineArgsError("nodes: rank %d of an instance on a Ray cluster runs no engine of its own, only "
                                  "its Ray worker (the ray_cluster role); render the engine for rank 0"
                                  % nodes["rank"])
        pieces = [list(launcher["backend"])]
    else:
        pieces = _native_node_pieces(launcher, nodes)
    env = {}
    if nodes.get("interface"):
        # torch.distributed's CPU groups (gloo) and NCCL bind the interface the hosts share
        env.update({"GLOO_SOCKET_IFNAME": nodes["interface"], "NCCL_SOCKET_IFNAME": nodes["interface"]})
    if nodes.get("host_address") and engine == "vllm":
        # the address the other ranks reach this one at (vLLM guesses it from the default route)
        env["VLLM_HOST_IP"] = nodes["host_address"]
    return pieces, env


def _native_node_pieces(launcher, nodes):
    """--nnodes / --node-rank / the rendezvous address of the engine's own launcher."""
    address = nodes["address"]
    pieces = [[launcher["count"], str(nodes["count"])], [launcher["rank"], str(nodes["rank"])]]
    if "address_port" in launcher:
        host = "[%s]" % address if ":" in address else address
        pieces.append([launcher["address_port"], "%s:%d" % (host, nodes["port"])])
    else:
        pieces.extend([[launcher["address"], address], [launcher["port"], str(nodes["port"])]])
    if nodes["rank"] > 0 and launcher["worker"]:
        pieces.append([launcher["worker"]])
    return pieces


def cpu_thread_bind(cpus, ranks):
    """SGLang's CPU engine's SGLANG_CPU_OMP_THREADS_BIND for `ranks` tensor-parallel ranks on a host of
    `cpus` logical CPUs: an equal, contiguous share each ("0-3|4-7"). Without it SGLang gives each
    rank a NUMA node of its own and refuses more ranks, those of every host of the instance counted,
    than this host has nodes (sglang/srt/utils/numa_utils.py, init_threads_binding)."""
    if ranks > cpus:
        raise EngineArgsError("nodes: SGLang's CPU engine binds each of the host's %d tensor-parallel ranks to CPUs of "
                              "its own and the host has %d: lower serving_tensor_parallel" % (ranks, cpus))
    share = cpus // ranks
    return "|".join("%d-%d" % (i * share, (i + 1) * share - 1) for i in range(ranks))


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


def _arg_dicts(stack_args, extra_args):
    """(stack_args, extra_args), None as {}; each must be a dict of flag name -> value."""
    stack_args, extra_args = stack_args or {}, extra_args or {}
    for name, args in (("serving_engine_extra_args", extra_args), ("stack profile args", stack_args)):
        if not isinstance(args, dict):
            raise EngineArgsError("%s must be a dict of flag name -> value; got %r" % (name, args))
    return stack_args, extra_args


def merged_args(engine, stack_args, extra_args):
    """The stack profile's flags (its pipeline's included), then serving_engine_extra_args over them
    (never over the spec's): ({flag name with dashes: (value, 'stack'|'extra', where)}, warnings)."""
    stack_args, extra_args = _arg_dicts(stack_args, extra_args)
    merged = {}
    warnings = []
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
    return merged, warnings


def flag_values(engine, stack_args, extra_args):
    """The values of the flags the unit gets from the stack profile and serving_engine_extra_args, as
    the unit gets them, named with underscores ({'enforce_eager': True}): what a plan made before the
    engine's flags are rendered reads."""
    merged, dummy = merged_args(engine, stack_args, extra_args)
    return dict((key.replace("-", "_"), value) for key, (value, dummy_source, dummy_where) in merged.items())


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
    # a dotted key (vLLM's --json-arg.key) is the spec's when the key or its flag is
    return SPEC_OWNED[engine].get(key) or SPEC_OWNED[engine].get(key.partition(".")[0])


def render(engine, engine_version, spec, extra_args=None, stack_args=None):
    """Render the argv. Returns a dict with command (without the interpreter: see build()),
    flags, env, api_key_env, sources ({flag: 'spec'|'stack'|'extra'}), warnings, entry."""
    if engine not in ENGINES:
        raise EngineArgsError("serving_engine must be one of %s; got %r" % (", ".join(ENGINES), engine))
    if not engine_version or not isinstance(engine_version, str):
        raise EngineArgsError("engine_version is required (the %s version of the stack profile)" % engine)
    parse_version(engine_version)
    spec = normalize_spec(spec)
    stack_args, extra_args = _arg_dicts(stack_args, extra_args)
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
    by_spec = {}

    def add_spec(key, pieces):
        # two spec keys may render the same flag (vLLM's step budget is its chunk size): once, if they agree
        if pieces[0] in by_spec:
            other, value = by_spec[pieces[0]]
            if value != pieces[1:]:
                raise EngineArgsError("%s and %s both set %s for %s %s and differ (%s, %s); set one of them" % (
                    SPEC_VARIABLES[other], SPEC_VARIABLES[key], pieces[0], engine, engine_version,
                    " ".join(value), " ".join(pieces[1:])))
            return
        by_spec[pieces[0]] = (key, pieces[1:])
        add(pieces, "spec")

    for key in VALUE_SPEC_KEYS:
        if spec[key] is not None:
            if table[key] is None:
                raise EngineArgsError(unsupported_msg(engine, engine_version, key))
            add_spec(key, [table[key], _scalar(spec[key], "spec", key)])
    for key in BOOL_SPEC_KEYS + OPTIONAL_BOOL_SPEC_KEYS:
        if spec[key] is None:
            continue
        if table[key] is None:
            if spec[key]:
                raise EngineArgsError(unsupported_msg(engine, engine_version, key))
            continue
        when_true, when_false = table[key]
        flag = when_true if spec[key] else when_false
        if flag:
            add_spec(key, list(flag) if isinstance(flag, list) else [flag])
        elif key == "enable_metrics" and not spec[key] and engine == "vllm":
            warnings.append("vLLM always serves /metrics; serving_enable_metrics=false has no vLLM flag "
                            "(keep /metrics behind the gateway)")
    if spec["speculative"] is not None:
        problem = unsupported_msg(engine, engine_version, "speculative", spec["speculative"])
        if problem:
            raise EngineArgsError(problem)
        if spec["speculative"]["method"] == "mtp" and mtp_head(spec["model_path"]) is False:
            raise EngineArgsError(
                "serving_speculative: method mtp drafts with the model's own multi-token-prediction head, and the "
                "model at %s ships none (no mtp_num_hidden_layers or num_nextn_predict_layers in its config.json, "
                "no mtp.* weights): use {method: ngram} (any model), or eagle3 with a draft_model" % spec["model_path"])
        for pieces in _speculative_pieces(engine, engine_version, spec["speculative"]):
            add_spec("speculative", pieces)
        if engine == "vllm" and spec["speculative"]["method"] == "ngram" \
                and parse_version(engine_version) >= NGRAM_GRAMMAR_CRASH_SINCE:
            warnings.append(
                "serving_speculative ngram on vLLM %s: a request with response_format or a forced tool call "
                "(any grammar) can kill the engine core (measured on vLLM 0.32.0's CPU build: 'index ... out of "
                "bounds' in the sampler; vllm-project/vllm#52620 on GPUs); leave serving_speculative null where "
                "clients use structured output" % engine_version)
    if spec["lora"] is not None:
        for pieces in _lora_pieces(engine, engine_version, spec["lora"]):
            add_spec("lora", pieces)
    # nothing for a single stage: one host's argv stays what it was before pipelines existed
    if spec["pipeline_parallel"] > 1:
        add_spec("pipeline_parallel", [table["pipeline_parallel"], str(spec["pipeline_parallel"])])
    node_env = {}
    if spec["nodes"] is not None:
        node_pieces, node_env = _nodes_pieces(engine, engine_version, spec["nodes"])
        for pieces in node_pieces:
            add_spec("nodes", pieces)
    if spec["long_context"] is not None:
        add_spec("long_context", [table["long_context"],
                                  _long_context_json(engine, engine_version, spec["long_context"], spec["model_path"])])

    merged, merge_warnings = merged_args(engine, stack_args, extra_args)
    warnings.extend(merge_warnings)
    override_flag = table["long_context"].lstrip("-")
    if spec["long_context"] is not None and override_flag in merged:
        raise EngineArgsError(
            "%s: --%s and serving_long_context both override the model's config; put the rope scaling in "
            "serving_long_context only, or the whole override in --%s" % (merged[override_flag][2], override_flag,
                                                                          override_flag))
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
        if spec["nodes"] is not None and spec["nodes"].get("cpus"):
            env["SGLANG_CPU_OMP_THREADS_BIND"] = cpu_thread_bind(spec["nodes"]["cpus"], spec["tensor_parallel"])
    env.update(node_env)
    for key, rule in sorted(env_table(engine, engine_version).items()):
        chosen = rule[0] if spec[key] else rule[1]
        env.update(chosen or {})

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
        "admin_key_env": ADMIN_KEY_ENV[engine],
        "warnings": warnings,
        "launcher": launcher_info() if engine == "sglang" else None,
    }


def _speculative_pieces(engine, engine_version, value):
    """argv pieces (lists) of serving_speculative for one engine version."""
    name = speculative_methods(engine, engine_version)[value["method"]]
    tokens = value.get("tokens") or (4 if value["method"] == "ngram" else 3)
    if engine == "vllm":
        config = {"method": name, "num_speculative_tokens": tokens}
        if value["method"] == "ngram":
            config["prompt_lookup_max"] = value.get("lookup_max") or 4
            config["prompt_lookup_min"] = value.get("lookup_min") or 1
        if value.get("draft_model"):
            config["model"] = value["draft_model"]
        return [["--speculative-config", json.dumps(config, sort_keys=True, separators=(",", ":"))]]
    if value["method"] == "ngram":
        if value.get("lookup_max") or value.get("lookup_min"):
            raise EngineArgsError("serving_speculative: lookup_max and lookup_min are vLLM's prompt-lookup bounds; "
                                  "SGLang's n-gram drafter has none: leave them out")
        return [["--speculative-algorithm", name], ["--speculative-num-draft-tokens", str(tokens)]]
    # EAGLE-style drafting, one chain (top-k 1): `tokens` steps propose tokens + 1 draft tokens
    # (SGLang's speculative decoding docs)
    pieces = [["--speculative-algorithm", name]]
    if value.get("draft_model"):
        pieces.append(["--speculative-draft-model-path", value["draft_model"]])
    return pieces + [["--speculative-num-steps", str(tokens)], ["--speculative-eagle-topk", "1"],
                     ["--speculative-num-draft-tokens", str(tokens + 1)]]


def _lora_pieces(engine, engine_version, value):
    """argv pieces (lists) of the LoRA adapters for one engine version: the adapters by name, the
    largest rank and how many adapters one batch may mix (all of them unless max_loras says fewer)."""
    version = parse_version(engine_version)
    modules = ["%s=%s" % (item["name"], item["path"]) for item in value["adapters"]]
    per_batch = min(value.get("max_loras") or len(modules), len(modules))
    if engine == "vllm":
        ranks = version_row(VLLM_LORA_RANKS, version)
        if value["max_rank"] > ranks[-1]:
            raise EngineArgsError("serving_lora_adapters: rank %d is above vLLM %s's largest LoRA rank %d"
                                  % (value["max_rank"], engine_version, ranks[-1]))
        rank = min(r for r in ranks if r >= value["max_rank"])
        return [["--enable-lora"], ["--lora-modules"] + modules, ["--max-lora-rank", str(rank)],
                ["--max-loras", str(per_batch)]]
    pieces = []
    if version >= SGLANG_LORA_FLAGS_SINCE:
        pieces.append(["--enable-lora"])
    pieces.append(["--lora-paths"] + modules)
    if version >= SGLANG_LORA_FLAGS_SINCE:
        pieces.append(["--max-lora-rank", str(value["max_rank"])])
    return pieces + [["--max-loras-per-batch", str(per_batch + 1)]]


def _long_context_json(engine, engine_version, value, model_path):
    """The config override of serving_long_context (YaRN) as the engine version reads it."""
    fmt = version_row(LONG_CONTEXT_FORMATS[engine], parse_version(engine_version))
    factor, origin = value["factor"], value["original_max_position"]
    yarn = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": origin}
    config = model_config(model_path)
    if config is not None:
        if isinstance(config.get("text_config"), dict):
            raise EngineArgsError(
                "serving_long_context: the model at %s keeps its language model under text_config, which this "
                "override does not reach; give the whole override in serving_engine_extra_args (%s)"
                % (model_path, FLAG_TABLE[engine]["long_context"][0][1]))
        current = config.get("rope_scaling") or config.get("rope_parameters") or {}
        if (current.get("rope_type") or current.get("type") or "default") != "default":
            raise EngineArgsError(
                "serving_long_context: the model's config.json at %s already scales its rope (%s); leave "
                "serving_long_context unset" % (model_path, json.dumps(current, sort_keys=True)))
    if fmt == "rope_scaling":
        override = {"rope_scaling": yarn}
    else:
        if config is None:
            raise EngineArgsError(
                "serving_long_context: %s %s reads the override as rope_parameters, which must carry the model's "
                "rope_theta: no config.json at %s to read it from" % (engine, engine_version, model_path))
        theta = config.get("rope_theta") or (config.get("rope_parameters") or {}).get("rope_theta")
        if theta is not None:
            yarn["rope_theta"] = theta
        override = {"rope_parameters": yarn, "max_position_embeddings": int(origin * factor)}
    return json.dumps(override, sort_keys=True, separators=(",", ":"))


def _override_msg(engine, where, key, owner):
    variable = SPEC_VARIABLES[owner]
    if owner in ("api_key", "admin_api_key"):
        return ("%s: --%s is not allowed: the API key never goes on the command line; set %s "
                "(the engine reads it from %s)" % (where, key, variable,
                                                   (API_KEY_ENV if owner == "api_key" else ADMIN_KEY_ENV)[engine]))
    return ("%s: --%s sets what the serving spec owns (%s); set %s instead of passing --%s"
            % (where, key, owner, variable, key))


def unit_product(command, env, current_link=None, base_env=None, override_env=None):
    """What the engine unit runs: (exec, environment). The exec is the command started through the
    venv's current link (`<current_link>/bin/python`), so that an upgrade is a link switch and a
    restart; the environment is base_env, then the rendered env, then override_env (the user's
    last word), every value a string as systemd reads it (a null one empty, as Jinja writes it)."""
    exec_argv = list(command)
    if current_link:
        exec_argv[0] = current_link.rstrip("/") + "/bin/python"
    environment = {}
    for layer in (base_env or {}, env, override_env or {}):
        for key, value in layer.items():
            environment[str(key)] = "" if value is None else str(value)
    return exec_argv, environment


def build(engine, engine_version, spec, extra_args=None, stack_args=None, validate_flags=True,
          python=None, runner=None, current_link=None, base_env=None, override_env=None):
    """render() + validate(); the dict the engine_args module returns (without `changed`)."""
    rendered = render(engine, engine_version, spec, extra_args=extra_args, stack_args=stack_args)
    interpreter = python or "python3"
    command = [interpreter, "-m", rendered["entry_module"]] + rendered["argv_prefix"] + rendered["flags"]
    exec_argv, environment = unit_product(command, rendered["env"], current_link, base_env, override_env)
    result = {
        "command": command,
        "exec": exec_argv,
        "environment": environment,
        "flags": rendered["flags"],
        "env": rendered["env"],
        "api_key_env": rendered["api_key_env"],
        "admin_key_env": rendered["admin_key_env"],
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
