# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tokenizer role's chat template (template.yml) run by ansible-playbook on localhost, its
proof by the real Qwen3 tokenizer of tests/fixtures/qwen in the engine venv (LLMOPS_TEST_VENV_PYTHON):
a template that fails its proof is refused on its staged copy and never replaces the file the
engine reads at its next start; one that passes replaces it."""
import hashlib
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
VENV_PY = os.environ.get("LLMOPS_TEST_VENV_PYTHON")
QWEN3 = os.path.join(REPO, "tests", "fixtures", "qwen", "Qwen3-4B")
TEMPLATES = os.path.join(REPO, "templates", "chat")

pytestmark = [pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason="needs the controller venv (make unit)"),
              pytest.mark.skipif(not VENV_PY, reason="set LLMOPS_TEST_VENV_PYTHON to a venv with transformers")]


def run(tmp_path, template):
    """(rc, output) of template.yml for the template file TEMPLATE (a user's own, by path)."""
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars_files": [os.path.join(REPO, "roles", "tokenizer", "vars", "main.yml")],
             "vars": {"serving_chat_template": str(template), "serving_spec_chat_template_src": str(template),
                      "serving_chat_templates_dir": str(tmp_path / "chat-templates"),
                      "serving_spec_chat_template_path": str(tmp_path / "chat-templates" / template.name),
                      "serving_spec_python": VENV_PY, "serving_spec_model_path": QWEN3,
                      "serving_probe_cache_dir": str(tmp_path / "probe-cache")},
             # the task file alone: the role's dependencies want a whole serving spec
             "tasks": [{"ansible.builtin.include_tasks": os.path.join(REPO, "roles", "tokenizer", "tasks", "template.yml")}]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    res = subprocess.run([PLAYBOOK, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
                          str(tmp_path / "play.yml")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=600, check=False)
    return res.returncode, res.stdout


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_template_that_fails_its_proof_never_replaces_the_installed_one(tmp_path):
    ours = tmp_path / "user" / "qwen3.jinja"
    ours.parent.mkdir()
    with open(os.path.join(TEMPLATES, "qwen3.jinja")) as f:
        good = f.read()
    ours.write_text("{#- the site's edit -#}\n" + good)
    rc, out = run(tmp_path, ours)
    assert rc == 0, out[-3000:]
    installed = tmp_path / "chat-templates" / "qwen3.jinja"
    assert digest(installed) == digest(ours)
    # the same name, edited so that it loses Qwen's turn markers: the proof fails on the staged copy
    ours.write_text("{%- for message in messages %}{{ message.role }}: {{ message.content }}\n{% endfor %}")
    rc, out = run(tmp_path, ours)
    assert rc != 0 and "does not work with the tokenizer" in out, out[-3000:]
    assert installed.read_text() == "{#- the site's edit -#}\n" + good
    # put right, it replaces the installed one
    ours.write_text("{#- fixed -#}\n" + good)
    rc, out = run(tmp_path, ours)
    assert rc == 0, out[-3000:]
    assert digest(installed) == digest(ours)
