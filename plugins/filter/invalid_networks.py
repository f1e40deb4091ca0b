# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: invalid_networks
short_description: The entries of a list that are not an IP address or network
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Returns the entries that Python's C(ipaddress) does not read as an IPv4 or IPv6 address or
    network (C(10.0.0.0/24), C(fd00::/64), C(192.0.2.7)), such as C(10.0.0.300/24), C(10.0.0.0/33)
    or a host name. Host bits set in a network (C(10.0.0.5/24)) are accepted, as nginx and systemd
    accept them.
positional: _input
options:
  _input:
    description: Addresses or networks.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
bad: "{{ gateway_monitoring_cidrs | llmops.serving.invalid_networks }}"
"""

RETURN = r"""
_value:
  description: The entries that are not an address or network, in their order.
  type: list
  elements: str
  sample: ["10.0.0.300/24"]
"""

import ipaddress


def _is_network(value):
    try:
        ipaddress.ip_network(u"%s" % value, strict=False)
    except ValueError:
        return False
    return isinstance(value, str)


def invalid_networks(values):
    return [v for v in (values or []) if not _is_network(v)]


class FilterModule(object):
    def filters(self):
        return {"invalid_networks": invalid_networks}
