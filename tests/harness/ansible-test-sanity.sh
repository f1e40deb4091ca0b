#!/bin/bash
# ansible-test must run from inside ansible_collections/<ns>/<name>: sanity-test a fresh copy there.
# Runs with the controller venv's Python and what it has installed (no bootstrap downloads: the
# machines that run this reach PyPI only), so tests whose tools are missing are skipped by
# ansible-test itself and say so.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST=$ROOT/.cache/ansible-test/ansible_collections/llmops/serving
rm -rf "$DEST"; mkdir -p "$DEST"
git -C "$ROOT" ls-files -z --cached --others --exclude-standard | (cd "$ROOT" && xargs -0 cp --parents -t "$DEST")
# ansible-test bootstraps pip in its venvs with a script from outside PyPI: use our stand-in.
pipver=$(grep -ho "pip='[0-9.]*'" "$(python3 -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_internal/python_requirements.py" \
  | head -1 | tr -dc '0-9.')
mkdir -p ~/.ansible/test/cache
cp "$ROOT/tests/harness/files/get_pip_standin.py" ~/.ansible/test/cache/"get_pip_${pipver//./_}.py"
cd "$DEST"
# ansible-test lists targets from version control: give the copy its own throwaway repository.
git init -q . && git add -A
export ANSIBLE_COLLECTIONS_PATH=$ROOT/.cache/ansible-test:${LLMOPS_CACHE:-$HOME/.cache/llmops-serving}/collections
ansible-test sanity --local --python "$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
  --color no "$@"
