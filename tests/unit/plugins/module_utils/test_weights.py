# -*- coding: utf-8 -*-
"""Weights: manifests, verification, shard checks (pure) and, given an engine venv
(LLMOPS_TEST_VENV_PYTHON), hub fetches against a local hub server, .bin conversion and LoRA merges."""
import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import tokenizer_check, venv_runner, weights

VENV_PY = os.environ.get("LLMOPS_TEST_VENV_PYTHON")
needs_venv = pytest.mark.skipif(not VENV_PY, reason="set LLMOPS_TEST_VENV_PYTHON to a venv with torch, transformers, peft")
# The SGLang venv has no peft: the LoRA merge must not need it.
SGLANG_PY = os.environ.get("LLMOPS_TEST_SGLANG_PYTHON")
needs_sglang_venv = pytest.mark.skipif(not SGLANG_PY, reason="set LLMOPS_TEST_SGLANG_PYTHON to the SGLang venv")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PEFT_REFERENCE = os.path.join(REPO, "tests", "fixtures", "weights", "peft_reference.py")


def _folder(tmp_path, files):
    d = tmp_path / "m"
    d.mkdir()
    for k, v in files.items():
        (d / k).write_bytes(v)
    return str(d)


def test_manifest_then_cheap_and_full_verify_pass(tmp_path):
    d = _folder(tmp_path, {"config.json": b"{}", "model.safetensors": b"x" * 100})
    m = weights.make_manifest(d)
    assert set(m["files"]) == {"config.json", "model.safetensors"}
    assert m["files"]["model.safetensors"]["sha256_from"] == "local"
    assert weights.verify(d, m, "cheap") == []
    assert weights.verify(d, m, "full") == []


def test_truncated_file_is_reported(tmp_path):
    d = _folder(tmp_path, {"model.safetensors": b"x" * 100})
    m = weights.make_manifest(d)
    with open(os.path.join(d, "model.safetensors"), "r+b") as f:
        f.truncate(40)
    assert weights.verify(d, m, "cheap") == ["model.safetensors: truncated (40 bytes, the manifest says 100)"]


def test_hash_mismatch_same_size_same_mtime_needs_full(tmp_path):
    d = _folder(tmp_path, {"model.safetensors": b"x" * 100})
    m = weights.make_manifest(d)
    p = os.path.join(d, "model.safetensors")
    st = os.stat(p)
    with open(p, "r+b") as f:
        f.write(b"y")
    os.utime(p, (st.st_atime, st.st_mtime))
    assert weights.verify(d, m, "cheap") == []  # cheap: size and mtime only
    problems = weights.verify(d, m, "full")
    assert len(problems) == 1 and "sha256" in problems[0]


def test_moved_mtime_triggers_hash_in_cheap_mode(tmp_path):
    d = _folder(tmp_path, {"model.safetensors": b"x" * 100})
    m = weights.make_manifest(d)
    p = os.path.join(d, "model.safetensors")
    with open(p, "r+b") as f:
        f.write(b"y")
    os.utime(p, (1, 1))
    assert "sha256" in weights.verify(d, m, "cheap")[0]


def test_missing_file_and_hub_sha_used(tmp_path):
    d = _folder(tmp_path, {"a.safetensors": b"abc"})
    m = weights.make_manifest(d, known_sha256={"a.safetensors": "f" * 64})
    assert m["files"]["a.safetensors"]["sha256_from"] == "hub"
    os.remove(os.path.join(d, "a.safetensors"))
    assert weights.verify(d, m) == ["a.safetensors: missing"]


def test_missing_shard_named_by_index(tmp_path):
    idx = {"weight_map": {"a": "pytorch_model-00001-of-00002.bin", "b": "pytorch_model-00002-of-00002.bin"}}
    d = _folder(tmp_path, {"pytorch_model.bin.index.json": json.dumps(idx).encode(),
                           "pytorch_model-00001-of-00002.bin": b"x"})
    assert weights.check_shards(d) == ["pytorch_model.bin.index.json names shard pytorch_model-00002-of-00002.bin, which is missing"]
    assert weights.checkpoint_format(d) == "bin"


def test_no_weights_at_all(tmp_path):
    d = _folder(tmp_path, {"config.json": b"{}"})
    assert "holds no model.safetensors" in weights.check_shards(d)[0]


def test_manifest_digest_ignores_mtime(tmp_path):
    d = _folder(tmp_path, {"a": b"1"})
    m1 = weights.make_manifest(d)
    os.utime(os.path.join(d, "a"), (5, 5))
    assert weights.manifest_digest(weights.make_manifest(d)) == weights.manifest_digest(m1)


def test_swap_in_replaces_whole_folder(tmp_path):
    old, new = tmp_path / "served", tmp_path / "new"
    old.mkdir()
    (old / "f").write_text("old")
    new.mkdir()
    (new / "f").write_text("new")
    weights.swap_in(str(new), str(old))
    assert (old / "f").read_text() == "new" and not new.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["served"]


def test_progress_file_and_description(tmp_path):
    path = str(tmp_path / "p.json")
    p = weights.Progress(path, "download", total=4 * 1024 ** 3, every=0)
    p.add(1024 ** 3)
    snap = json.load(open(path))
    assert snap["done"] == 1024 ** 3 and snap["total"] == 4 * 1024 ** 3 and snap["state"] == "running"
    line = weights.describe_progress(snap)
    assert line.startswith("download: 1.0 GiB of 4.0 GiB (25.0%)") and "ETA" in line
    p.finish()
    assert "[done]" in weights.describe_progress(json.load(open(path)))


# ------------------------------------------------------------------ with an engine venv
def run_command(argv, data=None, binary_data=False, environ_update=None):
    env = dict(os.environ, **(environ_update or {}))
    p = subprocess.run(argv, input=data, capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr


def vcall(mod, entry, **args):
    return venv_runner.call(run_command, VENV_PY, mod, entry, args)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    script = os.path.join(REPO, "tests", "fixtures", "weights", "make_bin_model.py")
    subprocess.check_call([VENV_PY, script, str(root / "base"), "--adapter", str(root / "lora")], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    subprocess.check_call([VENV_PY, script, str(root / "q2"), "--arch", "Qwen2ForCausalLM", "--adapter", str(root / "q2lora")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return root


def _build(src, dest, adapter=None, python=None, **kw):
    tpl = os.path.join(REPO, "templates", "chat", "qwen3.jinja")
    return venv_runner.call(run_command, python or VENV_PY, weights, "run_in_venv", dict(
        fn="build", src=str(src), dest=str(dest), adapter=adapter and str(adapter), chat_template=open(tpl).read(),
        digest="d1", progress_path=None, **kw))


@needs_venv
def test_bin_shards_become_safetensors_and_the_tokenizer_is_proven(models, tmp_path):
    r = _build(models / "base", tmp_path / "served")
    assert r["ok"], r
    tmp = r["result"]["tmp"]
    assert r["result"]["source_format"] == "bin"
    names = sorted(os.listdir(tmp))
    assert "model.safetensors.index.json" in names and not [n for n in names if n.endswith(".bin")]
    assert [n for n in names if n.endswith(".safetensors")] == ["model-0000%d-of-00003.safetensors" % i for i in (1, 2, 3)]
    chk = vcall(tokenizer_check, "check", tokenizer_path=tmp, template_path=os.path.join(REPO, "templates/chat/qwen3.jinja"))
    assert chk["problems"] == [] and chk["special_token_ids"]["<|im_start|>"] == chk["special_token_ids"]["<|endoftext|>"] + 1
    man = weights.read_manifest(os.path.join(tmp, weights.MANIFEST))
    assert weights.verify(tmp, man, "full") == []


@needs_venv
def test_lora_merge_keeps_dtype_and_vocab(models, tmp_path):
    r = _build(models / "base", tmp_path / "served", models / "lora")
    assert r["ok"], r
    tmp = r["result"]["tmp"]
    assert r["result"]["merged_dtype"] == "bfloat16"
    heads = weights._safetensors_names(tmp)
    assert heads["model.embed_tokens.weight"] == ([1088, 64], "BF16")  # vocab_size 1088 > tokenizer length 1024
    assert not [k for k in heads if "lora" in k]


@needs_venv
@needs_sglang_venv
@pytest.mark.parametrize("options", [
    ["--targets", "q_proj", "v_proj"],
    ["--targets", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "--rank", "8", "--rslora",
     "--alpha-pattern", "v_proj=3"]], ids=["lora", "all-linear-rslora-alpha-pattern"])
def test_lora_merge_in_a_venv_without_peft_equals_peft(models, tmp_path, options):
    """The SGLang venv (no peft) builds the merged model; peft's merge_and_unload of the same adapter
    gives the same tensors to within bfloat16 rounding, and every target moved."""
    assert subprocess.run([SGLANG_PY, "-c", "import peft"], capture_output=True).returncode != 0
    adapter = tmp_path / "adapter"
    subprocess.check_call([VENV_PY, PEFT_REFERENCE, "adapter", str(models / "base"), str(adapter)] + options,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = _build(models / "base", tmp_path / "served", adapter, python=SGLANG_PY, max_shard_size="200KB")
    assert r["ok"], r
    built = r["result"]["tmp"]
    index = json.load(open(os.path.join(built, "model.safetensors.index.json")))
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1 and all(os.path.getsize(os.path.join(built, s)) < 200 * 1000 + 4096 for s in shards)
    out = json.loads(subprocess.check_output([VENV_PY, PEFT_REFERENCE, "compare", str(models / "base"), str(adapter), built],
                                             stderr=subprocess.DEVNULL))
    assert out["missing"] == [] and out["extra"] == [] and out["dtypes"] == ["torch.bfloat16"], out
    assert out["worst_steps"] <= 2, out["worst_steps"]
    targets = options[1:options.index("--rank")] if "--rank" in options else options[1:]
    moved = [k for k, v in out["moved"].items() if v > 0]
    assert sorted(set(k.split(".")[-2] for k in moved)) == sorted(targets), moved


@needs_venv
def test_adapter_for_another_base_fails_clearly(models, tmp_path):
    r = _build(models / "base", tmp_path / "served", models / "q2lora")
    assert not r["ok"]
    assert "does not fit this base model" in r["error"] and "input features" in r["error"]
    assert not [p for p in os.listdir(str(tmp_path)) if p.startswith(".served")]  # temp folders cleaned


@needs_venv
def test_truncated_bin_shard_fails_readably(models, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(str(models / "base"), str(src))
    with open(str(src / "pytorch_model-00002-of-00003.bin"), "r+b") as f:
        f.truncate(1000)
    r = _build(src, tmp_path / "served")
    assert not r["ok"] and "pytorch_model-00002-of-00003.bin cannot be read" in r["error"]


@pytest.fixture()
def hub(models):
    import hub_server
    h = hub_server.Hub("Qwen/Tiny", str(models / "base")).start()
    yield h
    h.stop()


@needs_venv
def test_hf_fetch_from_a_local_hub_verifies_and_is_idempotent(hub, tmp_path):
    r = vcall(weights, "run_in_venv", fn="fetch_hf", repo="Qwen/Tiny", revision="main", dest_root=str(tmp_path),
              endpoint=hub.url, allow_patterns=["config.json", "*.bin", "*.index.json"], progress_path=str(tmp_path / "progress.json"))
    assert r["ok"], r
    res = r["result"]
    assert res["changed"] and res["commit"] == hub.commit and res["path"].endswith("Qwen--Tiny/" + hub.commit)
    man = weights.read_manifest(os.path.join(res["path"], weights.MANIFEST))
    assert man["files"]["pytorch_model-00001-of-00003.bin"]["sha256_from"] == "hub"
    assert "tokenizer.json" not in man["files"]  # allow patterns
    assert json.load(open(str(tmp_path / "progress.json")))["state"] == "done"
    again = vcall(weights, "run_in_venv", fn="fetch_hf", repo="Qwen/Tiny", revision=hub.commit, dest_root=str(tmp_path),
                  endpoint=hub.url, allow_patterns=["config.json", "*.bin", "*.index.json"])
    assert again["ok"] and not again["result"]["changed"]


@needs_venv
def test_hf_unknown_revision(hub, tmp_path):
    r = vcall(weights, "run_in_venv", fn="fetch_hf", repo="Qwen/Tiny", revision="deadbeef", dest_root=str(tmp_path),
              endpoint=hub.url, retries=0)
    assert not r["ok"] and "has no revision 'deadbeef'" in r["error"]


@needs_venv
def test_hf_mirror_serving_other_bytes_fails_verification(models, tmp_path):
    import hub_server
    h = hub_server.Hub("Qwen/Tiny", str(models / "base"), tamper={"config.json": b'{"evil": 1}'}).start()
    try:
        r = vcall(weights, "run_in_venv", fn="fetch_hf", repo="Qwen/Tiny", revision="main", dest_root=str(tmp_path),
                  endpoint=h.url, allow_patterns=["config.json"], retries=0)
    finally:
        h.stop()
    assert not r["ok"] and "failed verification" in r["error"]
    assert not os.path.exists(str(tmp_path / "Qwen--Tiny" / h.commit))


def test_prune_revisions_keeps_only_the_verified_one_and_its_staging(tmp_path):
    repo = tmp_path / "Qwen--Tiny"
    for name in ("aaa", "aaa.partial", "bbb", "ccc.partial"):
        (repo / name).mkdir(parents=True)
        (repo / name / "f").write_text(name)
    gone = weights.prune_revisions(str(repo / "bbb"))
    assert sorted(os.path.basename(p) for p in gone) == ["aaa", "aaa.partial", "ccc.partial"]
    assert sorted(os.listdir(str(repo))) == ["bbb"]


@needs_venv
def test_a_hub_adapter_is_fetched_verified_and_served_by_name_in_the_build(models, tmp_path):
    """serving_lora_adapters' hf:// path: the adapter files (the role's allow patterns) fetched from a
    hub at a revision and verified, then checked against the base and copied into the build."""
    import hub_server
    h = hub_server.Hub("acme/support-lora", str(models / "lora")).start()
    try:
        r = vcall(weights, "run_in_venv", fn="fetch_hf", repo="acme/support-lora", revision="main",
                  dest_root=str(tmp_path / "hub"), endpoint=h.url,
                  allow_patterns=["adapter_config.json", "adapter_model.safetensors", "adapter_model.bin"])
    finally:
        h.stop()
    assert r["ok"], r
    fetched = r["result"]["path"]
    assert sorted(f for f in os.listdir(fetched) if not f.startswith(".")) == ["adapter_config.json",
                                                                               "adapter_model.safetensors"]
    tpl = os.path.join(REPO, "templates", "chat", "qwen3.jinja")
    b = vcall(weights, "run_in_venv", fn="build", src=str(models / "base"), dest=str(tmp_path / "served"),
              chat_template=open(tpl).read(), digest="d2", progress_path=None,
              adapters=[{"name": "support", "path": fetched, "source": "hf://acme/support-lora@%s" % h.commit}])
    assert b["ok"], b
    served = b["result"]["adapters"]["support"]
    # make_bin_model.py's adapter: rank 4 on q_proj and v_proj
    assert served == {"rank": 4, "target_modules": ["q_proj", "v_proj"], "source": "hf://acme/support-lora@%s" % h.commit}
    tmp = b["result"]["tmp"]
    assert os.path.isfile(os.path.join(tmp, "adapters", "support", "adapter_model.safetensors"))
    # the base is served as it is (nothing merged), the adapter beside it
    assert b["result"]["merged_dtype"] is None
