# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a function of a module_utils file in another interpreter (an engine venv's).

Why: work that needs torch / transformers / the engine must run with the venv's interpreter, but
not inside the Ansible module process itself: ansible-core patches interpreter internals there
(sys.intern in 2.19), which torch's import rejects. So the module runs with the host's Python and
hands the function's source, its arguments (JSON on stdin) and the venv interpreter to a child.
The child needs nothing from Ansible.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import inspect
import json

MARKER = "@@LLMOPS-RESULT@@"

_MAIN = """

if __name__ == "__main__":
    import json as _json, sys as _sys
    _args = _json.load(_sys.stdin)
    _result = %s(**_args)
    _sys.stdout.write("\\n%s" + _json.dumps(_result) + "\\n")
"""


class VenvCallError(Exception):
    def __init__(self, msg, rc=None, stdout="", stderr=""):
        super(VenvCallError, self).__init__(msg)
        self.rc, self.stdout, self.stderr = rc, stdout, stderr


def script_for(mod, entry):
    """Source of module_utils module `mod` plus a main block calling `entry(**stdin_json)`."""
    return inspect.getsource(mod) + _MAIN % (entry, MARKER)


def parse_result(stdout):
    idx = stdout.rfind(MARKER)
    if idx < 0:
        return None
    return json.loads(stdout[idx + len(MARKER):].strip().splitlines()[0])


def call(run_command, python, mod, entry, args, env=None):
    """Run mod.entry(**args) under `python`; returns its JSON-able result.

    run_command is AnsibleModule.run_command (or anything with its signature).
    """
    kwargs = dict(data=json.dumps(args), binary_data=True)
    if env:
        kwargs["environ_update"] = env
    rc, out, err = run_command([python, "-c", script_for(mod, entry)], **kwargs)
    result = parse_result(out) if rc == 0 else None
    if result is None:
        tail = "\n".join((err or out).strip().splitlines()[-25:])
        raise VenvCallError("%s.%s failed under %s (rc=%s):\n%s" % (mod.__name__.rsplit(".", 1)[-1], entry, python, rc, tail),
                            rc=rc, stdout=out, stderr=err)
    return result
