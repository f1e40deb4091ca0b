# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make ``ansible_collections.llmops.serving`` importable in pytest.

`make unit` exports ANSIBLE_COLLECTIONS_PATH (the checkout's .cache/collections link first); the
unit tests import plugins by their FQCN module path, so each collections root goes on sys.path.
"""
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ROOTS = os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep)
_ROOTS.append(os.path.join(_REPO, ".cache", "collections"))

for _root in reversed([r for r in _ROOTS if r]):
    if os.path.isdir(os.path.join(_root, "ansible_collections")) and _root not in sys.path:
        sys.path.insert(0, _root)
