"""probe_cache: answers of read-only venv probes, kept per venv and exact input."""
import os
import stat

from ansible_collections.llmops.serving.plugins.module_utils.probe_cache import memoized


class Probe(object):
    """A runner that counts its runs and answers what it is told."""

    def __init__(self, rc=0):
        self.rc = rc
        self.calls = []

    def __call__(self, argv, data=None, env=None):
        self.calls.append((list(argv), data, env))
        return self.rc, "answer %d to %s" % (len(self.calls), data), "warnings"


def make_venv(root, name="vllm-0.32.0-37ea9d68ebb9"):
    venv = root / name
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = venv / "bin" / "python"
    python.write_text("")
    return venv, str(python)


def test_the_second_identical_probe_is_answered_from_the_cache(tmp_path):
    venv, python = make_venv(tmp_path)
    probe, cache = Probe(), str(tmp_path / "cache")
    first = memoized(probe, cache, python)("python -c X".split(), '{"argv": 1}', {"A": "1"})
    again = memoized(probe, cache, python)
    assert again("python -c X".split(), '{"argv": 1}', {"A": "1"}) == first
    assert len(probe.calls) == 1 and len(again.hits) == 1
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    kept = os.listdir(cache)
    assert len(kept) == 1 and stat.S_IMODE(os.stat(os.path.join(cache, kept[0])).st_mode) == 0o600


def test_any_other_input_asks_again(tmp_path):
    venv, python = make_venv(tmp_path)
    probe, cache = Probe(), str(tmp_path / "cache")
    run = memoized(probe, cache, python)
    run(["python", "-c", "X"], "a", {"A": "1"})
    run(["python", "-c", "Y"], "a", {"A": "1"})
    run(["python", "-c", "X"], "b", {"A": "1"})
    run(["python", "-c", "X"], "a", {"A": "2"})
    assert len(probe.calls) == 4 and run.hits == []


def test_the_same_name_through_another_link_is_the_same_venv(tmp_path):
    venv, python = make_venv(tmp_path)
    (tmp_path / "vllm-current").symlink_to(venv)
    probe, cache = Probe(), str(tmp_path / "cache")
    memoized(probe, cache, python)(["p"], "a")
    via_link = memoized(probe, cache, str(tmp_path / "vllm-current" / "bin" / "python"))
    via_link(["p"], "a")
    assert len(probe.calls) == 1 and via_link.hits


def test_a_venv_built_again_under_the_same_name_is_asked_again(tmp_path):
    venv, python = make_venv(tmp_path)
    probe, cache = Probe(), str(tmp_path / "cache")
    memoized(probe, cache, python)(["p"], "a")
    # a rebuild writes a new pyvenv.cfg (new inode)
    os.unlink(str(venv / "pyvenv.cfg"))
    (tmp_path / "other").write_text("home = /usr/bin\n")
    os.rename(str(tmp_path / "other"), str(venv / "pyvenv.cfg"))
    run = memoized(probe, cache, python)
    run(["p"], "a")
    assert len(probe.calls) == 2 and run.hits == []


def test_a_changed_input_file_is_asked_again(tmp_path):
    venv, python = make_venv(tmp_path)
    template = tmp_path / "qwen3.jinja"
    template.write_text("{{ messages }}")
    probe, cache = Probe(), str(tmp_path / "cache")
    memoized(probe, cache, python, inputs=[str(template)])(["p"], "a")
    memoized(probe, cache, python, inputs=[str(template)])(["p"], "a")
    template.write_text("{{ messages }} ")
    memoized(probe, cache, python, inputs=[str(template)])(["p"], "a")
    assert len(probe.calls) == 2


def test_failures_are_not_kept(tmp_path):
    venv, python = make_venv(tmp_path)
    probe, cache = Probe(rc=1), str(tmp_path / "cache")
    assert memoized(probe, cache, python)(["p"], "a")[0] == 1
    assert memoized(probe, cache, python)(["p"], "a")[0] == 1
    assert len(probe.calls) == 2


def test_check_mode_reads_but_never_writes(tmp_path):
    venv, python = make_venv(tmp_path)
    probe, cache = Probe(), str(tmp_path / "cache")
    memoized(probe, cache, python, store=False)(["p"], "a")
    assert not os.path.exists(cache)
    memoized(probe, cache, python)(["p"], "a")
    run = memoized(probe, cache, python, store=False)
    run(["p"], "a")
    assert len(probe.calls) == 2 and run.hits


def test_no_cache_for_an_interpreter_outside_a_venv_or_without_a_folder(tmp_path):
    probe = Probe()
    memoized(probe, str(tmp_path / "cache"), "/usr/bin/python3")(["p"], "a")
    memoized(probe, str(tmp_path / "cache"), "/usr/bin/python3")(["p"], "a")
    venv, python = make_venv(tmp_path)
    memoized(probe, None, python)(["p"], "a")
    memoized(probe, None, python)(["p"], "a")
    assert len(probe.calls) == 4 and not os.path.exists(str(tmp_path / "cache"))


def test_an_unwritable_or_corrupt_cache_only_costs_a_probe(tmp_path):
    venv, python = make_venv(tmp_path)
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    probe = Probe()
    assert memoized(probe, str(blocked), python)(["p"], "a")[0] == 0
    cache = tmp_path / "cache"
    memoized(probe, str(cache), python)(["p"], "a")
    for kept in cache.iterdir():
        kept.write_text("{not json")
    run = memoized(probe, str(cache), python)
    assert run(["p"], "a")[0] == 0 and run.hits == []
    assert len(probe.calls) == 3
