# -*- coding: utf-8 -*-
"""What the module tests share: a module's main() run as Ansible runs it, with exit_json and
fail_json turned into exceptions that carry the result, AnsibleModule.run_command replaced, and the
helpers that read what RETURN documents or give an interpreter without the engine venv's packages.

Imported relatively (``from .module_harness import ...``): this folder is a package (its
__init__.py), so pytest imports these tests as modules.test_* with tests/unit/plugins, not this
folder, on sys.path, and ansible-test as part of the collection's package; a plain
``import module_harness`` would find nothing in either."""
import importlib.util
import os
import subprocess
import sys

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class Exit(Exception):
    """exit_json was called; args[0] is the result. With failed_key=True, fail_json too."""


class Fail(Exception):
    """fail_json was called (with failed_key=False); args[0] is the result, without 'failed'."""


def _exit_json(self, **kwargs):
    raise Exit(kwargs)


def _fail_json(self, **kwargs):
    raise Fail(kwargs)


def _fail_json_with_failed_key(self, **kwargs):
    raise Exit(dict(kwargs, failed=True))


def run_module(monkeypatch, module, args, run_command, check_mode=False, *, failed_key):
    """module.main() with the module arguments `args` (and _ansible_check_mode when check_mode);
    AnsibleModule.run_command is `run_command`. Returns (Exit or Fail, the result).

    failed_key=True: fail_json leaves as exit_json does, Exit carrying its result with failed=True
    added, as Ansible reports a failure; the kind is always Exit and the test reads result["failed"].
    failed_key=False: fail_json raises Fail with its arguments as they are; the test tells success
    from failure by the kind."""
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json_with_failed_key if failed_key else _fail_json)
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    with patch_module_args(args):
        with pytest.raises(Exit if failed_key else (Exit, Fail)) as err:
            module.main()
    return err.type, err.value.args[0]


def subprocess_run_command(self, argv, data=None, binary_data=False, environ_update=None, **kwargs):
    """AnsibleModule.run_command, short: the child really runs, with environ_update over this
    process's environment (the modules that pass none get this process's environment)."""
    env = dict(os.environ, **(environ_update or {}))
    proc = subprocess.run(argv, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def no_site_python(tmp_path):
    """An interpreter without site-packages: a host's Python, which has none of the engine venv's
    packages (torch, transformers, huggingface_hub)."""
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\nexec %s -S \"$@\"\n" % sys.executable)
    path.chmod(0o755)
    return str(path)


def documented_by(returns):
    """documented(*returned) for a module's parsed RETURN: the keys whose `returned` is one of them."""
    def documented(*returned):
        return set(k for k, v in returns.items() if v["returned"] in returned)
    return documented


def module_utils_helper(name):
    """A test helper of tests/unit/plugins/module_utils (hub_server, safetensors_file), loaded from
    its file: that folder is no package, so it cannot be imported from this one by name."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    return helper
