# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is wrong with an API key, said without the key.

The keys end up in a systemd EnvironmentFile (which expands `$` and interprets quotes and
backslashes), in an nginx string and in HTTP Authorization headers. Allowing only the characters
of an RFC 6750 bearer token (b64token: letters, digits, - . _ ~ + / and trailing =) keeps every one
of those places literal without escaping rules of its own. The strength check is an estimate: the
key's length times the Shannon entropy of its characters, which a random hex or base64 key of the
minimum length passes easily and a word, a repeated pattern or the example placeholder does not.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

ALLOWED = re.compile(r"^[A-Za-z0-9._~+/-]+=*$")
MIN_LENGTH = 16
MIN_BITS = 64
# Words of placeholders that documentation and examples use: a key holding one was typed, not generated.
PLACEHOLDER_WORDS = ("replace", "changeme", "change-me", "change_me", "example", "placeholder",
                     "your-key", "yourkey", "secret", "password", "xxxxxxxx", "todo", "dummy")
NAMED_CHARACTERS = {'"': "a double quote", "'": "a single quote", "$": "a dollar sign", "\\": "a backslash",
                    "`": "a backtick", ";": "a semicolon", "#": "a hash sign"}


def estimated_bits(key):
    """Length x Shannon entropy per character, in bits."""
    if not key:
        return 0.0
    counts = {}
    for char in key:
        counts[char] = counts.get(char, 0) + 1
    per_char = -sum((n / float(len(key))) * math.log(n / float(len(key)), 2) for n in counts.values())
    return per_char * len(key)


def _bad_characters(key):
    found = []
    for char in key:
        if ALLOWED.match(char) or char == "=":
            continue
        name = "whitespace" if char.isspace() else NAMED_CHARACTERS.get(char, "a %r" % char if char.isprintable() else "a control character")
        if name not in found:
            found.append(name)
    return found


def problems(key, min_length=MIN_LENGTH, min_bits=MIN_BITS):
    """A list of sentences, none of which holds the key (empty: the key is fine)."""
    if not isinstance(key, str) or not key:
        return ["is empty"]
    out = []
    if len(key) < min_length:
        out.append("is shorter than %d characters" % min_length)
    bad = _bad_characters(key)
    if bad:
        out.append("holds %s (allowed: letters, digits, - . _ ~ + / and a trailing =)" % ", ".join(bad))
    elif not ALLOWED.match(key):
        out.append("has = inside it (allowed only at the end, as base64 padding)")
    lowered = key.lower()
    words = [w for w in PLACEHOLDER_WORDS if w in lowered]
    if words:
        out.append("looks like a placeholder (it contains %r)" % words[0])
    bits = estimated_bits(key)
    if bits < min_bits and len(key) >= min_length:
        out.append("is too predictable (about %d bits; at least %d)" % (int(bits), min_bits))
    return out


def describe(keys, min_length=MIN_LENGTH, min_bits=MIN_BITS):
    """{label: key} -> one sentence per bad key, named by its label (never by its value)."""
    sentences = []
    for label in sorted(keys):
        found = problems(keys[label], min_length, min_bits)
        if found:
            sentences.append("%s %s" % (label, "; ".join(found)))
    return sentences


NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


CLIENT_FIELDS = ("name", "key", "priority")
PRIORITY_RANGE = (-1000, 1000)


def client_problems(clients, engine_keys=(), variable="gateway_api_keys"):
    """The gateway's clients ([{name, key, priority}]) -> sentences, none holding a key."""
    if not isinstance(clients, list) or not clients:
        return ["%s is empty: the gateway needs at least one client key, and the engine key "
                "(serving_api_key) is never one" % variable]
    out = []
    names = [c.get("name") if isinstance(c, dict) else None for c in clients]
    keys = [c.get("key") if isinstance(c, dict) else None for c in clients]
    unnamed = [str(i) for i, n in enumerate(names) if not isinstance(n, str) or not NAME.match(n)]
    if unnamed:
        out.append("%s[%s]: a name is not 1-64 letters, digits, _ . -" % (variable, ", ".join(unnamed)))
    repeated = sorted(set(n for n in names if isinstance(n, str) and names.count(n) > 1))
    if repeated:
        out.append("names repeat: %s" % ", ".join(repeated))
    for i, client in enumerate(clients):
        if not isinstance(client, dict):
            continue
        unknown = sorted(str(k) for k in set(client) - set(CLIENT_FIELDS))
        if unknown:
            out.append("%s[%d] (%s): unknown keys %s (known: %s)"
                       % (variable, i, names[i], ", ".join(unknown), ", ".join(CLIENT_FIELDS)))
        priority = client.get("priority")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)
                                     or not PRIORITY_RANGE[0] <= priority <= PRIORITY_RANGE[1]):
            out.append("%s[%d] (%s): priority must be an integer from %d to %d (higher is served sooner), got %r"
                       % (variable, i, names[i], PRIORITY_RANGE[0], PRIORITY_RANGE[1], priority))
    labels = dict(("%s[%d] (%s)" % (variable, i, names[i]), keys[i]) for i in range(len(clients)))
    out.extend(describe(labels))
    usable = [k for k in keys if isinstance(k, str) and k]
    if len(set(usable)) != len(usable):
        out.append("two clients share a key")
    holders = [str(names[i]) for i, k in enumerate(keys) if isinstance(k, str) and k and k in set(engine_keys)]
    if holders:
        out.append("the key of %s is the engine key (serving_api_key or serving_admin_api_key): clients must "
                   "never hold it" % ", ".join(holders))
    return out
