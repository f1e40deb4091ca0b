"""Pure logic of the synthetic model builder (the torch part runs in Molecule)."""
from ansible_collections.llmops.serving.plugins.module_utils import synthetic


def test_corpus_is_deterministic_and_multilingual():
    a, b = synthetic.corpus(seed=3), synthetic.corpus(seed=3)
    assert a == b and a != synthetic.corpus(seed=4)
    assert any(u"\u4e00" <= ch <= u"\u9fff" for ch in a)  # Chinese text for the BPE merges
    assert "def" in a and "the" in a


def test_special_tokens_follow_qwen_order():
    toks = synthetic.QWEN_SPECIAL_TOKENS
    assert toks[:3] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert toks[-2:] == ["<think>", "</think>"]
    assert len(toks) == 26 == 151668 - 151643 + 1


def test_marker_digest_tracks_parameters(tmp_path):
    params = {"architecture": "Qwen3ForCausalLM", "vocab_size": 1024, "seed": 0}
    assert not synthetic.is_current(str(tmp_path), params)
    (tmp_path / synthetic.MARKER).write_text('{"digest": "%s"}' % synthetic.params_digest(params))
    assert synthetic.is_current(str(tmp_path), params)
    assert not synthetic.is_current(str(tmp_path), dict(params, seed=1))
