#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apt_refresh
short_description: Refresh apt's package lists when they are missing, stale or their sources changed
version_added: "0.1.0"
description:
  - Runs C(apt-get update) when the host's package lists cannot be trusted, judged by what they
    hold rather than by the modification time of C(/var/lib/apt/lists), which is what
    C(ansible.builtin.apt)'s O(ansible.builtin.apt#module:cache_valid_time) looks at.
  - A refresh is needed when no binary package list exists (an empty lists folder is never
    trusted, however new it looks), when a list seen at the last refresh is gone, when the apt
    sources (C(/etc/apt/sources.list), C(*.list) and C(*.sources) in
    C(/etc/apt/sources.list.d)) differ from those the last refresh read, when the last refresh
    is older than O(valid_time), or when no refresh was ever recorded.
  - The last refresh is recorded in O(record_path) (time, digest of the sources, list names),
    outside the lists folder, which C(apt-get update) cleans of files it does not know.
  - Use it before C(ansible.builtin.apt) tasks, which then need no C(update_cache).
author:
  - llmops.serving maintainers (@llmops)
options:
  valid_time:
    description:
      - Seconds a refresh stays good when nothing else calls for one.
    type: int
    default: 3600
  force:
    description:
      - Refresh whatever the lists hold (for example after a signing key changed).
    type: bool
    default: false
  lock_timeout:
    description:
      - Seconds to keep retrying while another apt process holds the lists lock.
    type: int
    default: 600
  lists_dir:
    description:
      - apt's lists folder (C(Dir::State::lists)).
    type: path
    default: /var/lib/apt/lists
  sources:
    description:
      - apt source files, or folders whose C(*.list) and C(*.sources) files count.
    type: list
    elements: path
    default: [/etc/apt/sources.list, /etc/apt/sources.list.d]
  record_path:
    description:
      - Where the record of the last refresh is kept.
    type: path
    default: /var/lib/llmops/apt-refresh.json
notes:
  - Only for hosts with apt (the Debian family).
attributes:
  check_mode:
    support: full
    description: Reports whether a refresh is due and why, without running it.
  diff_mode:
    support: none
    description: Package lists are not configuration; there is no diff.
"""

EXAMPLES = r"""
- name: Refresh the package lists when missing, stale or their sources changed
  llmops.serving.apt_refresh:
    valid_time: 3600

- name: Refresh after the repository's signing key changed
  llmops.serving.apt_refresh:
    force: "{{ __key is changed }}"

- name: Install packages from the refreshed lists
  ansible.builtin.apt:
    name: nginx
    state: present
"""

RETURN = r"""
refreshed:
  description: Whether C(apt-get update) ran (false in check mode).
  returned: always
  type: bool
reason:
  description: Why a refresh was due, or why the lists were trusted.
  returned: always
  type: str
  sample: no package lists in /var/lib/apt/lists (a fresh image or a cleaned host)
package_lists:
  description: Binary package list files in the lists folder afterwards.
  returned: always
  type: int
  sample: 4
sources_sha256:
  description: Digest of the apt sources the decision was made on.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.serving.plugins.module_utils.apt_lists import (
    DEFAULT_LISTS_DIR,
    DEFAULT_RECORD,
    DEFAULT_SOURCES,
    refresh,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            valid_time=dict(type="int", default=3600),
            force=dict(type="bool", default=False),
            lock_timeout=dict(type="int", default=600),
            lists_dir=dict(type="path", default=DEFAULT_LISTS_DIR),
            sources=dict(type="list", elements="path", default=list(DEFAULT_SOURCES)),
            record_path=dict(type="path", default=DEFAULT_RECORD),
        ),
        supports_check_mode=True,
    )
    if module.params["valid_time"] < 0:
        module.fail_json(msg="valid_time must be 0 or more seconds, got %d"
                         % module.params["valid_time"])
    apt_get = module.get_bin_path("apt-get")
    if not apt_get:
        module.fail_json(msg="apt-get not found: apt_refresh is for hosts of the Debian family; "
                             "guard the task with ansible_facts.os_family == 'Debian'")
    try:
        result = refresh(module.params, lambda argv: module.run_command(argv, environ_update={
            "LANG": "C", "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}),
            apt_get, module.check_mode)
    except RuntimeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
