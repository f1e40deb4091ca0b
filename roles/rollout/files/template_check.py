# Copyright: contributors to llmops.serving
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render the chat template with a venv's own tokenizer library (run with that venv's python).

Prints one JSON line; exits 1 with a reason when the template does not render, or when Qwen's chat
markers are not single special tokens of the tokenizer.
"""
import argparse
import json
import sys

PROBE = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Say hello."},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "Again."},
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--template")
    a = ap.parse_args()
    import transformers
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a.model)
    template = open(a.template).read() if a.template else None
    text = tok.apply_chat_template(PROBE, tokenize=False, add_generation_prompt=True, chat_template=template)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    markers = {m: tok.convert_tokens_to_ids(m) for m in ("<|im_start|>", "<|im_end|>")}
    problems = []
    for m, i in markers.items():
        if i is None or i == tok.unk_token_id:
            problems.append("%s is not a token" % m)
        elif i not in ids:
            problems.append("%s (id %s) is not in the rendered prompt's ids" % (m, i))
    if not text.rstrip().endswith("<|im_start|>assistant"):
        problems.append("the prompt does not end with the assistant turn")
    out = {"transformers": transformers.__version__, "markers": markers, "prompt_tokens": len(ids),
           "problems": problems}
    print(json.dumps(out))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
