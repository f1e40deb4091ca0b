# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An Alertmanager webhook receiver that tests run on a host, and the reading of what it got.

HOOK_CODE is a Python program: written to a file and run as `python3 FILE LOG PORT`, it listens on
loopback at PORT and appends each POST body (Alertmanager's webhook JSON) to LOG, one line each.
"""
import calendar
import json
import re

# Appends each POST body to a file, one line each (Alertmanager's webhook JSON).
HOOK_CODE = """import http.server
import sys


class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with open(sys.argv[1], "ab") as out:
            out.write(body.replace(b"\\n", b" ") + b"\\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", int(sys.argv[2])), Hook).serve_forever()
"""


def epoch(stamp):
    """Seconds since the epoch of an RFC 3339 UTC time as Alertmanager writes it (2026-01-02T03:04:05.678Z)."""
    match = re.match(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?Z$", stamp)
    assert match, stamp
    whole = calendar.timegm(tuple(int(part) for part in match.groups()[:6]))
    return whole + float(match.group(7) or 0)


def _alerts(lines):
    """(body, alert) for each alert of each notification in `lines` (one webhook POST body each)."""
    for line in lines:
        try:
            body = json.loads(line)
        except ValueError:
            continue
        for alert in body.get("alerts", []):
            yield body, alert


def firing(lines, alertname, since=None):
    """The first notification in `lines` with alertname firing (since `since`, when given)."""
    for body, alert in _alerts(lines):
        if (alert.get("status") == "firing" and alert.get("labels", {}).get("alertname") == alertname
                and (since is None or epoch(alert["startsAt"]) >= since - 1)):
            return body
    return None


def notified(lines, alertname, status="firing"):
    """Every alert named alertname with that status in `lines`, as (receiver, alert) pairs in the
    order they arrived (Alertmanager sends a group's alerts again with each notification)."""
    return [(body.get("receiver"), alert) for body, alert in _alerts(lines)
            if alert.get("status") == status and alert.get("labels", {}).get("alertname") == alertname]
