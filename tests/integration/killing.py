"""Killing an ansible-playbook run as a crash would: the run and its workers at once.

Ansible's worker processes start sessions of their own (os.setsid), so a SIGKILL to the run's
process group leaves the worker of the task in flight running, orphaned; a real crash of the
controller (power, OOM) takes them all.
"""
import os
import signal
import subprocess


def kill_run(pid):
    """SIGKILL the ansible-playbook `pid`, its process group and its workers."""
    # Stopped first, it forks no new worker while they are killed.
    os.kill(pid, signal.SIGSTOP)
    subprocess.run(["pkill", "-KILL", "-P", str(pid)], check=False)
    os.killpg(pid, signal.SIGKILL)
