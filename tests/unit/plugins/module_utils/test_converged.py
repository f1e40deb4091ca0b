"""converged_state's logic: a role skips its changing steps only when its inputs, its files and its
services are as its last full run left them."""
import json
import os

from ansible_collections.llmops.serving.plugins.module_utils import converged as C


def make(tmp_path, files):
    paths = []
    for name, text in files.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        paths.append(str(path))
    return paths


def test_a_recorded_run_is_converged_until_a_file_or_the_inputs_change(tmp_path):
    paths = make(tmp_path, {"unit.service": "[Service]\n", "env": "KEY=1\n", "gone.conf": None})
    stamp = str(tmp_path / "stamps" / "engine.json")
    assert C.differences(C.read_stamp(stamp), "d1", C.file_digests(paths)) == ["no record of a full run"]
    assert C.write_stamp(stamp, C.stamp_document("d1", C.file_digests(paths))) is True
    # the same content again is no write (a converged run records nothing new)
    assert C.write_stamp(stamp, C.stamp_document("d1", C.file_digests(paths))) is False
    assert oct(os.stat(stamp).st_mode & 0o777) == "0o600"
    assert C.differences(C.read_stamp(stamp), "d1", C.file_digests(paths)) == []
    # new inputs
    assert C.differences(C.read_stamp(stamp), "d2", C.file_digests(paths)) == ["the inputs changed since the last full run"]
    # a hand edit, a removal, a file that appears where the role removes one
    (tmp_path / "unit.service").write_text("[Service]\nExecStart=/bin/evil\n")
    (tmp_path / "env").unlink()
    (tmp_path / "gone.conf").write_text("listen 80;\n")
    reasons = C.differences(C.read_stamp(stamp), "d1", C.file_digests(paths))
    assert reasons == ["%s was removed" % paths[1], "%s appeared" % paths[2], "%s was changed" % paths[0]]


def test_a_different_list_of_managed_files_is_not_converged(tmp_path):
    paths = make(tmp_path, {"a": "1", "b": "2"})
    stamp = str(tmp_path / "s.json")
    C.write_stamp(stamp, C.stamp_document("d", C.file_digests(paths[:1])))
    assert C.differences(C.read_stamp(stamp), "d", C.file_digests(paths)) == ["%s is not in the last full run's record" % paths[1]]
    C.write_stamp(stamp, C.stamp_document("d", C.file_digests(paths)))
    assert C.differences(C.read_stamp(stamp), "d", C.file_digests(paths[:1])) == ["%s is no longer managed" % paths[1]]


def test_an_unreadable_or_foreign_stamp_counts_as_none(tmp_path):
    stamp = tmp_path / "s.json"
    stamp.write_text("{not json")
    assert C.read_stamp(str(stamp)) is None
    stamp.write_text(json.dumps({"version": 0, "digest": "d", "files": {}}))
    assert C.read_stamp(str(stamp)) is None
    # the stamp holds checksums, never contents
    path = make(tmp_path, {"secret.env": "API_KEY=sk-very-secret\n"})
    C.write_stamp(str(stamp), C.stamp_document("d", C.file_digests(path)))
    assert "sk-very-secret" not in stamp.read_text()
