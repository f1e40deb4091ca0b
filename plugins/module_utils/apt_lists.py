# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When to run ``apt-get update``, judged by what the package lists hold, not by a folder's age.

Ansible's ``apt: cache_valid_time`` trusts the modification time of the lists folder (or apt's
periodic stamp). A freshly imaged host whose lists were dropped at build time has a folder that
looks minutes old and holds nothing, so the cache is judged valid and no package is found. Here a
refresh is needed when:

- no package list exists at all (an empty folder is never trusted, whatever its age);
- a list recorded at the last refresh is gone;
- the apt sources differ from the ones the last refresh read (a digest of their contents);
- the last refresh is older than the allowed age, or no refresh was ever recorded.

The record of the last refresh lives outside apt's lists folder (``apt-get update`` deletes files
it does not know there). Pure logic: file locations and the command runner are parameters.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import hashlib
import json
import os
import re
import time

DEFAULT_LISTS_DIR = "/var/lib/apt/lists"
DEFAULT_SOURCES = ("/etc/apt/sources.list", "/etc/apt/sources.list.d")
DEFAULT_RECORD = "/var/lib/llmops/apt-refresh.json"
# Index files of binary packages, compressed or not (apt keeps them as fetched with some options).
PACKAGES_LIST_RE = re.compile(r"_Packages(\.(gz|xz|bz2|lz4|zst))?$")
SOURCE_FILE_RE = re.compile(r"\.(list|sources)$")
LOCK_ERROR_RE = re.compile(r"Could not get lock|Unable to lock directory|is held by process")
# A record from the future (clock stepped back, copied image) proves nothing about freshness.
CLOCK_SKEW_SECONDS = 300


def package_lists(lists_dir):
    """Names of the binary package index files in the lists folder (sorted)."""
    try:
        names = os.listdir(lists_dir)
    except OSError:
        return []
    return sorted(n for n in names if PACKAGES_LIST_RE.search(n)
                  and os.path.isfile(os.path.join(lists_dir, n)))


def source_files(sources):
    """The apt source files named by ``sources`` (files, or folders of *.list / *.sources)."""
    found = []
    for entry in sources:
        if os.path.isdir(entry):
            found.extend(p for p in glob.glob(os.path.join(entry, "*"))
                         if SOURCE_FILE_RE.search(p) and os.path.isfile(p))
        elif os.path.isfile(entry):
            found.append(entry)
    return sorted(set(found))


def sources_digest(sources):
    """sha256 over each source file's path and contents: any edit, addition or removal shows."""
    digest = hashlib.sha256()
    for path in source_files(sources):
        with open(path, "rb") as handle:
            content = handle.read()
        digest.update(path.encode("utf-8") + b"\0" + content + b"\0")
    return digest.hexdigest()


def read_record(path):
    """The last refresh's record, or None when there is none or it cannot be read."""
    try:
        with open(path) as handle:
            record = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    return record


def write_record(path, record):
    """Write the record atomically (a half-written record would be read as none)."""
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as handle:
        json.dump(record, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)


def refresh_reason(lists, digest, record, now, valid_time, lists_dir=DEFAULT_LISTS_DIR):
    """Why the lists must be refreshed, or None when they can be trusted.

    ``lists``: package list names present now; ``digest``: the sources' digest now; ``record``:
    the last refresh's record (or None); ``valid_time``: seconds a refresh stays good.
    """
    if not lists:
        return "no package lists in %s (a fresh image or a cleaned host)" % lists_dir
    if not record:
        return "no record of an earlier refresh on this host"
    missing = sorted(set(record.get("lists") or []) - set(lists))
    if missing:
        return "%d package list(s) of the last refresh are gone (%s)" % (
            len(missing), ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else ""))
    if record.get("sources_sha256") != digest:
        return "the apt sources changed since the last refresh"
    try:
        refreshed_at = float(record.get("refreshed_at"))
    except (TypeError, ValueError):
        return "the record of the last refresh has no time"
    age = now - refreshed_at
    if age < -CLOCK_SKEW_SECONDS:
        return "the last refresh is recorded %d s in the future" % -age
    if age > valid_time:
        return "the last refresh is %d s old (allowed: %d s)" % (age, valid_time)
    return None


def run_update(run_command, apt_get, lock_timeout, retries=3, sleep=time.sleep, clock=time.time):
    """``apt-get update``: retried while another apt holds the lists lock (up to lock_timeout
    seconds), and up to ``retries`` times in all for a failed fetch (a mirror's passing fault).

    Returns (rc, stdout, stderr) of the last attempt.
    """
    argv = [apt_get, "update", "-q"]
    deadline = clock() + lock_timeout
    failures = 0
    while True:
        rc, out, err = run_command(argv)
        if rc == 0:
            return rc, out, err
        if LOCK_ERROR_RE.search(err or ""):
            if clock() >= deadline:
                return rc, out, err
            sleep(min(5, max(0.0, deadline - clock())))
            continue
        failures += 1
        if failures >= retries:
            return rc, out, err
        sleep(2 ** failures)


def refresh(params, run_command, apt_get, check_mode, clock=time.time, sleep=time.sleep):
    """Decide and, outside check mode, refresh. Returns the module's result (without msg on OK).

    Raises RuntimeError with the reason and apt's own error when ``apt-get update`` fails.
    """
    lists_dir = params["lists_dir"]
    lists = package_lists(lists_dir)
    digest = sources_digest(params["sources"])
    record = read_record(params["record_path"])
    now = clock()
    reason = "forced" if params.get("force") else refresh_reason(
        lists, digest, record, now, params["valid_time"], lists_dir)
    result = {
        "changed": reason is not None,
        "refreshed": False,
        "reason": reason or "lists present and refreshed %d s ago from the same sources" % (
            now - float(record["refreshed_at"])),
        "package_lists": len(lists),
        "sources_sha256": digest,
    }
    if reason is None or check_mode:
        return result
    rc, out, err = run_update(run_command, apt_get, params["lock_timeout"], sleep=sleep, clock=clock)
    if rc != 0:
        raise RuntimeError(
            "apt-get update failed (rc %d) while refreshing because %s: %s. Check the sources in "
            "/etc/apt/sources.list and /etc/apt/sources.list.d (and the mirror variables that "
            "write them); nothing was installed." % (rc, reason, (err or out).strip()[-2000:]))
    lists = package_lists(lists_dir)
    if not lists:
        raise RuntimeError(
            "apt-get update succeeded but %s holds no package list: the configured sources name "
            "no repository for this host's architecture. Check /etc/apt/sources.list and "
            "/etc/apt/sources.list.d." % lists_dir)
    write_record(params["record_path"], {
        "refreshed_at": clock(), "sources_sha256": digest, "lists": lists})
    result.update(refreshed=True, package_lists=len(lists))
    return result
