# -*- coding: utf-8 -*-
"""model_fetch as Ansible runs it: huggingface_hub in a real child interpreter (the engine venv of
LLMOPS_TEST_VENV_PYTHON) fetching the real Qwen3-4B tokenizer files from a local server that speaks
the hub's routes (tests/unit/plugins/module_utils/hub_server.py)."""
import json
import os

import pytest
import yaml

from ansible_collections.llmops.serving.plugins.module_utils import weights
from ansible_collections.llmops.serving.plugins.modules import model_fetch as module

from .module_harness import documented_by, module_utils_helper, no_site_python, run_module, subprocess_run_command

VENV_PY = os.environ.get("LLMOPS_TEST_VENV_PYTHON")
needs_venv = pytest.mark.skipif(not VENV_PY, reason="set LLMOPS_TEST_VENV_PYTHON to a venv with huggingface_hub")
HERE = os.path.dirname(os.path.abspath(__file__))
QWEN3 = os.path.join(HERE, "..", "..", "..", "fixtures", "qwen", "Qwen3-4B")
REPO_ID = "Qwen/Qwen3-4B"
RETURNS = yaml.safe_load(module.RETURN)
documented = documented_by(RETURNS)


@pytest.fixture
def hub():
    h = module_utils_helper("hub_server").Hub(REPO_ID, QWEN3).start()
    yield h
    h.stop()


def run(monkeypatch, args, check_mode=False):
    """The result; fail_json's carries failed=True. huggingface_hub really runs in the child."""
    return run_module(monkeypatch, module, args, subprocess_run_command, check_mode, failed_key=True)[1]


def downloads(hub):
    return [p for m, p in hub.requests if "/resolve/" in p and m == "GET"]


# ------------------------------------------------------------------------------ with the engine venv
@needs_venv
def test_fetch_verifies_publishes_and_prunes_and_check_mode_only_reports(monkeypatch, hub, tmp_path):
    root = tmp_path / "sources"
    args = {"python": VENV_PY, "repo": REPO_ID, "revision": "main", "dest_root": str(root), "endpoint": hub.url,
            "retries": 0, "progress_file": str(tmp_path / "progress.json")}
    path = str(root / "Qwen--Qwen3-4B" / hub.commit)
    files = sorted(os.listdir(QWEN3))
    size = sum(os.path.getsize(os.path.join(QWEN3, n)) for n in files)

    predicted = run(monkeypatch, args, check_mode=True)
    assert predicted == {"changed": True, "path": path, "commit": hub.commit, "files": len(files), "total_bytes": size}
    assert not root.exists() and downloads(hub) == []

    old = root / "Qwen--Qwen3-4B" / ("f" * 40)  # another revision fetched before
    old.mkdir(parents=True)
    fetched = run(monkeypatch, args)
    assert not fetched.get("failed"), fetched.get("msg")
    assert set(fetched) - {"changed"} == documented("success", "success, when not in check mode")
    assert fetched == {"changed": True, "path": path, "commit": hub.commit, "files": len(files), "total_bytes": size,
                       "pruned": [str(old)]}
    assert sorted(os.listdir(str(root / "Qwen--Qwen3-4B"))) == [hub.commit]
    manifest = weights.read_manifest(os.path.join(path, weights.MANIFEST))
    assert sorted(manifest["files"]) == files and manifest["requested_revision"] == "main"
    with open(str(tmp_path / "progress.json")) as f:
        assert json.load(f)["state"] == "done"

    fetched_files = len(downloads(hub))
    again = run(monkeypatch, dict(args, revision=hub.commit), check_mode=True)
    assert again == {"changed": False, "path": path, "commit": hub.commit, "files": len(files), "total_bytes": size}
    # a damaged copy: check mode says why it would fetch again, and leaves it as it is
    with open(os.path.join(path, "vocab.json"), "r+b") as f:
        f.truncate(100)
    damaged = run(monkeypatch, args, check_mode=True)
    assert damaged["changed"] is True
    assert set(damaged) - {"changed"} == documented(
        "success", "in check mode, when the copy in I(path) fails verification",
        "failure; in check mode when the copy in I(path) fails verification")
    assert damaged["msg"] == "would fetch again: vocab.json: truncated (100 bytes, the manifest says %d)" % \
        os.path.getsize(os.path.join(QWEN3, "vocab.json"))
    assert os.path.getsize(os.path.join(path, "vocab.json")) == 100 and len(downloads(hub)) == fetched_files


@needs_venv
def test_unknown_revision_fails_saying_what_to_pin(monkeypatch, hub, tmp_path):
    result = run(monkeypatch, {"python": VENV_PY, "repo": REPO_ID, "revision": "v9", "dest_root": str(tmp_path),
                               "endpoint": hub.url, "retries": 0})
    assert result["failed"] and not os.listdir(str(tmp_path)) and set(result) == {"failed", "msg"}
    assert result["msg"] == ("hf://Qwen/Qwen3-4B@v9: the hub has no revision 'v9' of Qwen/Qwen3-4B. Pin an existing "
                             "commit sha, branch or tag (serving_model.source: hf://Qwen/Qwen3-4B@<revision>).")


# ------------------------------------------------------------------------------ without it
BAD_INPUTS = [
    # (id, args over the defaults, message parts; {python}: an interpreter without huggingface_hub)
    ("python without huggingface_hub", {},
     ["fetching hf://Qwen/Qwen3-4B@main failed: weights.run_in_venv failed under {python} (rc=1):",
      "No module named 'huggingface_hub'"]),
    ("unknown verify mode", {"verify": "fast"}, ["value of verify must be one of: cheap, full, got: fast"]),
    ("no revision", {"revision": None}, ["missing required arguments: revision"]),
]


@pytest.mark.parametrize("over,parts", [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_fail_naming_the_option(monkeypatch, tmp_path, over, parts):
    python = no_site_python(tmp_path)
    args = dict({"python": python, "repo": REPO_ID, "revision": "main", "dest_root": str(tmp_path / "sources")}, **over)
    result = run(monkeypatch, dict((k, v) for k, v in args.items() if v is not None))
    assert result["failed"]
    for part in parts:
        assert part.format(python=python) in result["msg"]
    assert set(result) - {"failed"} <= documented("failure; in check mode when the copy in I(path) fails verification",
                                                  "failure, when I(python) cannot run the fetch")
    assert not os.path.exists(str(tmp_path / "sources"))


def test_documentation_matches_the_argument_spec():
    doc = yaml.safe_load(module.DOCUMENTATION)
    yaml.safe_load(module.EXAMPLES)
    assert set(doc["options"]) == {"python", "repo", "revision", "dest_root", "allow_patterns", "endpoint", "token",
                                   "retries", "verify", "progress_file", "min_free_bytes"}
    assert documented("success") == {"path", "commit", "total_bytes", "files"}
    assert set(RETURNS) == documented("success") | {"pruned", "problems", "msg", "rc"}
    for name, spec in RETURNS.items():
        assert {"description", "returned", "type", "sample"} <= set(spec), name


@needs_venv
def test_a_download_its_filesystem_cannot_take_fails_before_a_byte_is_fetched(monkeypatch, hub, tmp_path):
    root = tmp_path / "sources"
    args = {"python": VENV_PY, "repo": REPO_ID, "revision": "main", "dest_root": str(root), "endpoint": hub.url,
            "retries": 0, "min_free_bytes": 1 << 60}
    failed = run(monkeypatch, args)
    assert failed.get("failed") and downloads(hub) == []
    assert "serving_models_min_free_bytes" in failed["msg"] and "Nothing was downloaded" in failed["msg"]
    assert "hf://%s@main" % REPO_ID in failed["msg"] and not (root / "Qwen--Qwen3-4B").exists()
