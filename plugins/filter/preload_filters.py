# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: preload_filters
short_description: Its input, after loading every filter of this collection into the controller's process
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Returns its input unchanged. On the way it loads each filter plugin of C(llmops.serving), and the
    module_utils they import, into the process that templates it.
  - Meant for a play's C(hosts) keyword, which C(ansible-playbook) templates in its main process before
    any task's worker process forks. Each worker then starts with the filters loaded. Without it, every
    worker that reads one of the collection's filters loads and compiles them all again, since the
    collection loader keeps no bytecode and a worker's imports end with it. On a converged host, that is about
    3 controller CPU-seconds per C(site.yml) run (C(bench/converge)).
positional: _input
options:
  _input:
    description: Any value, for example a host pattern.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Check that the inventory has serving hosts
  hosts: "{{ 'localhost' | llmops.serving.preload_filters }}"
  tasks: []
"""

RETURN = r"""
_value:
  description: The input, unchanged.
  type: raw
"""

import importlib
import os

# The name the plugin loader imports this collection's filter files under (it reuses a module
# already in sys.modules).
PACKAGE = "ansible_collections.llmops.serving.plugins.filter"


def filter_files():
    """The collection's filter plugin files, by module name: every .py file beside this one."""
    here = os.path.dirname(os.path.abspath(__file__))
    return sorted(name[:-len(".py")] for name in os.listdir(here)
                  if name.endswith(".py") and not name.startswith("_"))


def preload_filters(value):
    for name in filter_files():
        importlib.import_module("%s.%s" % (PACKAGE, name))
    return value


class FilterModule(object):
    def filters(self):
        return {"preload_filters": preload_filters}
