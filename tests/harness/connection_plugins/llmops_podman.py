# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-host connection: containers.podman.podman with module pipelining.

Real fleets connect over SSH with ``pipelining = true`` (``ansible.cfg``): each module travels on
the stdin of one remote command. The stock podman connection cannot pipeline because it runs
``podman exec`` without ``-i``, so every module costs a temporary directory, a copy, a chmod and a
cleanup, each one more ``podman exec``. Attaching stdin when there is data makes the test hosts
run modules the way SSH hosts do, at about half the wall time per task on a 2-core machine.

On a root controller the commands, and the files put and fetched, go through the container's
namespaces instead of a podman process each (tests/harness/podman_enter.py): ``nsenter`` into the
container's init, and its root under /proc for files. That is ~3 ms a command instead of ~0.2 s,
and no ``podman mount`` per task. Modules are still pipelined on the command's stdin, as over SSH.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = """
    name: llmops_podman
    short_description: Run modules in a podman container with pipelining (llmops.serving test hosts)
    description:
        - The containers.podman.podman connection with C(podman exec -i) when a command has input,
          so that new-style modules are pipelined as over SSH.
    options:
      remote_addr:
        description:
          - The name or ID of the container.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description:
          - The user commands run as inside the container.
        ini:
          - section: defaults
            key: remote_user
        env:
          - name: ANSIBLE_REMOTE_USER
        vars:
          - name: ansible_user
      podman_extra_args:
        description:
          - Extra arguments for the podman command line.
        default: ''
        ini:
          - section: defaults
            key: podman_extra_args
        vars:
          - name: ansible_podman_extra_args
        env:
          - name: ANSIBLE_PODMAN_EXTRA_ARGS
      podman_executable:
        description:
          - The podman executable.
        default: podman
        vars:
          - name: ansible_podman_executable
        env:
          - name: ANSIBLE_PODMAN_EXECUTABLE
"""

import os
import shlex
import subprocess
import sys

from ansible import constants as C
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import podman_enter  # noqa: E402  pylint: disable=wrong-import-position


class Connection(PodmanConnection):
    """containers.podman.podman whose commands read their input on stdin."""

    transport = "llmops_podman"
    has_pipelining = True

    def is_pipelining_enabled(self, wrap_async=False):
        """Always, like the SSH hosts of the project's ansible.cfg, except for async tasks.

        Async tasks go through Ansible's async wrapper, which pipelining bypasses (only connections
        with native async, such as WinRM, pipeline them); ``always_pipeline_modules`` would run
        them in the foreground.
        """
        return not wrap_async and not C.DEFAULT_KEEP_REMOTE_FILES

    _pid = None

    def _connect(self):
        """The container's init through its namespaces where the controller may enter them (no
        ``podman mount``: files go through /proc/PID/root), else the parent's mount."""
        if podman_enter.enabled(self.user):
            self._pid = podman_enter.container_pid(self._container_id, self.get_option("podman_executable"))
        if not self._pid:
            return super(Connection, self)._connect()
        ConnectionBase._connect(self)
        self._mount_point = ("/proc/%s/root" % self._pid).encode()
        self._connected = True
        return self

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=False):
        """Run cmd in the container, its stdin attached when there is input (a pipelined module)."""
        # The parent's exec_command would run without -i; only the base class's bookkeeping is wanted.
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        argv = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        if self._pid:
            proc = subprocess.Popen(podman_enter.command(self._pid, argv), stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            stdout, stderr = proc.communicate(input=in_data)
            return proc.returncode, stdout, stderr
        args = ["exec"]
        if in_data is not None:
            args.append("-i")
        if self.user:
            args.extend(("--user", self.user))
        return self._podman(args, argv, in_data)

    def _copy(self, copy, path, *args):
        """copy(*args) through /proc/PID/root, or the parent's podman cp where a link lies on the way to path."""
        if not self._pid or not podman_enter.through_symlink(
                "/proc/%s/root" % self._pid, to_native(path, errors="surrogate_or_strict")):
            return copy(*args)
        mount, self._mount_point = self._mount_point, None
        try:
            return copy(*args)
        finally:
            self._mount_point = mount

    def put_file(self, in_path, out_path):
        """The parent's put_file, through /proc/PID/root where no link lies on the way."""
        return self._copy(super(Connection, self).put_file, out_path, in_path, out_path)

    def fetch_file(self, in_path, out_path):
        """The parent's fetch_file, through /proc/PID/root where no link lies on the way."""
        return self._copy(super(Connection, self).fetch_file, in_path, in_path, out_path)
