# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an engine host serves, what it served before, and whether a rollout must restart it (stdlib only).

The rollout role keeps one state file per host (JSON): ``serving`` and ``previous`` (engine,
version, stack, venv, weights build, chat template digest, since) and ``drained`` (a rollout is
between its drain and its undrain). ``observe`` reads the host as it is; ``reasons`` compares it with
the spec; ``write_state`` replaces the file atomically.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import tempfile
import time


def read_state(path):
    """The state file's content ({} when missing); ValueError names a damaged file."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (IOError, OSError):
        return {}
    except ValueError as e:
        raise ValueError("%s is not JSON (%s): move it aside, the next run records the host again" % (path, e))
    if not isinstance(data, dict):
        raise ValueError("%s holds %s, not an object: move it aside" % (path, type(data).__name__))
    return data


def write_state(path, state):
    """Write state through a temporary file and a rename (mode 0600, folder 0700); True if it changed."""
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o700)
    return write_text(path, json.dumps(state, indent=2, sort_keys=True) + "\n", mode=0o600, sync=True)


def merge(state, update, now=None):
    """A new state: update's keys replace state's (one level deep). A drain that begins records
    ``drained_since`` (epoch seconds, now); an undrain removes it."""
    out = dict(state)
    out.update(update or {})
    if out.get("drained") and not state.get("drained"):
        out["drained_since"] = float(now if now is not None else time.time())
    elif not out.get("drained"):
        out.pop("drained_since", None)
    return out


def drain_metrics(state, cordoned=False):
    """Prometheus text (node_exporter's textfile collector format) of whether the host is drained and
    since when, and whether it is cordoned, for the alert that pages when a host stays drained and
    the one that keeps a planned restart (drained) or a maintenance (cordoned) from paging."""
    lines = ["# HELP llmops_host_drained 1 while a rollout or tune holds this host drained (out of its gateways), else 0.",
             "# TYPE llmops_host_drained gauge",
             "llmops_host_drained %d" % (1 if state.get("drained") else 0),
             "# HELP llmops_host_cordoned 1 while the host is cordoned for maintenance (serving_cordoned), else 0.",
             "# TYPE llmops_host_cordoned gauge",
             "llmops_host_cordoned %d" % (1 if cordoned else 0)]
    if state.get("drained") and state.get("drained_since") is not None:
        lines += ["# HELP llmops_host_drained_since_timestamp_seconds When the host was drained (epoch seconds; only while it is).",
                  "# TYPE llmops_host_drained_since_timestamp_seconds gauge",
                  "llmops_host_drained_since_timestamp_seconds %.3f" % float(state["drained_since"])]
    return "\n".join(lines) + "\n"


def write_text(path, text, mode=0o644, sync=False):
    """Write text to path through a temporary file and a rename (flushed to disk first with sync);
    True if it changed."""
    try:
        with open(path) as f:
            if f.read() == text:
                return False
    except (IOError, OSError):
        pass
    fd, tmp = tempfile.mkstemp(prefix=".llmops-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except Exception:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def link_target(path):
    """Where a link points (resolved); a real folder is itself; '' when missing."""
    if os.path.islink(path):
        return os.path.realpath(path)
    return path if os.path.exists(path) else ""


def sha256(path):
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except (IOError, OSError):
        return ""


def observe(state_path, current_link, model_path, chat_template, units, is_active):
    """What the host runs now. units: {engine: systemd unit}; is_active(unit) -> bool."""
    running = ""
    for engine in sorted(units):
        if is_active(units[engine]):
            running = engine
            break
    return dict(state=read_state(state_path),
                current=os.path.realpath(current_link) if os.path.islink(current_link) else "",
                model_build=link_target(model_path),
                chat_template_sha256=sha256(chat_template),
                running_engine=running)


def health_urls(address, path, tls_first):
    """The URLs to ask for an engine's health at address (HOST:PORT): https first where the host
    has the collection's CA (its engine may serve TLS), then plain http. A run that changes the
    engine's TLS asks a member that still serves the other way."""
    schemes = ("https", "http") if tls_first else ("http",)
    return ["%s://%s%s" % (scheme, address, path) for scheme in schemes]


def engine_health(urls, fetch, timeout=5.0):
    """Whether the engine answers one of urls with 200 within timeout: (healthy, why not).

    An active unit is not a serving engine: one still loading, wedged (stopped by a signal, its GPU
    gone) or erroring answers late or otherwise, and a pool's budget must not count it.
    fetch(url, timeout) returns the HTTP status, raising on a connection failure or a timeout. The
    next URL is tried only after a connection failure (another scheme), never after a timeout or
    an answer: a wedged engine costs one timeout."""
    why = []
    for url in urls:
        try:
            status = fetch(url, timeout)
        except Exception as e:  # pylint: disable=broad-except
            text = str(e)[:200] or type(e).__name__
            why.append("%s: %s" % (url, text))
            if "timed out" in text.lower() or isinstance(e, TimeoutError):
                break
            continue
        if status == 200:
            return True, ""
        why.append("%s answered %s" % (url, status))
        break
    return False, "; ".join(why)


def reasons(observed, desired, unit_changed):
    """Why the host must restart onto desired (empty: it serves the spec). desired has engine, venv,
    model and chat_template; unit_changed is the engine role's prediction for unit, environment,
    launcher and link."""
    out = []
    state = observed.get("state") or {}
    served = state.get("serving") or {}
    running = observed.get("running_engine") or ""
    if running != desired["engine"]:
        out.append("engine %s -> %s" % (running or "stopped", desired["engine"]))
    current = observed.get("current") or ""
    if current != desired["venv"]:
        out.append("%s -> %s" % (os.path.basename(current) or "none", os.path.basename(desired["venv"])))
    if unit_changed:
        out.append("unit, environment or launcher")
    if served and served.get("model", "") != desired["model"]:
        out.append("weights build %s" % os.path.basename(desired["model"]))
    if served and served.get("chat_template", "") != desired["chat_template"]:
        out.append("chat template")
    if state.get("drained"):
        out.append("left drained by an interrupted run")
    return out


def pool_budget(host, pools, available, draining, min_available):
    """Whether draining host now keeps its model pool at min_available servers, like a
    PodDisruptionBudget.

    pools:     {host: pool name} of the hosts that serve an API (an instance's rank 0), the model
               each serves; the hosts of one name form a pool (the gateway's upstream).
    available: {host: bool} whether each serves now: reachable, its engine active and answering its
               health path (engine_health), not drained, neither in its own state nor on the gateways.
    draining:  the hosts that drain now with host (its batch, host included).
    Returns dict(pool, members, available, after, ok, msg); a host that serves no API, or that does
    not serve now (draining it takes nothing away), is always ok.
    """
    pool = pools.get(host)
    if pool is None:
        return dict(pool=None, members=[], available=[], after=0, ok=True, msg="")
    members = sorted(h for h, name in pools.items() if name == pool)
    up = [h for h in members if available.get(h)]
    after = [h for h in up if h not in set(draining) | {host}]
    need = int(min_available)
    ok = not available.get(host) or len(after) >= need
    msg = "" if ok else (
        "pool %s (%s) would keep %d of its %d servers serving while %s drains (%d serve now: %s), and "
        "serving_rollout_min_available is %d: nothing on %s was changed. Wait until the pool's other servers "
        "serve again, add a server to the pool, restart fewer hosts of it at once (serving_rollout_serial), "
        "or set serving_rollout_min_available: 0 to accept that the pool stops serving while it restarts."
        % (pool, ", ".join(members), len(after), len(members),
           ", ".join(sorted(set(draining) & set(members) | {host})), len(up), ", ".join(up) or "none", need, host))
    return dict(pool=pool, members=members, available=up, after=len(after), ok=ok, msg=msg)


def last_version_move(states, target):
    """The fleet's last version move, the one rollback.yml undoes, and whether target is its target.

    Every rollout that moves a host to another venv (site.yml, upgrade.yml, or a rollback) records
    ``serving.moved_by`` = {id, from}: the id of that run (``rollout_run_id``, sortable by time) and the
    venv the host left.
    states: {host: the host's state file}; target: the venv of the serving spec given to rollback.yml.
    Returns dict(id, to, hosts, ok, msg): the newest move, the venv it moved hosts to, the hosts it
    moved that still serve that venv (they roll back; every other host stays), and whether target
    is that venv (msg says what to do when not). Hosts recorded before moves had ids have none: with
    no move recorded anywhere, id is None and every host that serves target may roll back (ok).
    """
    moves = {}
    for host, state in states.items():
        serving = (state or {}).get("serving") or {}
        moved = serving.get("moved_by") or {}
        if moved.get("id") and serving.get("venv"):
            moves.setdefault((moved["id"], serving["venv"]), []).append(host)
    if not moves:
        return dict(id=None, to=None, hosts=[], ok=True, msg="")
    newest = max(key[0] for key in moves)
    destinations = sorted(key[1] for key in moves if key[0] == newest)
    if len(destinations) != 1:
        raise ValueError("move %s recorded different venvs (%s): one run moves every host to one venv; check "
                         "the hosts' state files" % (newest, ", ".join(destinations)))
    to = destinations[0]
    hosts = sorted(moves[(newest, to)])
    ok = target == to
    msg = "" if ok else (
        "the fleet's last version move (%s) put %s on %s, and rollback.yml undoes only that move: it was "
        "given a serving spec whose venv is %s. Nothing was changed. Run rollback.yml with the serving spec "
        "that move was made with (the -e of that upgrade.yml or site.yml run, e.g. its serving_stack), or "
        "upgrade.yml to the version you want."
        % (newest, ", ".join(hosts), os.path.basename(to), os.path.basename(target or "") or "empty"))
    return dict(id=newest, to=to, hosts=hosts, ok=ok, msg=msg)
