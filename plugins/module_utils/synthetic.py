# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build a tiny, random-weight, Qwen-shaped chat model for demos and CI.

The weights are random, so the text is nonsense; what is real is everything an engine and a client
touch: a Qwen2/Qwen3 architecture and config, safetensors weights, a byte-level BPE tokenizer with
Qwen's special tokens in Qwen's order, and a chat template. The tokenizer is trained on a corpus
generated here from word lists (English, Chinese, code), so nothing is read from the host.

Needs torch, transformers and tokenizers: run it with an engine venv's interpreter.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import random
import shutil
import tempfile

MARKER = "llmops-synthetic.json"

# Qwen3's added tokens, in Qwen's id order (151643 ...). Qwen2.5 has the same first 22.
QWEN_SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
    "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
    "<tool_response>", "</tool_response>", "<think>", "</think>",
]
# The ones Qwen marks `special` (skipped when decoding); tool/think/fim tokens are not.
QWEN_FLAGGED_SPECIAL = set(QWEN_SPECIAL_TOKENS[:14])
QWEN_ADDITIONAL_SPECIAL = QWEN_SPECIAL_TOKENS[1:14]

# Qwen2/2.5/3 pre-tokenizer split pattern.
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Shapes: engines' CPU attention needs head_dim >= 32 (vLLM fails at the first request with 16).
ARCHITECTURES = {
    "Qwen3ForCausalLM": dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                             num_key_value_heads=2, head_dim=32),
    "Qwen2ForCausalLM": dict(hidden_size=128, intermediate_size=256, num_attention_heads=4,
                             num_key_value_heads=2),
}

_EN = ("the model serves chat requests on a host with enough memory for weights and cache while "
       "operators watch latency metrics alerts and errors before they upgrade every engine version "
       "across the fleet a request carries messages from a user and the assistant answers with tokens "
       "until it reaches the limit or the end token the scheduler batches sequences and the cache keeps "
       "keys and values for each layer so long documents need more blocks than short questions "
       "please summarise this report explain the error write a function that parses numbers "
       "security teams require keys tls and limits for every client budget time queue token "
       "prompt context window throughput tensor parallel gpu driver kernel compile install verify "
       "rollback health ready listen port gateway upstream drain restart service unit user group").split()
_ZH = (u"模型 服务 请求 用户 助手 回答 问题 文档 摘要 长度 内存 显存 缓存 延迟 吞吐 部署 升级 回滚 "
       u"安全 密钥 网关 监控 告警 指标 日志 中文 代码 函数 数据 文件 版本 驱动 内核 编译 安装 验证 "
       u"请 总结 这份 报告 解释 错误 编写 一个 解析 数字 的 了 是 在 和 有 我们 你们 他们 这个 那个 "
       u"上下文 窗口 并行 调度 批处理 序列 令牌 生成 推理 对话 历史 新的 会话").split()
_CODE = ("def return import class self if else for while in range print len dict list str int "
         "async await yield lambda None True False try except raise with as from json yaml "
         "{ } ( ) [ ] : ; = == != <= >= + - * / , . -> => # // /* */ 0 1 2 8 16 32 64 128 "
         "{\"role\": \"user\", \"content\": \"hi\"} </div> <p> http:// /v1/chat/completions").split()


def corpus(seed=0, sentences=6000):
    """A deterministic multilingual corpus (about 300 kB) for training the BPE merges."""
    rng = random.Random(seed)
    out = []
    for dummy in range(sentences):
        kind = rng.random()
        if kind < 0.5:
            words = [rng.choice(_EN) for dummy in range(rng.randint(4, 16))]
            out.append(" ".join(words).capitalize() + rng.choice([".", "?", "!", ","]))
        elif kind < 0.8:
            out.append(u"".join(rng.choice(_ZH) for dummy in range(rng.randint(3, 12))) + rng.choice([u"。", u"？", u"，"]))
        else:
            out.append(" ".join(rng.choice(_CODE) for dummy in range(rng.randint(3, 12))))
    return "\n".join(out)


def params_digest(params):
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode("utf-8")).hexdigest()


def read_marker(path):
    try:
        with open(os.path.join(path, MARKER)) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return None


def is_current(path, params):
    marker = read_marker(path)
    return bool(marker) and marker.get("digest") == params_digest(params)


def build_tokenizer(vocab_size, chat_template, seed):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    base = vocab_size - len(QWEN_SPECIAL_TOKENS)
    trainer = trainers.BpeTrainer(vocab_size=base, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(corpus(seed).split("\n"), trainer)
    if tok.get_vocab_size() != base:
        raise ValueError("the corpus yields %d BPE tokens, %d wanted" % (tok.get_vocab_size(), base))
    # Qwen's order: the added tokens follow the BPE vocabulary, <|endoftext|> first.
    from tokenizers import AddedToken
    tok.add_tokens([AddedToken(t, special=t in QWEN_FLAGGED_SPECIAL, normalized=False)
                    for t in QWEN_SPECIAL_TOKENS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        unk_token=None, additional_special_tokens=QWEN_ADDITIONAL_SPECIAL, model_max_length=131072,
        clean_up_tokenization_spaces=False, split_special_tokens=False)
    if chat_template:
        fast.chat_template = chat_template
    return fast


def _patch_tokenizer_config(out, chat_template):
    path = os.path.join(out, "tokenizer_config.json")
    with open(path) as f:
        cfg = json.load(f)
    # Loaders key on the class name; Qwen checkpoints say Qwen2Tokenizer.
    cfg.update(tokenizer_class="Qwen2Tokenizer", errors="replace", add_prefix_space=False)
    if chat_template:
        cfg["chat_template"] = chat_template
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)


def build_model(out, architecture, vocab_size, layers, max_position_embeddings, seed, tokenizer):
    import torch
    import transformers

    if architecture not in ARCHITECTURES:
        raise ValueError("architecture must be one of %s" % ", ".join(sorted(ARCHITECTURES)))
    ids = dict((t, tokenizer.convert_tokens_to_ids(t)) for t in ("<|endoftext|>", "<|im_end|>"))
    kw = dict(ARCHITECTURES[architecture])
    kw.update(vocab_size=vocab_size, num_hidden_layers=layers, max_position_embeddings=max_position_embeddings,
              rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
              bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
              pad_token_id=ids["<|endoftext|>"], torch_dtype="bfloat16")
    cfg = getattr(transformers, architecture.replace("ForCausalLM", "Config"))(**kw)
    torch.manual_seed(seed)
    model = getattr(transformers, architecture)(cfg).to(torch.bfloat16).eval()
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=ids["<|endoftext|>"], eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"], do_sample=True, temperature=0.7, top_p=0.8, top_k=20)
    model.save_pretrained(out, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def create(path, params, chat_template=None):
    """Build the model into a temporary folder beside path; returns a summary with that folder
    (`tmp`), which the caller publishes (builds.publish, outside the venv)."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        os.makedirs(parent)
    tmp = tempfile.mkdtemp(prefix=".%s.tmp-" % os.path.basename(path), dir=parent)
    try:
        tok = build_tokenizer(params["vocab_size"], chat_template, params["seed"])
        if len(tok) != params["vocab_size"]:
            raise ValueError("tokenizer has %d tokens, expected %d" % (len(tok), params["vocab_size"]))
        n = build_model(tmp, params["architecture"], params["vocab_size"], params["layers"],
                        params["max_position_embeddings"], params["seed"], tok)
        tok.save_pretrained(tmp)
        _patch_tokenizer_config(tmp, chat_template)
        special = dict((t, tok.convert_tokens_to_ids(t)) for t in QWEN_SPECIAL_TOKENS)
        marker = dict(params=params, digest=params_digest(params), parameters=n, special_token_ids=special)
        with open(os.path.join(tmp, MARKER), "w") as f:
            json.dump(marker, f, indent=2, sort_keys=True)
        # Weights are read by the engine's service user and written by no one.
        os.chmod(tmp, 0o755)
        for name in os.listdir(tmp):
            os.chmod(os.path.join(tmp, name), 0o644)
        return dict(marker, tmp=tmp)
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
