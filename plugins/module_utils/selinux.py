# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What SELinux must allow before a confined daemon (nginx runs as httpd_t) can serve.

Read from the tools every RHEL host has, so that no Python binding is needed on the controller or the host:
``getenforce``, ``getsebool NAME`` (``httpd_can_network_connect --> off``) and ``semanage port -l``
(``http_port_t   tcp   8443, 80, 81, 443, 8008-8009``).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

ACTIVE_MODES = ("enforcing", "permissive")
# Where semanage comes from on RHEL 9 (it is not in a minimal install).
SEMANAGE_PACKAGE = "policycoreutils-python-utils"


def mode(getenforce_stdout):
    """``enforcing``, ``permissive`` or ``disabled`` (also when getenforce is missing: no SELinux tools, no policy)."""
    word = (getenforce_stdout or "").strip().lower()
    return word if word in ACTIVE_MODES else "disabled"


def boolean_on(getsebool_stdout, name):
    """True when ``getsebool NAME`` said ``on``; False for ``off`` and for anything unreadable."""
    match = re.search(r"^\s*%s\s+-->\s+(on|off)\s*$" % re.escape(name), getsebool_stdout or "", re.M)
    return bool(match) and match.group(1) == "on"


def port_types(semanage_port_list, proto, port):
    """The SELinux types that label PORT/PROTO in ``semanage port -l`` output (ranges included)."""
    port = int(port)
    found = []
    for line in (semanage_port_list or "").splitlines():
        fields = line.split(None, 2)
        if len(fields) < 3 or fields[1] != proto:
            continue
        for item in fields[2].split(","):
            item = item.strip()
            low, high = (item.split("-", 1) + [""])[:2]
            if low.isdigit() and (high or low).isdigit() and int(low) <= port <= int(high or low):
                found.append(fields[0])
                break
    return found


def port_defined(semanage_port_list, proto, port):
    """True when PORT/PROTO is a record of its own (not inside a range): semanage then modifies it (-m)
    rather than adds it (-a), which it refuses as "already defined"."""
    for line in (semanage_port_list or "").splitlines():
        fields = line.split(None, 2)
        if len(fields) == 3 and fields[1] == proto and str(int(port)) in [i.strip() for i in fields[2].split(",")]:
            return True
    return False


def needs(params):
    """What is missing, each as {name, argv, fix}: the booleans that must be on and the ports that must carry a type.

    params: ``getenforce`` (stdout, empty when the tool is missing), ``booleans`` ({name: getsebool stdout}),
    ``semanage`` (``semanage port -l`` stdout, None when semanage is missing), ``ports`` ([{port, proto, type}]).
    Nothing is needed while SELinux is disabled.
    """
    if mode(params.get("getenforce")) == "disabled":
        return []
    missing = []
    for name, said in sorted((params.get("booleans") or {}).items()):
        if not boolean_on(said, name):
            argv = ["setsebool", "-P", name, "on"]
            missing.append({"name": name, "argv": argv, "fix": " ".join(argv)})
    listing = params.get("semanage")
    for want in params.get("ports") or []:
        if listing is None:
            missing.append({"name": "semanage", "argv": [],
                            "fix": "install %s so that the port labels can be read and set" % SEMANAGE_PACKAGE})
            break
        if want["type"] not in port_types(listing, want.get("proto", "tcp"), want["port"]):
            verb = "-m" if port_defined(listing, want.get("proto", "tcp"), want["port"]) else "-a"
            argv = ["semanage", "port", verb, "-t", want["type"], "-p", want.get("proto", "tcp"), str(want["port"])]
            missing.append({"name": "%s/%s as %s" % (want["port"], want.get("proto", "tcp"), want["type"]),
                            "argv": argv, "fix": " ".join(argv)})
    return missing
