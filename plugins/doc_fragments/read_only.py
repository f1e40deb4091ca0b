# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # For the facts and planning modules, which read the host and never change it.
    DOCUMENTATION = r"""
notes:
  - Supports check mode; the module only reads.
attributes:
  check_mode:
    support: full
    description: Reads only, so check mode runs it as usual.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
"""
