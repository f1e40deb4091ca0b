# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine probe: what engine_args.validate() runs in an engine venv's interpreter.

engine_args sends this file's source as ``python -c SOURCE``. It reads {"engine", "argv",
"launcher"} as JSON on stdin, builds the installed engine's own argument parser (vLLM:
make_arg_parser on a FlexibleArgumentParser; SGLang: ServerArgs.add_cli_args), lists the options
the parser accepts, parses argv with it, and prints one line RESULT_MARKER + JSON with
installed, options, build_error, parse_error, parser_source, launcher_present and log. Engine
imports may print to stdout/stderr: both are captured into log.

Only the standard library is imported at module level (the engine only inside the functions), so
the file imports anywhere; it needs nothing from Ansible or from the collection.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import contextlib
import io
import json
import sys

RESULT_MARKER = "@@LLMOPS_ENGINE_ARGS@@"


def installed(names):
    """[{name, version}] of the distributions in `names` that are installed."""
    try:
        from importlib import metadata
    except ImportError:
        return None
    found = []
    for name in names:
        try:
            found.append({"name": name, "version": metadata.version(name)})
        except Exception:
            pass
    return found


def build_vllm(res):
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    make = None
    errors = []
    for where in ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args"):
        try:
            make = __import__(where, fromlist=["make_arg_parser"]).make_arg_parser
            res["parser_source"] = where + ".make_arg_parser"
            break
        except (ImportError, AttributeError) as exc:
            errors.append("%s: %s" % (where, exc))
    if make is None:
        raise ImportError("make_arg_parser not found: " + "; ".join(errors))
    parser = make(FlexibleArgumentParser(prog="vllm serve"))
    if not any(action.dest == "model_tag" for action in parser._actions):
        # Up to 0.8 `vllm serve` adds its positional model in the serve subcommand, not in
        # make_arg_parser (vllm/entrypoints/cli/serve.py, subparser_init): add it the same way.
        parser.add_argument("model_tag", type=str, nargs="?")
        res["parser_source"] += " + the serve subcommand's model_tag"
    return parser


def build_sglang(res):
    from sglang.srt.server_args import ServerArgs
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    res["parser_source"] = "sglang.srt.server_args.ServerArgs.add_cli_args"
    return parser


def probe(req):
    """The result for one request (the dict printed after RESULT_MARKER)."""
    engine, argv = req["engine"], req["argv"]
    res = {"installed": None, "options": None, "build_error": None, "parse_error": None, "log": ""}
    # the distributions come from the engine registry, in the request
    res["installed"] = installed(req.get("distributions") or [engine])
    buf = io.StringIO()
    parser = None
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            parser = build_vllm(res) if engine == "vllm" else build_sglang(res)
        except BaseException as exc:
            res["build_error"] = "%s: %s" % (type(exc).__name__, exc)
    if parser is not None:
        opts = {}
        for action in parser._actions:
            kind = type(action).__name__
            for opt in action.option_strings:
                opts[opt] = {"dest": action.dest, "kind": kind}
        res["options"] = opts
        parser.allow_abbrev = False
        err = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            try:
                parser.parse_args(argv)
            except SystemExit as exc:
                if exc.code not in (0, None):
                    lines = [line for line in err.getvalue().splitlines() if line.strip()]
                    res["parse_error"] = lines[-1] if lines else "exit %s" % exc.code
            except BaseException as exc:
                res["parse_error"] = "%s: %s" % (type(exc).__name__, exc)
        buf.write(err.getvalue())
    try:
        import importlib.util as iu
        res["launcher_present"] = iu.find_spec(req["launcher"]) is not None if req.get("launcher") else None
    except Exception:
        res["launcher_present"] = False
    res["log"] = buf.getvalue()[-4000:]
    return res


def main():
    req = json.loads(sys.stdin.read())
    res = probe(req)
    sys.stdout.write("\n" + RESULT_MARKER + json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
