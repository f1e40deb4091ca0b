# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model weights: integrity manifests, hub fetches, .bin -> safetensors conversion, LoRA merges.

Two kinds of functions live here:
- pure ones (manifests, verification, shard completeness, progress files, atomic swaps) that need
  only the standard library and run inside the Ansible module process;
- `fetch_hf`, `build` and their helpers, which need huggingface_hub / torch / safetensors and
  run in an engine venv's interpreter through venv_runner (this file's source is sent to the child,
  so it must not import anything outside the standard library at module level).

Every write goes to a temporary folder beside the target, is verified, then swapped in.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import hashlib
import json
import math
import os
import re
import shutil
import struct
import tempfile
import threading
import time

MANIFEST = ".llmops-manifest.json"
BUILD_MARKER = "llmops-weights.json"
# LoRA adapters served by name live in the build, beside the weights they were checked against:
# <build>/adapters/<name>/, listed with their ranks in <build>/adapters.json.
ADAPTERS_DIR = "adapters"
ADAPTERS_INDEX = "adapters.json"
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")
# Files the tokenizer role may rewrite (the patched chat template) are recorded but not verified.
MUTABLE = ("tokenizer_config.json",)
CHUNK = 8 * 1024 * 1024
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
_SKIP_DIRS = (".cache", ".git")


class WeightsError(Exception):
    """A problem the user must fix; the message says what and how."""


# ---------------------------------------------------------------------------- progress
class Progress(object):
    """Writes {phase, done, total, rate, eta_s, state} as JSON to a file, at most every `every` s."""

    def __init__(self, path, phase, total=0, every=5.0):
        self.path, self.phase, self.total, self.every = path, phase, int(total or 0), every
        self.done, self.start, self._last = 0, time.time(), 0.0
        self.write(force=True)

    def add(self, n):
        self.done += n
        self.write()

    def set(self, done, total=None):
        self.done = done
        if total is not None:
            self.total = total
        self.write()

    def snapshot(self, state="running", **extra):
        el = max(time.time() - self.start, 1e-6)
        rate = self.done / el
        eta = (self.total - self.done) / rate if rate > 0 and self.total >= self.done else None
        d = dict(phase=self.phase, done=self.done, total=self.total, rate=rate, elapsed_s=round(el, 1),
                 eta_s=None if eta is None else round(eta, 1), state=state, time=time.time())
        d.update(extra)
        return d

    def write(self, force=False, state="running", **extra):
        if not self.path:
            return
        now = time.time()
        if not force and now - self._last < self.every:
            return
        self._last = now
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.snapshot(state, **extra), f)
        os.rename(tmp, self.path)

    def finish(self, state="done", **extra):
        self.write(force=True, state=state, **extra)


def describe_progress(p):
    """One line for the play's output: '3.1 GiB of 65.0 GiB (4.8%), 210 MiB/s, ETA 5m02s'."""
    if not p:
        return "no progress reported yet"
    done, total = p.get("done", 0), p.get("total", 0)
    s = "%s: %s" % (p.get("phase", "?"), human_bytes(done))
    if total:
        s += " of %s (%.1f%%)" % (human_bytes(total), 100.0 * done / total)
    s += ", %s/s" % human_bytes(p.get("rate") or 0)
    eta = p.get("eta_s")
    if p.get("state") == "running" and eta is not None:
        s += ", ETA %dm%02ds" % (int(eta) // 60, int(eta) % 60)
    if p.get("state") != "running":
        s += " [%s]" % p.get("state")
    return s


def human_bytes(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0


# ---------------------------------------------------------------------------- manifests
def sha256_file(path, progress=None):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(CHUNK)
            if not b:
                break
            h.update(b)
            if progress:
                progress.add(len(b))
    return h.hexdigest()


def list_files(folder):
    """Relative paths of the files under folder (links followed), hidden caches and our manifest left out."""
    out = []
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".llmops"))
        for name in sorted(files):
            if name == MANIFEST or name.endswith(".lock") or name.endswith(".incomplete"):
                continue
            out.append(os.path.relpath(os.path.join(root, name), folder))
    return out


def make_manifest(folder, known_sha256=None, progress=None, hash_files=True):
    """{files: {rel: {size, mtime, sha256, sha256_from}}}; sha256 from known_sha256 (the hub) or hashed here."""
    known_sha256 = known_sha256 or {}
    files = {}
    for rel in list_files(folder):
        p = os.path.join(folder, rel)
        st = os.stat(p)
        entry = dict(size=st.st_size, mtime=int(st.st_mtime))
        if rel in known_sha256:
            entry.update(sha256=known_sha256[rel], sha256_from="hub")
            if progress:
                progress.add(st.st_size)
        elif hash_files:
            entry.update(sha256=sha256_file(p, progress), sha256_from="local")
        files[rel] = entry
    return dict(version=1, files=files, total_bytes=sum(e["size"] for e in files.values()))


def read_manifest(path):
    try:
        with open(path) as f:
            m = json.load(f)
        return m if isinstance(m, dict) and "files" in m else None
    except (IOError, OSError, ValueError):
        return None


def write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.rename(tmp, path)


def verify(folder, manifest, mode="cheap", progress=None, skip=MUTABLE):
    """Check folder against manifest; returns a list of problems (empty: intact).

    cheap: every file present with its size; a file whose mtime moved is hashed.
    full:  every file hashed.
    """
    problems = []
    for rel, e in sorted(manifest["files"].items()):
        if rel in skip:
            continue
        p = os.path.join(folder, rel)
        if not os.path.exists(p):
            problems.append("%s: missing" % rel)
            continue
        st = os.stat(p)
        if st.st_size != e["size"]:
            kind = "truncated" if st.st_size < e["size"] else "grown"
            problems.append("%s: %s (%d bytes, the manifest says %d)" % (rel, kind, st.st_size, e["size"]))
            continue
        if mode == "full" or int(st.st_mtime) != e.get("mtime"):
            if "sha256" not in e:
                continue
            got = sha256_file(p, progress)
            if got != e["sha256"]:
                problems.append("%s: sha256 %s, the manifest (%s) says %s" % (rel, got, e.get("sha256_from", "?"), e["sha256"]))
    return problems


def weights_index(folder):
    """(index file, {tensor: shard}) of a sharded checkpoint, or (None, None)."""
    for name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        p = os.path.join(folder, name)
        if os.path.exists(p):
            with open(p) as f:
                return name, json.load(f).get("weight_map", {})
    return None, None


def weight_files(folder):
    """The checkpoint's weight files: from its index when sharded, else the single-file names."""
    index, wmap = weights_index(folder)
    if index:
        return index, sorted(set(wmap.values()))
    for name in ("model.safetensors", "pytorch_model.bin"):
        if os.path.exists(os.path.join(folder, name)):
            return None, [name]
    return None, []


def check_shards(folder):
    """Problems with the shard set: index names a shard that is absent, or no weights at all."""
    index, shards = weight_files(folder)
    if not shards:
        return ["%s holds no model.safetensors, pytorch_model.bin or shard index" % folder]
    missing = [s for s in shards if not os.path.exists(os.path.join(folder, s))]
    return ["%s names shard %s, which is missing" % (index, s) for s in missing]


def checkpoint_format(folder):
    index, shards = weight_files(folder)
    if not shards:
        return None
    return "safetensors" if shards[0].endswith(".safetensors") else "bin"


def recipe_digest(parts):
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


def manifest_digest(manifest):
    """Identity of a folder's content by the manifest's (name, size, sha256), mtimes left out."""
    return recipe_digest(sorted((k, v["size"], v.get("sha256")) for k, v in manifest["files"].items()))


def is_current(path, digest):
    """The served folder was built from this recipe and still matches its own manifest (cheap)."""
    marker = read_manifest_file(os.path.join(path, BUILD_MARKER))
    if not marker or marker.get("digest") != digest:
        return False, ["not built from this source/adapter/template"]
    man = read_manifest(os.path.join(path, MANIFEST))
    if not man:
        return False, ["no manifest"]
    problems = verify(path, man, "cheap")
    return not problems, problems


def reusable_build(path, base_digest, digest):
    """The build path serves when it holds the weights of base_digest (same source, merged adapter
    and template) for another set of adapters served by name, and they still match its manifest
    (cheap; build() compares the hashes of what it copies); else None. A build of the same digest
    is never reused: it is being rebuilt because it is damaged."""
    marker = read_manifest_file(os.path.join(path, BUILD_MARKER))
    if not marker or marker.get("base_digest") != base_digest or marker.get("digest") == digest:
        return None
    man = read_manifest(os.path.join(path, MANIFEST))
    if not man or verify(path, man, "cheap"):
        return None
    return os.path.realpath(path)


def _reused_files(manifest):
    """{rel: manifest entry} of a build's files that a new build of other adapters copies: all its
    manifest records but the adapters served by name (and hidden files)."""
    return dict((rel, entry) for rel, entry in manifest["files"].items()
                if rel != ADAPTERS_INDEX and rel.split("/")[0] != ADAPTERS_DIR
                and not os.path.basename(rel).startswith("."))


def read_manifest_file(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return None


def swap_in(new, path):
    """Replace path with folder new: the old folder stays whole until the new one is in place."""
    old = None
    if os.path.lexists(path):
        old = tempfile.mkdtemp(prefix=".%s.old-" % os.path.basename(path), dir=os.path.dirname(path))
        os.rmdir(old)
        os.rename(path, old)
    os.rename(new, path)
    if old:
        shutil.rmtree(old, ignore_errors=True)


def temp_beside(path, tag="tmp"):
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        os.makedirs(parent)
    return tempfile.mkdtemp(prefix=".%s.%s-" % (os.path.basename(path), tag), dir=parent)


# ioctl FICLONE: the new file shares the source's blocks copy-on-write (btrfs, XFS with reflink).
FICLONE = 0x40049409


def clone_or_copy(src, dst):
    """A file of its own at dst: a reflink where the filesystem has them, else a copy. Never a hard
    link, which would share the inode (its modes, and any later edit of the source) with dst."""
    d = os.path.dirname(dst)
    if not os.path.isdir(d):
        os.makedirs(d)
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        try:
            import fcntl
            fcntl.ioctl(fout.fileno(), FICLONE, fin.fileno())
            return "reflink"
        except (ImportError, IOError, OSError):
            shutil.copyfileobj(fin, fout, CHUNK)
            return "copy"


def git_blob_sha1(path):
    """The git object id of a file (what the hub reports as blob_id for non-LFS files)."""
    h = hashlib.sha1()
    h.update(b"blob %d\0" % os.path.getsize(path))
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(CHUNK), b""):
            h.update(b)
    return h.hexdigest()


def tree_bytes(folder):
    """Bytes of the files under folder (0 when it is missing)."""
    n = 0
    for root, dirs, files in os.walk(folder):
        for name in files:
            try:
                n += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return n


def free_bytes(folder):
    """Bytes an unprivileged writer may still use on folder's filesystem (its nearest existing parent)."""
    while not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def _gib(n):
    return "%.2f GiB" % (n / 2.0 ** 30)


def check_download_space(what, dest_root, download, build, min_free_bytes):
    """Raise WeightsError before a download when its filesystem cannot take it, the build that
    copies it, and min_free_bytes left free (serving_models_min_free_bytes)."""
    need = download + build + int(min_free_bytes or 0)
    have = free_bytes(dest_root)
    if have < need:
        raise WeightsError(
            "%s: the download (%s) and the build from it (%s) need %s on the filesystem of %s, and "
            "serving_models_min_free_bytes (%s) must stay free; it has %s free. Nothing was downloaded: "
            "free space there, or point serving_models_root at a larger filesystem."
            % (what, _gib(download), _gib(build), _gib(download + build), dest_root,
               _gib(int(min_free_bytes or 0)), _gib(have)))
    return have


class _DirWatcher(object):
    """Reports the bytes present under a folder (downloads in flight included) to a Progress."""

    def __init__(self, folder, progress, base=0, every=2.0):
        self.folder, self.progress, self.base, self.every = folder, progress, base, every
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run)
        self._t.daemon = True

    def _size(self):
        return tree_bytes(self.folder)

    def _run(self):
        while not self._stop.wait(self.every):
            self.progress.set(self.base + self._size())

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *a):
        self._stop.set()
        self._t.join()


# ---------------------------------------------------------------------------- hub fetch (venv)
def fetch_hf(repo, revision, dest_root, allow_patterns=None, endpoint=None, token=None, retries=5,
             progress_path=None, verify_mode="cheap", check_only=False, min_free_bytes=0):
    """Download repo@revision with huggingface_hub into <dest_root>/<repo>/<commit>, verify, publish.

    Runs in the venv. The folder is published (renamed into place) only after every file matched
    the hub's sha256 (LFS) or git blob id; a partial download stays in a staging folder beside it
    and is resumed by the next run.
    """
    if endpoint:
        os.environ["HF_ENDPOINT"] = endpoint.rstrip("/")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub import errors as hf_errors

    api = HfApi(endpoint=endpoint.rstrip("/") if endpoint else None, token=token or False)
    try:
        info = _retry(lambda: api.model_info(repo, revision=revision, files_metadata=True), retries,
                      (hf_errors.RepositoryNotFoundError, hf_errors.RevisionNotFoundError, hf_errors.GatedRepoError))
    except hf_errors.RevisionNotFoundError:
        raise WeightsError("hf://%s@%s: the hub has no revision %r of %s. Pin an existing commit sha, "
                           "branch or tag (serving_model.source: hf://%s@<revision>)." % (repo, revision, revision, repo, repo))
    except hf_errors.RepositoryNotFoundError:
        raise WeightsError("hf://%s@%s: repository %s not found on %s (or the token may not read it)."
                           % (repo, revision, repo, endpoint or "the hub"))
    commit = info.sha
    siblings = [s for s in info.siblings
                if not allow_patterns or any(fnmatch.fnmatch(s.rfilename, p) for p in allow_patterns)]
    if not siblings:
        raise WeightsError("hf://%s@%s: no file matches the allow patterns %s" % (repo, revision, allow_patterns))
    known = {}
    for s in siblings:
        lfs = getattr(s, "lfs", None)
        sha = getattr(lfs, "sha256", None) if lfs is not None else None
        if sha is None and isinstance(lfs, dict):
            sha = lfs.get("sha256")
        if sha:
            known[s.rfilename] = sha
    total = sum(s.size or 0 for s in siblings)
    dest = os.path.join(dest_root, repo.replace("/", "--"), commit)
    result = dict(path=dest, commit=commit, files=len(siblings), total_bytes=total, changed=False)
    man = read_manifest(os.path.join(dest, MANIFEST))
    if man and set(man["files"]) >= set(s.rfilename for s in siblings):
        progress = Progress(progress_path, "verify (%s)" % verify_mode, total)
        problems = verify(dest, man, verify_mode, progress, skip=())
        progress.finish("done" if not problems else "failed")
        if not problems:
            if not check_only:
                result["pruned"] = prune_revisions(dest)
            return result
        if check_only:
            result.update(changed=True, problems=problems)
            return result
        # A damaged copy: fetch again into staging; the damaged one is replaced only when the new one is whole.
    if check_only:
        result.update(changed=True)
        return result
    staging = dest + ".partial"
    # what a resumed download already holds is not written again
    check_download_space("hf://%s@%s" % (repo, revision), dest_root, max(0, total - tree_bytes(staging)), total,
                         min_free_bytes)
    if not os.path.isdir(staging):
        os.makedirs(staging)
    progress = Progress(progress_path, "download hf://%s@%s" % (repo, commit[:12]), total)
    with _DirWatcher(staging, progress):
        for s in siblings:
            _retry(lambda: hf_hub_download(repo, s.rfilename, revision=commit, local_dir=staging,
                                           token=token or False, endpoint=endpoint.rstrip("/") if endpoint else None),
                   retries, (hf_errors.EntryNotFoundError,))
    progress = Progress(progress_path, "verify download", total)
    problems = []
    for s in siblings:
        p = os.path.join(staging, s.rfilename)
        if not os.path.exists(p):
            problems.append("%s: missing after download" % s.rfilename)
            continue
        if s.size is not None and os.path.getsize(p) != s.size:
            problems.append("%s: %d bytes, the hub says %d" % (s.rfilename, os.path.getsize(p), s.size))
            continue
        if s.rfilename in known:
            got = sha256_file(p, progress)
            if got != known[s.rfilename]:
                problems.append("%s: sha256 %s, the hub says %s" % (s.rfilename, got, known[s.rfilename]))
        elif getattr(s, "blob_id", None):
            if git_blob_sha1(p) != s.blob_id:
                problems.append("%s: git blob id differs from the hub's %s" % (s.rfilename, s.blob_id))
    if problems:
        # The staging folder is wiped so the next run downloads those files again.
        for line in problems:
            bad = os.path.join(staging, line.split(":", 1)[0])
            if os.path.exists(bad):
                os.remove(bad)
        progress.finish("failed")
        raise WeightsError("hf://%s@%s failed verification (a mirror serving other bytes, or a damaged "
                           "transfer; the next run downloads these files again):\n  %s" % (repo, commit, "\n  ".join(problems)))
    shutil.rmtree(os.path.join(staging, ".cache"), ignore_errors=True)
    manifest = make_manifest(staging, known, progress)
    manifest.update(source="hf://%s@%s" % (repo, commit), requested_revision=revision)
    write_json(os.path.join(staging, MANIFEST), manifest)
    swap_in(staging, dest)
    progress.finish()
    result.update(changed=True, pruned=prune_revisions(dest))
    return result


def prune_revisions(dest):
    """Remove the other revisions of a hub repository beside dest (the served build is a copy, so
    nothing reads them), with their partial downloads."""
    root, keep = os.path.split(dest)
    gone = []
    for name in sorted(os.listdir(root)):
        if name not in (keep, keep + ".partial"):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            gone.append(os.path.join(root, name))
    return gone


def _retry(fn, retries, fatal):
    delay = 1.0
    for attempt in range(retries + 1):
        try:
            return fn()
        except fatal:
            raise
        except Exception:
            if attempt >= retries:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 30)


# ---------------------------------------------------------------------------- conversion (venv)
def _safetensors_header(f, label):
    """(header dict, header length) of an open safetensors file, read without its tensor data."""
    head = f.read(8)
    if len(head) < 8:
        raise WeightsError("%s: truncated (no safetensors header)" % label)
    n = struct.unpack("<Q", head)[0]
    return json.loads(f.read(n).decode("utf-8")), n


def _safetensors_names(folder):
    """{tensor name: (shape, dtype)} from the safetensors headers of a folder (no tensor data read)."""
    out = {}
    index, shards = weight_files(folder)
    for shard in shards:
        with open(os.path.join(folder, shard), "rb") as f:
            header, n = _safetensors_header(f, shard)
            end = 8 + n
            size = os.fstat(f.fileno()).st_size
        for k, v in header.items():
            if k == "__metadata__":
                continue
            if 8 + n + v["data_offsets"][1] > size:
                raise WeightsError("%s: truncated (tensor %s ends past the end of the file)" % (shard, k))
            end = max(end, 8 + n + v["data_offsets"][1])
            out[k] = (list(v["shape"]), v["dtype"])
    return out


def _load_bin(path):
    import torch
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError as e:
        if "mmap" not in str(e):
            raise WeightsError("%s cannot be read as a PyTorch checkpoint (truncated or damaged?): %s"
                               % (os.path.basename(path), str(e).splitlines()[0]))
        # legacy (pre-zipfile) format: no mmap
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise WeightsError("%s cannot be read as a PyTorch checkpoint (truncated or damaged?): %s"
                           % (os.path.basename(path), str(e).splitlines()[0] if str(e) else type(e).__name__))


def convert_bin(src, out, progress=None):
    """pytorch_model*.bin -> model-0000i-of-0000N.safetensors + index, one shard in memory at a time."""
    from safetensors.torch import save_file
    index, shards = weight_files(src)
    n = len(shards)
    weight_map, total_size, names = {}, 0, {}
    for i, shard in enumerate(shards, 1):
        state = _load_bin(os.path.join(src, shard))
        seen, tensors = set(), {}
        for k, t in state.items():
            # safetensors refuses tensors that share storage (tied weights): store each once, own copy.
            ptr = t.untyped_storage().data_ptr() if t.numel() else None
            if ptr is not None and ptr in seen:
                t = t.clone()
            elif ptr is not None:
                seen.add(ptr)
            tensors[k] = t.contiguous()
        name = "model.safetensors" if n == 1 else "model-%05d-of-%05d.safetensors" % (i, n)
        save_file(tensors, os.path.join(out, name), metadata={"format": "pt"})
        for k, t in tensors.items():
            weight_map[k] = name
            total_size += t.numel() * t.element_size()
            names[k] = (list(t.shape), str(t.dtype))
        if progress:
            progress.add(os.path.getsize(os.path.join(src, shard)))
        del state, tensors
    if n > 1:
        write_json(os.path.join(out, "model.safetensors.index.json"),
                   dict(metadata=dict(total_size=total_size), weight_map=weight_map))
    return names


def _adapter_shapes(adapter):
    """{module path: (in_features, out_features, r)} from the adapter's lora_A / lora_B tensors."""
    p = os.path.join(adapter, "adapter_model.safetensors")
    shapes = {}
    if os.path.exists(p):
        # the header alone (standard library): the shapes are all this needs
        with open(p, "rb") as f:
            header, dummy = _safetensors_header(f, p)
        shapes = dict((k, list(v["shape"])) for k, v in header.items() if k != "__metadata__")
    else:
        import torch
        binp = os.path.join(adapter, "adapter_model.bin")
        if not os.path.exists(binp):
            raise WeightsError("adapter %s has neither adapter_model.safetensors nor adapter_model.bin" % adapter)
        shapes = dict((k, list(v.shape)) for k, v in torch.load(binp, map_location="cpu", weights_only=True).items())
    mods = {}
    for k, shape in shapes.items():
        for part in (".lora_A.", ".lora_B."):
            if part in k:
                mod = k.split(part)[0]
                if mod.startswith("base_model.model."):
                    mod = mod[len("base_model.model."):]
                mods.setdefault(mod, {})[part.strip(".")] = shape
    return mods


def check_adapter(base_names, adapter, variable="serving_model.lora"):
    """Fail clearly when the adapter was trained for another base (module names or shapes differ).
    Returns its adapter_config.json with "rank": the largest rank of its tensors."""
    cfg_path = os.path.join(adapter, "adapter_config.json")
    if not os.path.exists(cfg_path):
        raise WeightsError("%s %s has no adapter_config.json: it is not a PEFT adapter folder" % (variable, adapter))
    with open(cfg_path) as f:
        cfg = json.load(f)
    if cfg.get("peft_type", "LORA") != "LORA":
        raise WeightsError("%s %s is a %s adapter; only LoRA adapters are served" % (variable, adapter, cfg.get("peft_type")))
    problems = []
    mods = _adapter_shapes(adapter)
    for mod, ab in sorted(mods.items()):
        w = base_names.get(mod + ".weight")
        if w is None:
            problems.append("%s: no such layer in the base model" % mod)
            continue
        out_f, in_f = w[0][0], w[0][1] if len(w[0]) > 1 else None
        a, b = ab.get("lora_A"), ab.get("lora_B")
        if a and in_f is not None and a[-1] != in_f:
            problems.append("%s: adapter expects %d input features, the base has %d" % (mod, a[-1], in_f))
        if b and b[0] != out_f:
            problems.append("%s: adapter produces %d output features, the base has %d" % (mod, b[0], out_f))
    if not mods:
        problems.append("the adapter holds no lora_A/lora_B tensors")
    if problems:
        raise WeightsError("%s %s does not fit this base model (trained for %s?):\n  %s"
                           % (variable, adapter, cfg.get("base_model_name_or_path") or "another model",
                              "\n  ".join(problems[:12] + (["... %d more" % (len(problems) - 12)] if len(problems) > 12 else []))))
    cfg["rank"] = max(ab["lora_A"][0] for ab in mods.values() if ab.get("lora_A")) if any(
        ab.get("lora_A") for ab in mods.values()) else cfg.get("r")
    return cfg


def add_adapters(base_names, adapters, out):
    """Copy each {name, path} LoRA adapter that fits the base into out/adapters/<name>; write
    out/adapters.json ({name: {rank, target_modules, source}}) and return it."""
    served = {}
    for item in adapters:
        name, path = item["name"], item["path"]
        cfg = check_adapter(base_names, path, "serving_lora_adapters[%s]" % name)
        dst = os.path.join(out, ADAPTERS_DIR, name)
        os.makedirs(dst)
        for fname in ADAPTER_FILES:
            if os.path.exists(os.path.join(path, fname)):
                shutil.copy2(os.path.join(path, fname), os.path.join(dst, fname))
        modules = cfg.get("target_modules")
        served[name] = dict(rank=cfg["rank"], source=item.get("source") or path,
                            target_modules=sorted(modules) if isinstance(modules, list) else modules)
    if adapters:
        write_json(os.path.join(out, ADAPTERS_INDEX), served)
    return served


_SIZE_UNITS = (("GIB", 2 ** 30), ("MIB", 2 ** 20), ("KIB", 2 ** 10), ("GB", 10 ** 9), ("MB", 10 ** 6), ("KB", 10 ** 3))


def shard_size_bytes(text):
    """'5GB' -> 5000000000, '200KiB' -> 204800 (the units transformers' max_shard_size takes)."""
    s = str(text).strip().upper()
    for unit, mult in _SIZE_UNITS:
        if s.endswith(unit):
            return int(float(s[:-len(unit)]) * mult)
    return int(s)


def _lora_pattern(patterns, module, default):
    """The value of PEFT's rank_pattern/alpha_pattern for module: a key matches the module's name
    or a dotted suffix of it."""
    for key, value in (patterns or {}).items():
        if re.match(r"(.*\.)?(%s)$" % key, module):
            return value
    return default


def read_lora_adapter(adapter):
    """({module: {"A": tensor, "B": tensor, "scale": float, "fan_in_fan_out": bool}},
    {base tensor name: tensor that replaces it}) of a PEFT LoRA adapter folder."""
    with open(os.path.join(adapter, "adapter_config.json")) as f:
        cfg = json.load(f)
    if cfg.get("use_dora"):
        raise WeightsError("serving_model.lora %s is a DoRA adapter (use_dora): merge it with peft and serve the merged "
                           "model as serving_model.source, or serve it unmerged with serving_lora_adapters" % adapter)
    st = os.path.join(adapter, "adapter_model.safetensors")
    if os.path.exists(st):
        from safetensors.torch import load_file
        state = load_file(st)
    else:
        state = _load_bin(os.path.join(adapter, "adapter_model.bin"))
    lora, replace = {}, {}
    for key, t in state.items():
        name = key[len("base_model.model."):] if key.startswith("base_model.model.") else key
        parts = name.split(".")
        kind = next((p for p in parts if p in ("lora_A", "lora_B", "lora_embedding_A", "lora_embedding_B",
                                               "lora_magnitude_vector")), None)
        if kind is None:
            # modules_to_save and trained biases are stored whole, under the base's own names
            replace[name] = t
            continue
        if kind == "lora_magnitude_vector" or parts[-1] == "bias":
            raise WeightsError("serving_model.lora %s holds %s: only plain LoRA (A and B matrices, no LoRA bias) is "
                               "merged" % (adapter, key))
        module = ".".join(parts[:parts.index(kind)])
        lora.setdefault(module, {})[kind.replace("lora_embedding_", "E").replace("lora_", "")] = t
    for module, ab in lora.items():
        emb = "EA" in ab
        a, b = (ab.get("EA"), ab.get("EB")) if emb else (ab.get("A"), ab.get("B"))
        if a is None or b is None:
            raise WeightsError("serving_model.lora %s: %s has only one of its two LoRA matrices" % (adapter, module))
        rank = a.shape[0]
        alpha = _lora_pattern(cfg.get("alpha_pattern"), module, cfg.get("lora_alpha", 8))
        scale = alpha / (math.sqrt(rank) if cfg.get("use_rslora") else rank)
        ab.clear()
        ab.update(A=a, B=b, scale=scale, embedding=emb, fan_in_fan_out=bool(cfg.get("fan_in_fan_out")))
    return lora, replace


def merge_lora(base, adapter, out, max_shard_size="5GB"):
    """Merge a PEFT LoRA adapter into the safetensors model in base, writing out: W + scale * B @ A per
    target module, computed in float32 and stored in the base tensor's dtype, embeddings never
    resized. Needs torch and safetensors only (no peft, no model class), one tensor at a time."""
    from safetensors import safe_open
    from safetensors.torch import save_file
    lora, replace = read_lora_adapter(adapter)
    with open(os.path.join(base, "config.json")) as f:
        cfg = json.load(f)
    dtype_name = cfg.get("torch_dtype") or cfg.get("dtype") or "float32"
    index, shards = weight_files(base)
    limit = shard_size_bytes(max_shard_size)
    pending, written, merged = {}, [], set()
    size = 0

    def flush():
        name = "model-%05d.safetensors.part" % (len(written) + 1)
        save_file(pending, os.path.join(out, name), metadata={"format": "pt"})
        written.append((name, sorted(pending), size))
        pending.clear()

    for shard in shards:
        with safe_open(os.path.join(base, shard), framework="pt") as f:
            for key in sorted(f.keys()):
                t = f.get_tensor(key)
                module = key[:-len(".weight")] if key.endswith(".weight") else None
                if key in replace:
                    if list(replace[key].shape) != list(t.shape):
                        raise WeightsError("serving_model.lora %s replaces %s with shape %s, the base has %s"
                                           % (adapter, key, list(replace[key].shape), list(t.shape)))
                    t = replace[key].to(t.dtype)
                    merged.add(key)
                elif module in lora:
                    m = lora[module]
                    delta = m["B"].float() @ m["A"].float()
                    if m["embedding"] or m["fan_in_fan_out"]:
                        delta = delta.T
                    t = (t.float() + m["scale"] * delta).to(t.dtype)
                    merged.add(module)
                t = t.contiguous()
                nbytes = t.numel() * t.element_size()
                if pending and size + nbytes > limit:
                    flush()
                    size = 0
                pending[key] = t
                size += nbytes
    if pending:
        flush()
    unused = sorted((set(lora) | set(replace)) - merged)
    if unused:
        raise WeightsError("serving_model.lora %s holds tensors for %s, which the base model does not have"
                           % (adapter, ", ".join(unused[:5])))
    if len(written) == 1:
        os.rename(os.path.join(out, written[0][0]), os.path.join(out, "model.safetensors"))
        return dtype_name
    weight_map, total = {}, 0
    for i, (part, keys, nbytes) in enumerate(written, 1):
        final = "model-%05d-of-%05d.safetensors" % (i, len(written))
        os.rename(os.path.join(out, part), os.path.join(out, final))
        weight_map.update((k, final) for k in keys)
        total += nbytes
    write_json(os.path.join(out, "model.safetensors.index.json"), dict(metadata=dict(total_size=total), weight_map=weight_map))
    return dtype_name


def _copy_side_files(src, out, skip_weights=True):
    for rel in list_files(src):
        if rel in (BUILD_MARKER,) or os.path.basename(rel).startswith("."):
            continue
        base = os.path.basename(rel)
        if skip_weights and (base.endswith(WEIGHT_SUFFIXES) or base in ("model.safetensors.index.json", "pytorch_model.bin.index.json")):
            continue
        dst = os.path.join(out, rel)
        if os.path.exists(dst):
            continue
        d = os.path.dirname(dst)
        if not os.path.isdir(d):
            os.makedirs(d)
        shutil.copy2(os.path.join(src, rel), dst)


def patch_tokenizer_config(folder, chat_template):
    """Store the engine's chat template in tokenizer_config.json (what tokenizer-side clients read)."""
    p = os.path.join(folder, "tokenizer_config.json")
    if not chat_template or not os.path.exists(p):
        return False
    # transformers 5 saves the template beside the config, and that file wins when both exist.
    side = os.path.join(folder, "chat_template.jinja")
    if os.path.exists(side):
        with open(side, "w") as f:
            f.write(chat_template)
    with open(p) as f:
        cfg = json.load(f)
    if cfg.get("chat_template") == chat_template:
        return False
    cfg["chat_template"] = chat_template
    tmp = p + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
    os.rename(tmp, p)
    return True


def _reuse_weights(base_build, out, progress_path):
    """Copy the files of a published build's manifest into out, without its served adapters; return
    (source format, merged dtype, {rel: sha256 the manifest records}). Only what the manifest
    records is copied, so nothing added to the build since comes along."""
    marker = read_manifest_file(os.path.join(base_build, BUILD_MARKER)) or {}
    files = _reused_files(read_manifest(os.path.join(base_build, MANIFEST)))
    progress = Progress(progress_path, "reuse the built weights", sum(e["size"] for e in files.values()))
    for rel in sorted(files):
        clone_or_copy(os.path.join(base_build, rel), os.path.join(out, rel))
        progress.add(files[rel]["size"])
    return (marker.get("source_format"), marker.get("merged_dtype"),
            dict((rel, e.get("sha256")) for rel, e in files.items()))


def _copy_problems(manifest, expected):
    """The copied files whose hash differs from what the served build's manifest records (the
    tokenizer files the tokenizer role may rewrite aside)."""
    return sorted(rel for rel, sha in expected.items()
                  if os.path.basename(rel) not in MUTABLE and manifest["files"].get(rel, {}).get("sha256") != sha)


def _build_weights(src, fmt, stage_dir, adapter, tmp, progress_path, max_shard_size):
    """Convert or copy src into tmp, merging adapter when set; return ({tensor: (shape, dtype)},
    merged dtype)."""
    index, shards = weight_files(src)
    total = sum(os.path.getsize(os.path.join(src, s)) for s in shards)
    progress = Progress(progress_path, "convert .bin -> safetensors" if fmt == "bin" else "copy safetensors", total)
    stage = tmp if not adapter else stage_dir()
    try:
        if fmt == "bin":
            names = convert_bin(src, stage, progress)
            src_names = dict((k, v[0]) for k, v in names.items())
        else:
            for s in shards + ([index] if index else []):
                clone_or_copy(os.path.join(src, s), os.path.join(stage, s))
                progress.add(os.path.getsize(os.path.join(src, s)) if s != index else 0)
            src_names = dict((k, v[0]) for k, v in _safetensors_names(stage).items())
        _copy_side_files(src, stage)
        out_names = _safetensors_names(stage)
        if set(out_names) != set(src_names) or any(out_names[k][0] != src_names[k] for k in src_names):
            raise WeightsError("conversion check failed: the safetensors tensors differ from the source's")
        if not adapter:
            return out_names, None
        check_adapter(out_names, adapter)
        progress = Progress(progress_path, "merge LoRA adapter", 1)
        merged_dtype = merge_lora(stage, adapter, tmp, max_shard_size)
        _copy_side_files(stage, tmp)
        merged = _safetensors_names(tmp)
        missing = sorted(set(out_names) - set(merged))
        if missing or any(merged[k][0] != out_names[k][0] for k in merged if k in out_names):
            raise WeightsError("merge check failed: merged tensors differ in names/shapes from the base (%s)" % missing[:5])
        progress.set(1)
        return out_names, merged_dtype
    finally:
        if stage != tmp:
            shutil.rmtree(stage, ignore_errors=True)


def build(src, dest, adapter=None, chat_template=None, digest=None, progress_path=None, max_shard_size="5GB",
          adapters=None, base_digest=None, reuse=None):
    """Build the served folder from src (+adapter merged, + adapters served by name) into a temp
    folder beside dest; return its path.

    reuse: a published build of the same base_digest (source, merged adapter, template), whose
    weights are copied instead of converted and merged again: a change of the adapters served by
    name alone costs a copy, and needs no peft in the venv.

    The caller checks the tokenizer in the temp folder, then calls publish(); nothing served is
    touched here. Runs in the venv.
    """
    problems = check_shards(src)
    if problems:
        raise WeightsError("source %s is incomplete:\n  %s" % (src, "\n  ".join(problems)))
    fmt = checkpoint_format(src)
    tmp = temp_beside(dest, "build")
    expected = None
    try:
        if reuse:
            fmt, merged_dtype, expected = _reuse_weights(reuse, tmp, progress_path)
            out_names = _safetensors_names(tmp)
        else:
            out_names, merged_dtype = _build_weights(src, fmt, lambda: temp_beside(dest, "base"), adapter, tmp,
                                                     progress_path, max_shard_size)
        served_adapters = add_adapters(out_names, adapters or [], tmp)
        patch_tokenizer_config(tmp, chat_template)
        progress = Progress(progress_path, "hash the built folder", 0)
        manifest = make_manifest(tmp, progress=progress)
        if expected is not None and _copy_problems(manifest, expected):
            # the served build's bytes changed since it was hashed: build from the source instead
            shutil.rmtree(tmp, ignore_errors=True)
            return build(src, dest, adapter, chat_template, digest, progress_path, max_shard_size, adapters,
                         base_digest)
        write_json(os.path.join(tmp, MANIFEST), manifest)
        marker = dict(digest=digest, base_digest=base_digest or digest, source=src, adapter=adapter,
                      source_format=fmt, merged_dtype=merged_dtype, files=len(manifest["files"]))
        write_json(os.path.join(tmp, BUILD_MARKER), marker)
        os.chmod(tmp, 0o755)
        for root, dirs, files in os.walk(tmp):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
            for name in files:
                os.chmod(os.path.join(root, name), 0o644)
        progress.finish()
        return dict(tmp=tmp, source_format=fmt, tensors=len(out_names), merged_dtype=merged_dtype,
                    total_bytes=manifest["total_bytes"], adapters=served_adapters, reused=reuse)
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def run_in_venv(fn, **kwargs):
    """Entry for venv_runner: WeightsError becomes {'error': msg} so the module can fail cleanly."""
    try:
        return dict(ok=True, result=globals()[fn](**kwargs))
    except WeightsError as e:
        return dict(ok=False, error=str(e))


# ---------------------------------------------------------------------------- weights_convert
# Runs in the Ansible module process; the venv work goes through the callables it is given.
# Every failure below happens before the new folder is renamed over the served one.
UNTOUCHED = "Nothing served was changed."


class ConvertError(WeightsError):
    """weights_convert fails: `msg`, and in `extra` the other keys of the failure (problems,
    renders, rc)."""

    def __init__(self, msg, **extra):
        super(ConvertError, self).__init__(msg)
        self.msg = msg
        self.extra = extra


def _verify_or_record_source(params, check_mode):
    """(source manifest, recorded on this run) after verifying the source against its manifest or,
    at first sight, recording one; (None, False) in check mode when there is none yet."""
    src, mode, progress_file = params["src"], params.get("verify", "cheap"), params.get("progress_file")
    if not os.path.isfile(os.path.join(src, "config.json")):
        raise ConvertError("source %s holds no config.json: not a model folder" % src)
    problems = check_shards(src)
    if problems:
        raise ConvertError("source %s is incomplete (copy the missing files, or fetch again):\n  %s\n%s"
                           % (src, "\n  ".join(problems), UNTOUCHED), problems=problems)
    man_path = params.get("source_manifest") or os.path.join(src, MANIFEST)
    man = read_manifest(man_path)
    if man:
        prog = Progress(progress_file, "verify source (%s)" % mode, man.get("total_bytes", 0))
        problems = verify(src, man, mode, prog, skip=())
        prog.finish("done" if not problems else "failed")
        if problems:
            raise ConvertError("source %s does not match its integrity manifest %s (damaged or altered files; "
                               "restore them, or delete the manifest to accept the folder as it is now):\n  %s\n%s"
                               % (src, man_path, "\n  ".join(problems), UNTOUCHED), problems=problems)
        return man, False
    if check_mode:
        return None, False
    prog = Progress(progress_file, "hash source (first sight)", 0)
    man = make_manifest(src, progress=prog)
    man["source"] = src
    d = os.path.dirname(man_path)
    if not os.path.isdir(d):
        os.makedirs(d)
    write_json(man_path, man)
    prog.finish()
    return man, True


def convert(params, check_mode, run_build, run_check):
    """The weights_convert module's job; returns its result (changed, path, digest,
    manifest_recorded, and msg in check mode or source_format, tensors, merged_dtype, total_bytes,
    special_token_ids when built). Raises ConvertError.

    params:    the module's parameters (src, dest, adapter, template_path, template,
               source_manifest, verify, max_shard_size, progress_file).
    run_build: args -> run_in_venv(**args) run in the engine venv (args has fn="build").
    run_check: args -> tokenizer_check.check(**args) run in the engine venv.
    Both may raise ConvertError (a venv that cannot run them).
    """
    # Imported here, not at the top: this file's source also runs alone in the engine venv
    # (build, fetch_hf), where the collection is not importable.
    from ansible_collections.llmops.serving.plugins.module_utils import builds, running

    src, dest = params["src"], params["dest"]
    adapter, template_path = params.get("adapter"), params.get("template_path")
    cleaned = [] if check_mode else builds.clean_leftovers(dest)
    man, recorded = _verify_or_record_source(params, check_mode)
    if man is None:
        return dict(changed=True, path=dest, digest=None, manifest_recorded=False,
                    msg="would record the source's manifest and build %s" % dest)
    adapter_digest = None
    if adapter:
        if not os.path.isfile(os.path.join(adapter, "adapter_config.json")):
            raise ConvertError("adapter %s has no adapter_config.json: not a PEFT adapter folder" % adapter)
        adapter_digest = manifest_digest(make_manifest(adapter))
    served, adapter_bytes = [], 0
    for item in params.get("adapters") or []:
        if not os.path.isfile(os.path.join(item["path"], "adapter_config.json")):
            raise ConvertError("serving_lora_adapters[%s]: %s has no adapter_config.json: not a PEFT adapter folder. %s"
                               % (item["name"], item["path"], UNTOUCHED))
        adapter_manifest = make_manifest(item["path"])
        served.append([item["name"], manifest_digest(adapter_manifest)])
        adapter_bytes += adapter_manifest["total_bytes"]
    recipe = dict(v=1, source=manifest_digest(man), adapter=adapter_digest,
                  template=sha256_file(template_path) if template_path else None, family=params.get("template"))
    base_digest = recipe_digest(recipe)
    if served:
        # only when set: builds without served adapters keep their digest
        recipe["adapters"] = served
    digest = recipe_digest(recipe)
    current, why = is_current(dest, digest)
    if current and params.get("verify", "cheap") == "full":
        why = verify(dest, read_manifest(os.path.join(dest, MANIFEST)), "full")
        current = not why
    if current:
        return dict(changed=recorded or bool(cleaned), path=dest, digest=digest, manifest_recorded=recorded,
                    build=builds.served_build(dest), cleaned=cleaned)
    if check_mode:
        return dict(changed=True, path=dest, digest=digest, manifest_recorded=False,
                    msg="would build %s: %s" % (dest, "; ".join(why[:5])))
    # The build is written beside the served link, so that filesystem must hold it (twice the source
    # while an adapter is merged: the base copy and the merged shards).
    reuse = reusable_build(dest, base_digest, digest)
    if reuse:
        copied = sum(e["size"] for e in _reused_files(read_manifest(os.path.join(reuse, MANIFEST))).values())
    else:
        copied = man.get("total_bytes", 0) * (2 if adapter else 1)
    need = int((copied + adapter_bytes) * 1.05) + int(params.get("min_free_bytes") or 0)
    try:
        builds.require_space(os.path.dirname(os.path.abspath(dest)), need,
                             "the build of %s (with serving_models_min_free_bytes left free)" % dest)
    except builds.NoSpace as e:
        raise ConvertError("%s. %s" % (e.strerror, UNTOUCHED))
    template_text = None
    if template_path:
        with open(template_path) as f:
            template_text = f.read()
    r = run_build(dict(fn="build", src=src, dest=dest, adapter=adapter, chat_template=template_text, digest=digest,
                       progress_path=params.get("progress_file"), max_shard_size=params.get("max_shard_size", "5GB"),
                       adapters=params.get("adapters") or [], base_digest=base_digest, reuse=reuse))
    if not r["ok"]:
        raise ConvertError(r["error"] + "\n" + UNTOUCHED)
    built = r["result"]
    tmp = built["tmp"]
    chk = run_check(dict(tokenizer_path=tmp, template_path=template_path, template_name=params.get("template")))
    if chk["problems"]:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ConvertError("the built folder's tokenizer or chat template is wrong; nothing served was changed:\n- %s"
                           % "\n- ".join(chk["problems"]), problems=chk["problems"], renders=chk.get("renders"))
    pub = builds.publish(tmp, dest, digest[:16], keep=params.get("keep_previous", 1),
                         in_use=running.in_use(builds.all_builds(dest)))
    return dict(changed=True, path=dest, digest=digest, manifest_recorded=recorded, source_format=built["source_format"],
                tensors=built["tensors"], merged_dtype=built["merged_dtype"], total_bytes=built["total_bytes"],
                special_token_ids=chk["special_token_ids"], adapters=built.get("adapters") or {},
                reused=built.get("reused"),
                build=pub["build"], previous_build=pub["previous"],
                pruned=pub["pruned"], cleaned=cleaned + pub["cleaned"])
