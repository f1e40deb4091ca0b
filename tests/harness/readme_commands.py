# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The commands of README.md and docs/*.md, for the tests that run them (tests/unit/test_readme.py
on the controller, tests/integration/test_readme.py against a converged host): every ```sh block,
one command per line (continuations joined, comments dropped), and the README's tag list."""
import glob
import os
import re
import shlex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")
# The README first: a command shown in both places is run once, under the README's line.
PAGES = [README] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
FENCE = re.compile(r"^```(\w*)\s*$")


def blocks(path=README):
    """[(line number of the opening fence, info string, text)] of every fenced block."""
    out, lang, start, lines = [], None, 0, []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            m = FENCE.match(line.rstrip("\n"))
            if lang is None and m:
                lang, start, lines = m.group(1), number, []
            elif lang is not None and line.rstrip("\n") == "```":
                out.append((start, lang, "".join(lines)))
                lang = None
            elif lang is not None:
                lines.append(line)
    return out


def strip_comment(line):
    """The line without a trailing shell comment (a # that starts a word, outside quotes)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = list(lexer)
    return " ".join(shlex.quote(w) for w in words)


def commands(pages=None, langs=("sh",)):
    """[("page:line", argv)] of the commands of every block in langs (```sh: the commands a reader
    runs as shown; ```console: those whose values are examples), each argv once; VAR=value words
    before the program stay in argv."""
    out, seen = [], set()
    for path in pages or PAGES:
        for number, argv in _page_commands(path, langs):
            if tuple(argv) not in seen:
                seen.add(tuple(argv))
                out.append(("%s:%d" % (os.path.relpath(path, ROOT), number), argv))
    return out


def _page_commands(path, langs):
    out = []
    for start, lang, text in blocks(path):
        if lang not in langs:
            continue
        pending, first = "", None
        for offset, line in enumerate(text.splitlines(), 1):
            if first is None:
                first = start + offset
            pending += line.rstrip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            try:
                cmd = strip_comment(pending)
            except ValueError:
                # a quoted value (JSON for -e) goes on over the next line
                pending += " "
                continue
            if cmd:
                out.append((first, shlex.split(cmd)))
            pending, first = "", None
        # a quote never closed (or a continuation at the block's end) would drop the command unseen
        if pending.strip():
            raise ValueError("%s:%d: a command that does not end in its block: %s" % (path, first, pending.strip()))
    return out


def yaml_block(first_line, path=README):
    """The text of the ```yaml block whose first line is first_line (e.g. '# requirements.yml')."""
    for dummy, lang, text in blocks(path):
        if lang == "yaml" and text.splitlines()[:1] == [first_line]:
            return text
    raise LookupError("README.md has no yaml block starting with %r" % first_line)


def tags(path=README):
    """{playbook: [tags]} from the README's '### Tags' section: lines 'playbook.yml: `tag`, ...'."""
    with open(path) as f:
        text = f.read()
    section = text.split("### Tags\n", 1)[1].split("\n#", 1)[0]
    # an item's continuation lines are indented
    section = re.sub(r"\n  +", " ", section)
    out = {}
    for m in re.finditer(r"^- `(\w+)\.yml`: (.+)$", section, re.M):
        out[m.group(1)] = re.findall(r"`([a-z]+)`", m.group(2))
    return out
