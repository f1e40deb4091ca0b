# -*- coding: utf-8 -*-
"""The two programs engine_args sends elsewhere are real files: engine_probe.py (run as
`python -c SOURCE` by the engine venv) and sglang_launch.py (installed as llmops_sglang_launch.py).
engine_args reads their source at run time, also from a zip as AnsiballZ imports module_utils."""
import json
import os
import subprocess
import sys
import zipfile

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import engine_args as ea
from ansible_collections.llmops.serving.plugins.module_utils import engine_probe, sglang_launch

MODULE_UTILS = os.path.dirname(os.path.abspath(ea.__file__))
PACKAGE = "ansible_collections/llmops/serving/plugins/module_utils"


def read(name):
    with open(os.path.join(MODULE_UTILS, name)) as handle:
        return handle.read()


@pytest.mark.parametrize("text,filename", [
    (ea.VALIDATE_SCRIPT, "engine_probe.py"),
    (ea.LAUNCHER_SOURCE, "sglang_launch.py"),
    (ea.launcher_info()["content"], "sglang_launch.py"),
    (ea.source_of(engine_probe), "engine_probe.py"),
])
def test_source_text_is_the_file_and_compiles(text, filename):
    assert text == read(filename)
    compile(text, filename, "exec")
    assert text.startswith("# -*- coding: utf-8 -*-\n# Copyright: llmops.serving contributors\n")


def test_protocol_constants_are_unchanged():
    assert ea.RESULT_MARKER == engine_probe.RESULT_MARKER == "@@LLMOPS_ENGINE_ARGS@@"
    assert ea.API_KEY_ENV["sglang"] == sglang_launch.KEY_ENV == "LLMOPS_SGLANG_API_KEY"
    assert ea.launcher_info()["key_file_env"] == "LLMOPS_SGLANG_API_KEY_FILE"
    assert ea.LAUNCHER_MODULE == "llmops_sglang_launch" and sglang_launch.ENTRY == "sglang.launch_server"


def test_sources_are_read_from_a_zip_like_ansiballz(tmp_path):
    payload = str(tmp_path / "payload.zip")
    with zipfile.ZipFile(payload, "w") as zf:
        parts = PACKAGE.split("/")
        for depth in range(1, len(parts) + 1):
            zf.writestr("/".join(parts[:depth]) + "/__init__.py", "")
        for name in sorted(os.listdir(MODULE_UTILS)):  # AnsiballZ packs what is imported; all is a superset
            if name.endswith(".py"):
                zf.write(os.path.join(MODULE_UTILS, name), PACKAGE + "/" + name)
    code = ("import json, sys\nsys.path.insert(0, %r)\n"
            "from ansible_collections.llmops.serving.plugins.module_utils import engine_args as ea\n"
            "print(json.dumps([ea.engine_probe.__file__, ea.VALIDATE_SCRIPT, ea.launcher_info()['content']]))"
            % payload)
    where, script, launcher = json.loads(subprocess.check_output([sys.executable, "-I", "-c", code],
                                                                 universal_newlines=True))
    assert where.startswith(payload + os.sep)
    assert script == read("engine_probe.py") and launcher == read("sglang_launch.py")


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
    proc = subprocess.run([sys.executable, "-c", ea.VALIDATE_SCRIPT], input=json.dumps(request),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=True)
    last = proc.stdout.splitlines()[-1]
    assert proc.stdout.startswith("\n") and last.startswith(ea.RESULT_MARKER)
    assert json.loads(last[len(ea.RESULT_MARKER):]) == engine_probe.probe(request)


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
