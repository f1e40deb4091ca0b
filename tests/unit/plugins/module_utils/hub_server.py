# -*- coding: utf-8 -*-
"""A small local server speaking the Hugging Face hub routes huggingface_hub uses.

GET /api/models/<repo>/revision/<rev>       model info with siblings (size, blobId, lfs.sha256)
HEAD|GET /<repo>/resolve/<rev>/<file>       file bytes with ETag / X-Repo-Commit / Content-Length
Unknown revisions answer 404 with X-Error-Code: RevisionNotFound, as the hub does.
"""
import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


def git_blob(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Hub(object):
    def __init__(self, repo, folder, commit="0123456789abcdef0123456789abcdef01234567", lfs_suffixes=(".safetensors", ".bin"),
                 tamper=None):
        self.repo, self.folder, self.commit = repo, folder, commit
        self.lfs_suffixes, self.tamper = lfs_suffixes, tamper or {}
        self.revisions = {"main": commit, commit: commit}
        self.files = sorted(f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f)))
        self.requests = []

    def data(self, name):
        with open(os.path.join(self.folder, name), "rb") as f:
            return f.read()

    def info(self):
        sib = []
        for name in self.files:
            d = self.data(name)
            e = {"rfilename": name, "size": len(d), "blobId": git_blob(d)}
            if name.endswith(self.lfs_suffixes):
                e["lfs"] = {"sha256": hashlib.sha256(d).hexdigest(), "size": len(d), "pointerSize": 130}
            sib.append(e)
        return {"id": self.repo, "modelId": self.repo, "sha": self.commit, "private": False, "siblings": sib}

    def start(self):
        hub = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, body=b"", headers=None, head=False):
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _route(self, head):
                path = unquote(urlparse(self.path).path)
                hub.requests.append((self.command, path))
                api = "/api/models/%s/revision/" % hub.repo
                res = "/%s/resolve/" % hub.repo
                if path.startswith(api):
                    rev = path[len(api):]
                    if rev not in hub.revisions:
                        return self._send(404, b'{"error":"Invalid rev id: %s"}' % rev.encode(),
                                          {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "Invalid rev id: " + rev,
                                           "Content-Type": "application/json"}, head)
                    return self._send(200, json.dumps(hub.info()).encode(), {"Content-Type": "application/json"}, head)
                if path.startswith(res):
                    rev, _, name = path[len(res):].partition("/")
                    if rev not in hub.revisions:
                        return self._send(404, b"", {"X-Error-Code": "RevisionNotFound"}, head)
                    if name not in hub.files:
                        return self._send(404, b"", {"X-Error-Code": "EntryNotFound"}, head)
                    d = hub.data(name)
                    etag = hashlib.sha256(d).hexdigest() if name.endswith(hub.lfs_suffixes) else git_blob(d)
                    body = hub.tamper.get(name, d)
                    return self._send(200, body, {"ETag": '"%s"' % etag, "X-Repo-Commit": hub.revisions[rev],
                                                  "Content-Type": "application/octet-stream"}, head)
                return self._send(404, b"", {"X-Error-Code": "RepoNotFound"}, head)

            def do_GET(self):
                self._route(False)

            def do_HEAD(self):
                self._route(True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever)
        self.thread.daemon = True
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
