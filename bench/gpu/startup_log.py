"""What the planner scripts bench/gpu/h200-calibration-predict.py and h200-hybrid-predict.py share:
the collection's plugins/module_utils/model.py and plan.py, imported with the collection's root (the
working directory) linked as ansible_collections.llmops.serving under a temporary folder, and the
reading of one vLLM start-up log of bench/gpu/h200-calibration.sh (its first line has the argv:
"# ID TIME argv: vllm serve MODEL_DIR FLAGS")."""
import os
import re
import sys
import tempfile

ROOT = os.getcwd()
FIX = os.path.join(ROOT, "tests", "fixtures")
base = tempfile.mkdtemp()
os.makedirs(os.path.join(base, "ansible_collections", "llmops"))
os.symlink(ROOT, os.path.join(base, "ansible_collections", "llmops", "serving"))
sys.path.insert(0, base)
from ansible_collections.llmops.serving.plugins.module_utils import model as M  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
from ansible_collections.llmops.serving.plugins.module_utils import plan as P  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import


def number(pattern, text):
    """The first group of pattern in text as a float (thousands separators dropped), else None."""
    found = re.search(pattern, text)
    return float(found.group(1).replace(",", "")) if found else None


def read_log(path):
    """(text, fixture, flags) of one start-up log: its whole text, the name of the model
    directory (the fixture it was made from) and the argv's --name value pairs (True for a flag
    without a value)."""
    with open(path) as handle:
        text = handle.read()
    argv = re.search(r"argv: vllm serve (.*)", text).group(1).split()
    flags = {word[2:]: True if after.startswith("--") else after
             for word, after in zip(argv[1:], argv[2:] + ["--"]) if word.startswith("--")}
    return text, os.path.basename(argv[0]), flags
