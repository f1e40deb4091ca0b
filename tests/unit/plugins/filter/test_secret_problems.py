"""API keys: refused for what users really type, never quoted back in the refusal."""
import subprocess

import pytest

from ansible_collections.llmops.serving.plugins.filter.secret_problems import secret_problems
from ansible_collections.llmops.serving.plugins.module_utils.api_keys import estimated_bits, problems


def generated(command):
    return subprocess.run(command, shell=True, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("command", ["openssl rand -hex 32", "openssl rand -hex 16", "openssl rand -base64 32",
                                     "head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \\n'"])
def test_keys_made_the_ways_the_docs_say_pass(command):
    key = generated(command)
    assert problems(key) == [], (command, estimated_bits(key))


@pytest.mark.parametrize("key, words", [
    ("", "is empty"),
    (None, "is empty"),
    ("short-Key-1", "shorter than 16"),
    ("replace-with-openssl-rand-hex-32", "placeholder"),
    ("CHANGEME-0a1b2c3d4e5f6a7b8c9d", "placeholder"),
    ("aaaaaaaaaaaaaaaaaaaaaaaa", "too predictable"),
    ("abababababababababababab", "too predictable"),
    ('0a1b2c3d4e5f"6a7b8c9d0e1f', "a double quote"),
    ("0a1b2c3d4e5f$6a7b8c9d0e1f", "a dollar sign"),
    ("0a1b2c3d4e5f\\6a7b8c9d0e1f", "a backslash"),
    ("0a1b2c3d4e5f 6a7b8c9d0e1f", "whitespace"),
    ("0a1b2c3d4e5f;6a7b8c9d0e1f", "a semicolon"),
    ("0a1b2c3d4e5f=6a7b8c9d0e1f", "= inside it"),
])
def test_bad_keys_are_named(key, words):
    found = problems(key)
    assert any(words in sentence for sentence in found), found


def test_a_sentence_never_holds_the_key():
    key = 'replace"$ me'
    sentences = secret_problems({"gateway_api_keys[0] (team-a)": key})
    assert sentences and sentences[0].startswith("gateway_api_keys[0] (team-a) ")
    assert key not in " ".join(sentences)


def test_base64_padding_is_allowed_at_the_end():
    assert problems("c29tZSByYW5kb20ga2V5IGJ5dGVzIQ==") == []


def test_labels_keep_their_order_and_good_keys_say_nothing():
    out = secret_problems({"b_key": "x", "a_key": "x", "ok": generated("openssl rand -hex 32")})
    assert [s.split(" ")[0] for s in out] == ["a_key", "b_key"]


@pytest.mark.parametrize("clients, engine_keys, words", [
    ([], [], "gateway_api_keys is empty"),
    ([{"name": "a", "key": "k" * 4}], [], "gateway_api_keys[0] (a) is shorter"),
    ([{"name": "a", "key": "0a1b2c3d4e5f6a7b8c9d0e1f"}, {"name": "a", "key": "1a1b2c3d4e5f6a7b8c9d0e1f"}], [], "names repeat: a"),
    ([{"name": "a b", "key": "0a1b2c3d4e5f6a7b8c9d0e1f"}], [], "a name is not"),
    ([{"name": "a", "key": "0a1b2c3d4e5f6a7b8c9d0e1f"}, {"name": "b", "key": "0a1b2c3d4e5f6a7b8c9d0e1f"}], [], "share a key"),
    ([{"name": "a", "key": "0a1b2c3d4e5f6a7b8c9d0e1f"}], ["0a1b2c3d4e5f6a7b8c9d0e1f"], "the key of a is the engine key"),
    ([{"name": "a"}], [], "gateway_api_keys[0] (a) is empty"),
    # priorities as users type them, and a misspelt field
    ([{"name": "a", "key": "0a1b2c3d4e5f6a7b8c9d0e1f", "priority": "high"}], [],
     "gateway_api_keys[0] (a): priority must be an integer from -1000 to 1000"),
    ([{"name": "a", "key": "0a1b2c3d4e5f6a7b8c9d0e1f", "priority": True}], [], "priority must be an integer"),
    ([{"name": "a", "key": "0a1b2c3d4e5f6a7b8c9d0e1f", "priority": 5000}], [], "priority must be an integer"),
    ([{"name": "a", "key": "0a1b2c3d4e5f6a7b8c9d0e1f", "priorty": 5}], [],
     "gateway_api_keys[0] (a): unknown keys priorty (known: name, key, priority)"),
])
def test_client_lists_users_get_wrong_are_refused(clients, engine_keys, words):
    from ansible_collections.llmops.serving.plugins.filter.client_key_problems import client_key_problems
    found = client_key_problems(clients, engine_keys)
    assert any(words in sentence for sentence in found), found
    for key in engine_keys + [c.get("key", "") for c in clients]:
        assert not key or key not in " ".join(found)


def test_a_good_client_list_passes():
    from ansible_collections.llmops.serving.plugins.filter.client_key_problems import client_key_problems
    clients = [{"name": "team-a", "key": generated("openssl rand -hex 32"), "priority": 10},
               {"name": "team.b", "key": generated("openssl rand -base64 24"), "priority": -5}]
    assert client_key_problems(clients, [generated("openssl rand -hex 32"), ""]) == []


@pytest.mark.parametrize("value, ok", [("10.0.0.0/24", True), ("192.0.2.7", True), ("fd00::/64", True),
                                       ("10.0.0.5/24", True), ("10.0.0.300/24", False), ("10.0.0.0/33", False),
                                       ("prometheus.example.com", False), ("", False), ("10.0.0.0/24 ", False)])
def test_networks(value, ok):
    from ansible_collections.llmops.serving.plugins.filter.invalid_networks import invalid_networks
    assert invalid_networks([value]) == ([] if ok else [value])
