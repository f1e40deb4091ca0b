# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: code_digest
short_description: The digest of this collection's own files under some of its folders
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Hashes the names and contents of every file under the given folders of the collection (relative
    to its root, on the controller), so that a role's record of a full run is invalidated by a new
    version of its tasks, templates, files or of the plugins it runs.
  - Computed once per folder list and controller process; compiled Python files are left out.
options:
  _terms:
    description: Folders of the collection, relative to its root (C(roles/gateway), C(templates)).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
digest: "{{ lookup('llmops.serving.code_digest', 'roles/gateway', 'plugins') }}"
"""

RETURN = r"""
_raw:
  description: One sha256 hex digest.
  type: list
  elements: str
"""

import hashlib
import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_CACHE = {}


def tree_digest(root, folders):
    digest = hashlib.sha256()
    for folder in sorted(set(folders)):
        base = os.path.normpath(os.path.join(root, folder))
        if not base.startswith(root + os.sep) or not os.path.isdir(base):
            raise AnsibleLookupError("code_digest: %s is not a folder of the collection" % folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(dirpath, name)
                digest.update(os.path.relpath(path, root).encode("utf-8") + b"\0")
                with open(path, "rb") as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        key = tuple(sorted(set(terms)))
        if key not in _CACHE:
            _CACHE[key] = tree_digest(ROOT, key)
        return [_CACHE[key]]
