# -*- coding: utf-8 -*-
"""The two programs engine_args sends elsewhere are real files: engine_probe.py (run as
`python -c SOURCE` by the engine venv) and sglang_launch.py (installed as llmops_sglang_launch.py).
engine_args reads their source at run time, also from a zip as AnsiballZ imports module_utils.
The translation point's four files import each other in one order, and by name, so that AnsiballZ
(which packs what the module imports, and what those import) packs every one of them."""
import ast
import json
import os
import subprocess
import sys
import zipfile

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import engine_args as ea
from ansible_collections.llmops.serving.plugins.module_utils import engine_flags as ef
from ansible_collections.llmops.serving.plugins.module_utils import engine_validate as ev
from ansible_collections.llmops.serving.plugins.module_utils import engine_probe, sglang_launch

MODULE_UTILS = os.path.dirname(os.path.abspath(ea.__file__))
MODULE = os.path.join(MODULE_UTILS, "..", "modules", "engine_parse_args.py")
PACKAGE = "ansible_collections/llmops/serving/plugins/module_utils"
PREFIX = PACKAGE.replace("/", ".")
# The translation point, in the order its files may import each other: each only those before it.
TRANSLATION_POINT = ("engine_flags", "engine_spec", "engine_validate", "engine_args")


def module_utils_imported(path):
    """The module_utils names a Python file imports, as AnsiballZ's finder reads them: `from PREFIX
    import name` and `from PREFIX.name import ...`."""
    with open(path) as handle:
        tree = ast.parse(handle.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == PREFIX:
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PREFIX + "."):
            names.add(node.module[len(PREFIX) + 1:].split(".")[0])
    return names


def packed_by_ansiballz(path):
    """The module_utils files AnsiballZ packs for the module at `path`: its imports, and theirs."""
    todo, seen = list(module_utils_imported(path)), set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(module_utils_imported(os.path.join(MODULE_UTILS, name + ".py")))
    return seen


def read(name):
    with open(os.path.join(MODULE_UTILS, name)) as handle:
        return handle.read()


@pytest.mark.parametrize("text,filename", [
    (ev.VALIDATE_SCRIPT, "engine_probe.py"),
    (ea.LAUNCHER_SOURCE, "sglang_launch.py"),
    (ea.launcher_info()["content"], "sglang_launch.py"),
    (ev.source_of(engine_probe), "engine_probe.py"),
])
def test_source_text_is_the_file_and_compiles(text, filename):
    assert text == read(filename)
    compile(text, filename, "exec")
    assert text.startswith("# -*- coding: utf-8 -*-\n# Copyright: llmops.serving contributors\n")


def test_protocol_constants_are_unchanged():
    assert ev.RESULT_MARKER == engine_probe.RESULT_MARKER == "@@LLMOPS_ENGINE_ARGS@@"
    assert ef.API_KEY_ENV["sglang"] == sglang_launch.KEY_ENV == "LLMOPS_SGLANG_API_KEY"
    assert ea.launcher_info()["key_file_env"] == "LLMOPS_SGLANG_API_KEY_FILE"
    assert ea.LAUNCHER_MODULE == "llmops_sglang_launch" and sglang_launch.ENTRY == "sglang.launch_server"


def test_sources_are_read_from_a_zip_like_ansiballz(tmp_path):
    payload = str(tmp_path / "payload.zip")
    with zipfile.ZipFile(payload, "w") as zf:
        parts = PACKAGE.split("/")
        for depth in range(1, len(parts) + 1):
            zf.writestr("/".join(parts[:depth]) + "/__init__.py", "")
        for name in sorted(packed_by_ansiballz(MODULE)):  # only what AnsiballZ would pack
            zf.write(os.path.join(MODULE_UTILS, name + ".py"), PACKAGE + "/" + name + ".py")
    code = ("import json, sys\nsys.path.insert(0, %r)\n"
            "from ansible_collections.llmops.serving.plugins.module_utils import engine_args as ea\n"
            "from ansible_collections.llmops.serving.plugins.module_utils import engine_validate as ev\n"
            "ea.render('vllm', '0.32.0', {'model_path': '/m', 'served_model_name': 'm', 'host': '::1', 'port': 1})\n"
            "print(json.dumps([ev.engine_probe.__file__, ev.VALIDATE_SCRIPT, ea.launcher_info()['content']]))"
            % payload)
    where, script, launcher = json.loads(subprocess.check_output([sys.executable, "-I", "-c", code],
                                                                 universal_newlines=True))
    assert where.startswith(payload + os.sep)
    assert script == read("engine_probe.py") and launcher == read("sglang_launch.py")


def test_the_translation_points_files_import_only_those_before_them():
    for place, name in enumerate(TRANSLATION_POINT):
        inside = module_utils_imported(os.path.join(MODULE_UTILS, name + ".py")) & set(TRANSLATION_POINT)
        assert inside <= set(TRANSLATION_POINT[:place]), (name, sorted(inside))


def test_ansiballz_packs_every_file_of_the_translation_point_and_both_programs():
    packed = packed_by_ansiballz(MODULE)
    assert set(TRANSLATION_POINT) | {"engine_probe", "sglang_launch", "model", "engines"} <= packed, sorted(packed)


# ------------------------------------------------------------------------------ the probe
def test_probe_imports_without_running_and_reports_a_missing_engine():
    res = engine_probe.probe({"engine": "sglang", "argv": ["--port", "1"], "launcher": "json"})
    assert res["installed"] == [] and res["options"] is None and res["parse_error"] is None
    assert res["build_error"] == "ModuleNotFoundError: No module named 'sglang'"
    assert res["launcher_present"] is True and "parser_source" not in res
    assert engine_probe.probe({"engine": "vllm", "argv": [], "launcher": "no_such_module_here"})[
        "launcher_present"] is False
    assert engine_probe.probe({"engine": "vllm", "argv": []})["launcher_present"] is None


def test_probe_script_speaks_the_marker_protocol():
    request = {"engine": "vllm", "argv": ["/m"], "launcher": None}
    proc = subprocess.run([sys.executable, "-c", ev.VALIDATE_SCRIPT], input=json.dumps(request),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=True)
    last = proc.stdout.splitlines()[-1]
    assert proc.stdout.startswith("\n") and last.startswith(ev.RESULT_MARKER)
    assert json.loads(last[len(ev.RESULT_MARKER):]) == engine_probe.probe(request)


# ------------------------------------------------------------------------------ the launcher
def test_launcher_in_process(tmp_path, monkeypatch, capsys):
    (tmp_path / "fake_entry.py").write_text("import sys\nprint('argv=%s' % sys.argv[1:])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("stdout", "stderr", "argv"):
        monkeypatch.setattr(sys, name, getattr(sys, name))  # restored after the launcher replaces them
    environ = {"LLMOPS_SGLANG_API_KEY": "sk-secret", "OTHER": "1"}
    assert sglang_launch.main(["--port", "1"], environ, entry="fake_entry") == 0
    assert environ == {"OTHER": "1"}
    assert "argv=['--api-key', '<redacted>', '--port', '1']" in capsys.readouterr().out
    assert sglang_launch.main(["--api-key=sk"], {}, entry="fake_entry") == 2
    assert "--api-key on the command line is refused; set LLMOPS_SGLANG_API_KEY instead\n" in capsys.readouterr().err
    key_file = tmp_path / "key"
    key_file.write_text("sk-file\n")
    assert sglang_launch.take_key({"LLMOPS_SGLANG_API_KEY_FILE": str(key_file)}) == "sk-file"
    assert sglang_launch.take_key({}) is None
