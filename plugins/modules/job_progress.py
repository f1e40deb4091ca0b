#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: job_progress
short_description: Follow a background job to its end, printing one progress line per interval
version_added: "0.1.0"
description:
  - Follows a job started with C(async) and C(poll) set to 0 until it ends, and returns the job's own
    result, as M(ansible.builtin.async_status) does once the job finished.
  - While the job runs, prints one line per O(interval) seconds with the host, O(label), the job's
    progress and the time elapsed. The progress comes from O(progress_file) (the JSON progress of
    M(llmops.serving.model_fetch) and M(llmops.serving.weights_convert) with bytes done, total, rate,
    ETA, or a C(status) and C(detail) text as M(llmops.serving.engine_ready) writes), from the last
    C([n/total]) step counter in O(log_file) (a ninja or CMake build log), or from the size of
    O(size_of) (a venv being installed).
  - A job that ends between two lines is noticed within a second.
  - The loop is a plain loop in the action, not a task file that includes itself, so a job may run
    for as long as O(timeout) allows (a download of a day is 5760 lines at 15 s).
  - Fails when O(timeout) seconds pass first; the job itself keeps running until its C(async) limit.
  - This module is an action; it runs on the controller and calls M(ansible.builtin.async_status),
    M(ansible.builtin.wait_for) and M(ansible.builtin.slurp) on the host.
author:
  - llmops.serving maintainers (@llmops)
options:
  jid:
    description: The job's id, the C(ansible_job_id) registered from the C(async) task.
    type: str
    required: true
  label:
    description: What the job does, at the start of each progress line.
    type: str
    required: true
  timeout:
    description: Seconds to follow the job at most; must be above 0.
    type: int
    required: true
  interval:
    description: Seconds between two progress lines; must be above 0.
    type: int
    default: 15
  progress_file:
    description: >-
      Path on the host of the job's JSON progress: C(phase), C(done), C(total), C(rate), C(eta_s),
      C(state) (bytes), or C(status) and C(detail) (a text line).
    type: path
  log_file:
    description: Path on the host of a build log whose last C([n/total]) counter is the progress.
    type: path
  size_of:
    description: Path on the host whose size (C(du -sb)) is the progress, for example a venv being installed.
    type: path
attributes:
  check_mode:
    description: It only reads the job's status and progress (the roles start no async job in check mode).
    support: full
  diff_mode:
    description: Nothing to compare.
    support: none
  action:
    description: Runs on the controller; the modules it calls run on the host.
    support: full
notes:
  - O(progress_file), O(log_file) and O(size_of) are mutually exclusive; with none, a line says C(running).
seealso:
  - module: ansible.builtin.async_status
"""

EXAMPLES = r"""
- name: Build the served folder (in the background)
  llmops.serving.weights_convert:
    python: /opt/llmops/venvs/vllm-0.32.0-37ea9d68ebb9/bin/python
    src: /srv/models/src/qwen3-4b
    dest: /srv/models/qwen3-4b
    progress_file: /srv/models/.progress/qwen3-4b-build.json
  async: 86400
  poll: 0
  register: build

- name: Follow the build
  llmops.serving.job_progress:
    jid: "{{ build.ansible_job_id }}"
    label: qwen3-4b build
    timeout: 86400
    interval: 15
    progress_file: /srv/models/.progress/qwen3-4b-build.json
  register: built

- name: Follow a kernel build by its ninja counter
  llmops.serving.job_progress:
    jid: "{{ kernels.ansible_job_id }}"
    label: sgl-kernel 0.3.21
    timeout: 10800
    interval: 20
    log_file: /var/log/llmops/sgl-kernel-build.log
"""

RETURN = r"""
finished:
  description: Whether the job ended (always true unless the module failed on its timeout).
  returned: always
  type: bool
  sample: true
started:
  description: Whether the job had started.
  returned: when the job ended
  type: bool
  sample: true
ansible_job_id:
  description: The job's id.
  returned: when the job ended
  type: str
  sample: j771432823489.4021
results_file:
  description: The job's results file on the host.
  returned: when the job ended
  type: str
  sample: /root/.ansible_async/j771432823489.4021
rounds:
  description: Progress lines printed (the job was still running at each).
  returned: always
  type: int
  sample: 41
followed_s:
  description: Seconds spent following the job.
  returned: always
  type: float
  sample: 617.3
rc:
  description: The job's return code, for jobs that are commands (the job's other keys are returned as they are).
  returned: when the job is a command and ended
  type: int
  sample: 0
"""
