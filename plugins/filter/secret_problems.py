# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: secret_problems
short_description: What is wrong with API keys, in sentences that never hold a key
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - "Takes a dict of label to key (for example C({'serving_api_key': serving_api_key})) and returns
    one sentence per key that is empty, shorter than O(min_length), holds a character outside an
    RFC 6750 bearer token (letters, digits, C(- . _ ~ + /) and a trailing C(=); so no quote, C($),
    backslash or whitespace), looks like a placeholder, or is too predictable (its length times the
    Shannon entropy of its characters is below O(min_bits))."
  - Each sentence names the key by its label only. Run it under C(no_log) and print its result.
positional: _input
options:
  _input:
    description: Label (the variable a user sets) to key.
    type: dict
    required: true
  min_length:
    description: The shortest key accepted.
    type: int
    default: 16
  min_bits:
    description: The lowest estimated strength accepted, in bits.
    type: int
    default: 64
"""

EXAMPLES = r"""
problems: "{{ {'serving_api_key': serving_api_key} | llmops.serving.secret_problems }}"
"""

RETURN = r"""
_value:
  description: One sentence per bad key (empty list when every key is fine).
  type: list
  elements: str
  sample: ["serving_api_key looks like a placeholder (it contains 'replace')"]
"""

from ansible_collections.llmops.serving.plugins.module_utils.api_keys import MIN_BITS, MIN_LENGTH, describe


def secret_problems(keys, min_length=MIN_LENGTH, min_bits=MIN_BITS):
    return describe(dict(keys), int(min_length), int(min_bits))


class FilterModule(object):
    def filters(self):
        return {"secret_problems": secret_problems}
