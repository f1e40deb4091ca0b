# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: systemd_exec
short_description: Render an argv list as a systemd ExecStart= value
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Quotes every argument for systemd's own command-line syntax (not a shell's). Each argument is
    double-quoted with C-style escapes, C(%) is doubled against specifier expansion and C($) is
    doubled against environment expansion.
positional: _input
options:
  _input:
    description: The argv list.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
exec_start: "{{ ['/opt/venv/bin/python', '-m', 'http.server', '--bind', '127.0.0.1', '8000'] | llmops.serving.systemd_exec }}"
"""

RETURN = r"""
_value:
  description: One string fit for ExecStart=.
  type: str
"""

from ansible.errors import AnsibleFilterError


def quote_arg(arg):
    s = str(arg)
    if "\n" in s or "\x00" in s:
        raise AnsibleFilterError("systemd_exec: an argument holds a newline or NUL: %r" % s)
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return '"%s"' % s


def systemd_exec(argv):
    if not isinstance(argv, (list, tuple)) or not argv:
        raise AnsibleFilterError("systemd_exec expects a non-empty list, got %r" % (argv,))
    return " ".join(quote_arg(a) for a in argv)


class FilterModule(object):
    def filters(self):
        return {"systemd_exec": systemd_exec}
