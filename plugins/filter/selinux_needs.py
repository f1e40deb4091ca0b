# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: selinux_needs
short_description: What SELinux must still allow for a confined daemon to serve
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Reads what C(getenforce), C(getsebool NAME) and C(semanage port -l) printed and lists the booleans
    that are off and the ports that lack their type, each with the command that fixes it.
  - Empty while SELinux is disabled (or its tools are missing).
positional: _input
options:
  _input:
    description:
      - C(getenforce) (its output), C(booleans) (a dict of boolean name to C(getsebool) output),
        C(semanage) (C(semanage port -l) output, null when semanage is not installed),
        C(ports) (a list of C(port), C(proto), C(type)).
    type: dict
    required: true
"""

EXAMPLES = r"""
missing: "{{ {'getenforce': 'Enforcing', 'booleans': {'httpd_can_network_connect': 'httpd_can_network_connect --> off'},
              'semanage': 'http_port_t  tcp  80, 81, 443, 488, 8008, 8009, 8443, 9000',
              'ports': [{'port': 9443, 'proto': 'tcp', 'type': 'http_port_t'}]} | llmops.serving.selinux_needs }}"
# [{name: httpd_can_network_connect, argv: [setsebool, -P, httpd_can_network_connect, 'on'], fix: ...},
#  {name: 9443/tcp as http_port_t, argv: [semanage, port, -a, -t, http_port_t, -p, tcp, '9443'], fix: ...}]
"""

RETURN = r"""
_value:
  description: What is missing, in a stable order (booleans by name, then ports).
  type: list
  elements: dict
  contains:
    name:
      description: The boolean, or C(PORT/PROTO as TYPE), or C(semanage) when it is not installed.
      type: str
    argv:
      description: The command that fixes it (empty for a missing semanage).
      type: list
      elements: str
    fix:
      description: What to do, one line.
      type: str
"""

from ansible_collections.llmops.serving.plugins.module_utils.selinux import needs


class FilterModule(object):
    def filters(self):
        return {"selinux_needs": needs}
