"""The weights journey, seen from inside the host (scenario env LLMOPS_WEIGHTS_JOURNEY=1): a .bin
checkpoint and a LoRA adapter became a served, merged, sharded safetensors folder that the engine
serves with the template proven by ids; bad sources (a missing shard, a hash mismatch) fail the play
before anything served changes; a build killed before its link flips leaves the old build served and
is cleaned by the next run.
"""
import concurrent.futures
import json
import os
import signal
import subprocess
import time

import pytest

from killing import kill_run
from test_endpoint import MODEL, UNIT
from test_rerun import playbook as rerun_playbook, snapshot as engine_snapshot

pytestmark = pytest.mark.skipif(os.environ.get("LLMOPS_WEIGHTS_JOURNEY") != "1",
                                reason="this scenario serves no converted checkpoint")

SERVED = "/var/lib/llmops/models/%s" % MODEL
SOURCE = "/srv/models/qwen3-tiny-bin"
ADAPTER = "/srv/adapters/qwen3-tiny-lora"


def listing(host, folder):
    return sorted(host.check_output("ls -A %s" % folder).split())


def test_served_folder_is_sharded_safetensors(host):
    files = listing(host, SERVED)
    shards = [f for f in files if f.endswith(".safetensors")]
    assert len(shards) >= 2, files
    assert "model.safetensors.index.json" in files
    assert not [f for f in files if f.endswith(".bin")], files
    index = json.loads(host.file(SERVED + "/model.safetensors.index.json").content_string)
    assert sorted(set(index["weight_map"].values())) == shards
    marker = json.loads(host.file(SERVED + "/llmops-weights.json").content_string)
    assert marker["source_format"] == "bin"
    assert marker["adapter"] == ADAPTER
    # The source is left as it was.
    assert [f for f in listing(host, SOURCE) if f.endswith(".bin")] == [
        "pytorch_model-%05d-of-00003.bin" % i for i in (1, 2, 3)]


def test_served_folder_carries_the_template(host):
    cfg = json.loads(host.file(SERVED + "/tokenizer_config.json").content_string)
    installed = host.file("/etc/llmops/chat-templates/qwen3.jinja").content_string
    assert cfg["chat_template"] == installed


def playbook(extra):
    return rerun_playbook("--skip-tags", "gateway,monitoring", extra=extra)


def snapshot(host):
    state = engine_snapshot(host)
    # every file of the build, the adapters served by name (adapters/<name>/) included
    state.update(served=host.check_output("cd %s && ls -lR --time-style=+%%s && find . -type f -not -path './.*' | sort | xargs sha256sum"
                                          % SERVED),
                 inode=host.check_output("stat -c %%i %s" % SERVED))
    return state


def served_bytes(host):
    return host.check_output("cd %s && find . -type f -not -path './.*' | sort | xargs sha256sum" % SERVED)


@pytest.mark.engine_independent
def test_bad_sources_fail_before_anything_served_changes(host):
    broken = "/srv/models/qwen3-tiny-bin-missing-shard"
    shard = SOURCE + "/pytorch_model-00002-of-00003.bin"
    host.check_output("rm -rf {b} && cp -a {s} {b} && rm {b}/pytorch_model-00003-of-00003.bin".format(b=broken, s=SOURCE))
    # A hash mismatch: one byte of a shard changes (size kept), the original is kept aside with its mtime.
    host.check_output("cp -a {f} /root/shard.orig && printf X | dd of={f} bs=1 seek=4096 conv=notrunc status=none".format(f=shard))
    before = snapshot(host)
    model = {"name": MODEL, "lora": ADAPTER}
    # (spec, what the failure names, who refused it and says nothing served changed): preflight
    # sees the missing shard; only weights_convert's verification sees the altered byte
    bad = {
        "missing_shard": (dict(model, source=broken), "pytorch_model-00003-of-00003.bin",
                          "(preflight stop: nothing served was changed)"),
        "hash_mismatch": (dict(model, source=SOURCE), "does not match its integrity manifest",
                          "Nothing served was changed."),
    }
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(bad)) as pool:
            runs = dict((name, pool.submit(playbook, {"serving_model": spec})) for name, (spec, dummy, dummy2) in bad.items())
            results = dict((name, fut.result()) for name, fut in runs.items())
    finally:
        host.check_output("cp -a /root/shard.orig {f} && rm -rf {b}".format(f=shard, b=broken))
    for name, (spec, expected, untouched) in bad.items():
        rc, out = results[name]
        assert rc != 0, "%s: the play passed with %s" % (name, spec)
        assert expected in out, "%s: the failure does not say %r:\n%s" % (name, expected, out[-3000:])
        assert untouched in " ".join(out.split()), "%s: the failure does not say %r:\n%s" % (name, untouched, out[-3000:])
    assert snapshot(host) == before
    assert host.service(UNIT).is_running
    # No temporary folder is left beside the served one.
    assert [f for f in listing(host, "/var/lib/llmops/models") if f.startswith("." + MODEL)] == []


@pytest.mark.engine_independent
def test_a_build_killed_before_its_flip_leaves_the_old_build_served_and_is_cleaned_next_run(host, tmp_path):
    """A weights change (another chat template means another build) whose run dies mid-build, the
    build's processes killed on the host as a crash would: the link still names the old build, the
    engine still serves it, and the next run removes what the dead build left."""
    before = snapshot(host)
    served_bytes_before = served_bytes(host)
    build = host.check_output("readlink -f %s" % SERVED)
    template = tmp_path / "qwen3.jinja"
    with open(os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "templates", "chat", "qwen3.jinja")) as f:
        template.write_text("{#- another template, another build -#}\n" + f.read())
    cmd = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"],
           os.path.join(os.environ["MOLECULE_SCENARIO_DIRECTORY"], "converge.yml"),
           "--skip-tags", "gateway,monitoring",
           "-e", "serving_chat_template=%s" % template]
    # Its output goes to a file: an unread pipe fills up and would stall the run before the build.
    log = tmp_path / "killed-run.log"
    with open(log, "w") as out_file:
        proc = subprocess.Popen(cmd, stdout=out_file, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        started = False
        for dummy in range(3000):
            if proc.poll() is not None:
                break
            if host.run("ls -d /var/lib/llmops/models/.%s.build-* 2>/dev/null" % MODEL).rc == 0:
                started = True
                break
            time.sleep(0.2)
        assert started, "no build began:\n" + log.read_text()[-3000:]
        # The crash: the run, its workers, the async module and the build in the engine venv die at once.
        kill_run(proc.pid)
        host.run("pkill -9 -f async_wrapper; pkill -9 -f AnsiballZ_weights_convert; pkill -9 -f run_in_venv")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    left = [f for f in listing(host, "/var/lib/llmops/models") if f.startswith("." + MODEL)]
    assert left, "the kill came after the build finished"
    assert host.check_output("readlink -f %s" % SERVED) == build
    assert snapshot(host) == before and host.service(UNIT).is_running
    rc, out = playbook({})
    assert rc == 0, out[-3000:]
    assert [f for f in listing(host, "/var/lib/llmops/models") if f.startswith("." + MODEL)] == []
    assert host.check_output("readlink -f %s" % SERVED) == build
    after = snapshot(host)
    # The same engine process serves the same unit, environment and bytes.
    assert {k: after[k] for k in ("pid", "unit", "env")} == {k: before[k] for k in ("pid", "unit", "env")}
    assert served_bytes(host) == served_bytes_before
