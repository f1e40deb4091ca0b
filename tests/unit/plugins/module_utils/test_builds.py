"""builds: served folders as versioned builds behind an atomically flipped link."""
import os
import threading

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import builds, weights


def folder(tmp_path, name, text):
    d = tmp_path / name
    d.mkdir()
    (d / "model.safetensors").write_text(text)
    return str(d)


def test_publish_flips_the_link_and_keeps_the_previous_build(tmp_path):
    served = str(tmp_path / "qwen")
    one = builds.publish(folder(tmp_path, ".qwen.build-a", "one"), served, "b1")
    assert os.path.islink(served) and open(os.path.join(served, "model.safetensors")).read() == "one"
    assert one["previous"] is None and one["build"].endswith(".builds/qwen/b1")
    # the link is relative, so the models folder can move (or be mounted elsewhere) whole
    assert not os.readlink(served).startswith("/")
    two = builds.publish(folder(tmp_path, ".qwen.build-b", "two"), served, "b2")
    assert open(os.path.join(served, "model.safetensors")).read() == "two"
    assert two["previous"] == one["build"] and os.path.isdir(one["build"])
    three = builds.publish(folder(tmp_path, ".qwen.build-c", "three"), served, "b3", keep=1)
    assert three["pruned"] == [one["build"]] and not os.path.exists(one["build"])
    assert sorted(os.listdir(builds.builds_dir(served))) == ["b2", "b3"]


def test_the_served_path_is_always_a_whole_build_while_it_flips(tmp_path):
    served = str(tmp_path / "qwen")
    builds.publish(folder(tmp_path, ".qwen.build-0", "v0"), served, "v0")
    seen, stop = set(), threading.Event()

    def reader():
        while not stop.is_set():
            try:
                seen.add(open(os.path.join(served, "model.safetensors")).read())
            except (IOError, OSError) as e:
                seen.add("error: %s" % e)

    t = threading.Thread(target=reader)
    t.start()
    for i in range(1, 40):
        builds.publish(folder(tmp_path, ".qwen.build-%d" % i, "v%d" % i), served, "v%d" % i, keep=5)
    stop.set()
    t.join()
    assert all(s.startswith("v") for s in seen), sorted(seen)[:3]


def test_a_served_real_folder_becomes_a_build_and_stays_for_rollback(tmp_path):
    served = folder(tmp_path, "qwen", "old layout")
    res = builds.publish(folder(tmp_path, ".qwen.build-x", "new"), served, "n1")
    assert os.path.basename(res["previous"]).startswith("legacy-")
    assert open(os.path.join(res["previous"], "model.safetensors")).read() == "old layout"


def test_rebuilding_the_served_recipe_never_writes_into_the_served_build(tmp_path):
    served = str(tmp_path / "qwen")
    first = builds.publish(folder(tmp_path, ".qwen.build-a", "same"), served, "d1")
    again = builds.publish(folder(tmp_path, ".qwen.build-b", "same, repaired"), served, "d1")
    assert again["build"] != first["build"] and again["previous"] == first["build"]
    assert open(os.path.join(first["build"], "model.safetensors")).read() == "same"


def test_leftovers_of_interrupted_builds_are_cleaned_and_nothing_else(tmp_path):
    served = str(tmp_path / "qwen")
    builds.publish(folder(tmp_path, ".qwen.build-a", "one"), served, "b1")
    for n in (".qwen.build-x1", ".qwen.base-x2", ".qwen.old-x3", ".qwen.tmp-x4"):
        (tmp_path / n).mkdir()
    os.symlink("nowhere", str(tmp_path / ".qwen.link-x5"))
    (tmp_path / ".other.build-x6").mkdir()
    cleaned = builds.clean_leftovers(served)
    assert sorted(os.path.basename(p) for p in cleaned) == [
        ".qwen.base-x2", ".qwen.build-x1", ".qwen.link-x5", ".qwen.old-x3", ".qwen.tmp-x4"]
    assert sorted(os.listdir(str(tmp_path))) == [".builds", ".other.build-x6", "qwen"]


def test_require_space_names_the_target_filesystem_and_the_numbers(tmp_path):
    free = weights.free_bytes(str(tmp_path / "not" / "yet"))
    assert free == weights.free_bytes(str(tmp_path))
    with pytest.raises(builds.NoSpace, match=r"needs .* GiB on the filesystem of %s" % tmp_path):
        builds.require_space(str(tmp_path), free * 2 + 2 ** 40, "the build")


def test_served_shards_are_files_of_their_own(tmp_path):
    src = tmp_path / "src.safetensors"
    src.write_bytes(b"w" * 1000)
    os.chmod(str(src), 0o600)
    dst = str(tmp_path / "out" / "model.safetensors")
    how = weights.clone_or_copy(str(src), dst)
    assert how in ("reflink", "copy")
    assert os.stat(dst).st_ino != os.stat(str(src)).st_ino
    os.chmod(dst, 0o644)
    with open(str(src), "r+b") as f:
        f.write(b"X")
    assert open(dst, "rb").read(1) == b"w" and os.stat(str(src)).st_mode & 0o777 == 0o600
