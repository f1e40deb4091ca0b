import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.serving.plugins.filter.systemd import systemd_exec


def test_every_argument_is_quoted_and_escaped():
    out = systemd_exec(["/opt/venv/bin/python", "-m", "vllm", "--chat-template", 'a "b" c', "50%", "$HOME", "a\\b"])
    assert out == ('"/opt/venv/bin/python" "-m" "vllm" "--chat-template" "a \\"b\\" c" "50%%" "$$HOME" "a\\\\b"')


@pytest.mark.parametrize("bad", [[], "not a list", ["ok", "line\nbreak"]])
def test_bad_argv_is_refused(bad):
    with pytest.raises(AnsibleFilterError):
        systemd_exec(bad)
