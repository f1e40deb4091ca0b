# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a role's part of a host is still as its last full run left it (the converged_state module).

A role that ran to its end records a stamp: the digest of its inputs (worked out on the controller)
and the checksum of each file it manages. The next run's check compares the stamp with the inputs
it is given and with the files as they are now; only when nothing differs, every service the role
runs is active and no certificate it manages is due for renewal does the role skip its changing
steps. A hand-edited file, a stopped service, new inputs or a new collection make it run in full.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.llmops.serving.plugins.module_utils.rollout import sha256, write_state

STAMP_VERSION = 1


def file_digest(path):
    """sha256 of a file's bytes; None when it does not exist (a file the role removes or never writes)."""
    return sha256(path) or None


def file_digests(paths):
    return dict((path, file_digest(path)) for path in sorted(set(paths)))


def stamp_document(digest, files):
    """The stamp's content for these inputs and these files' checksums."""
    return {"version": STAMP_VERSION, "digest": digest, "files": files}


def read_stamp(path):
    """The stamp at path, or None when it is missing or unreadable."""
    try:
        with open(path) as handle:
            doc = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("version") == STAMP_VERSION else None


def differences(stamp, digest, files_now):
    """Why the files and inputs are not as the stamp recorded them: a list of short reasons, empty
    when they are. files_now maps each managed path to its current digest (None: absent)."""
    if stamp is None:
        return ["no record of a full run"]
    reasons = []
    if stamp.get("digest") != digest:
        reasons.append("the inputs changed since the last full run")
    recorded = stamp.get("files") or {}
    for path in sorted(set(recorded) | set(files_now)):
        if path not in recorded:
            reasons.append("%s is not in the last full run's record" % path)
        elif path not in files_now:
            reasons.append("%s is no longer managed" % path)
        elif recorded[path] != files_now[path]:
            if files_now[path] is None:
                reasons.append("%s was removed" % path)
            elif recorded[path] is None:
                reasons.append("%s appeared" % path)
            else:
                reasons.append("%s was changed" % path)
    return reasons


def write_stamp(path, document):
    """Write the stamp through a temporary file and a rename (0600, folder 0700), as the rollout's
    state file is written. Returns whether the content changed."""
    return write_state(path, document)
