# -*- coding: utf-8 -*-
"""A runner for engine_args.validate() that keeps one engine interpreter per venv warm.

engine_args runs its probe (engine_probe's source) as ``python -c SOURCE`` once per validation; on
these 2-core test machines each run spends 30-50 s importing the engine before its parser answers
in a second. Tests that check several argvs against the same installed engine send them to one
interpreter instead: it runs the same source's probe() for each request, so the parser, the
request and the result are exactly the fresh-interpreter ones; only the import is shared. The
molecule scenarios run the fresh-interpreter path on the hosts.

Anything other than the probe (a `--help` fallback) goes to engine_args.default_runner.
"""
import json
import os
import subprocess

from ansible_collections.llmops.serving.plugins.module_utils import engine_validate as ev

# Loads the probe's functions (its main() stays unused: __name__ is not "__main__") and answers one
# JSON request a line with the probe's own marker line.
LOOP = r'''
import json, sys
ns = {"__name__": "llmops_engine_probe"}
exec(compile(sys.argv[1], "engine_probe", "exec"), ns)
for line in sys.stdin:
    res = ns["probe"](json.loads(line))
    sys.stdout.write("\n" + ns["RESULT_MARKER"] + json.dumps(res) + "\n")
    sys.stdout.flush()
'''


class WarmRunner(object):
    """runner(argv, data, env) -> (rc, stdout, stderr), as engine_args.default_runner."""

    def __init__(self):
        self.children = {}
        self.requests = 0

    def __call__(self, argv, data=None, env=None):
        if len(argv) != 3 or argv[1:] != ["-c", ev.VALIDATE_SCRIPT]:
            return ev.default_runner(argv, data, env)
        child = self._child(argv[0], env or {})
        child.stdin.write(json.dumps(json.loads(data)) + "\n")
        child.stdin.flush()
        self.requests += 1
        lines = []
        while True:
            line = child.stdout.readline()
            if not line:
                return child.wait(), "".join(lines), "the warm probe exited"
            lines.append(line)
            if line.startswith(ev.RESULT_MARKER):
                return 0, "".join(lines), ""

    def _child(self, python, env):
        key = (python, tuple(sorted(env.items())))
        if key in self.children and self.children[key].poll() is not None:
            # it exited (an engine import that crashed it): the next request gets a new one
            del self.children[key]
        if key not in self.children:
            full_env = dict(os.environ)
            full_env.update(env)
            self.children[key] = subprocess.Popen([python, "-c", LOOP, ev.VALIDATE_SCRIPT], env=full_env,
                                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                  universal_newlines=True)
        return self.children[key]

    def close(self):
        # the children hold no state worth a clean exit (an engine's interpreter takes seconds to)
        for child in self.children.values():
            child.kill()
            child.wait()
            child.stdin.close()
            child.stdout.close()
        self.children = {}
