#!/usr/bin/env bash
# Re-verify and regenerate the hash locks of the GPU stack profiles (metadata only: uv reads the
# wheels' PEP 658 metadata, it downloads no wheel). Run from the repository root:
#   stacks/locks/compile.sh                 # all GPU profiles
#   stacks/locks/compile.sh cuda12.4        # one profile
# A profile "resolves" when uv finds a solution for its Python on x86_64 Linux; the unit test
# tests/unit/test_stack_profiles.py then checks that each lock pins what profiles.yml names.
# The cpu profile has its own recipe (see the headers of stacks/locks/cpu/*.in).
set -euo pipefail
UV=${UV:-uv}
declare -A PY=([cuda12.4]=3.11 [cuda12.8]=3.12 [cuda13.0]=3.12)
# SGLang >= 0.5 ships manylinux_2_34 wheels only; glibc 2.34+ (Debian 12, Ubuntu 22.04, RHEL 10).
declare -A PLAT=([cuda12.4]=x86_64-manylinux_2_28 [cuda12.8]=x86_64-manylinux_2_34 [cuda13.0]=x86_64-manylinux_2_34)
profiles=("$@"); [ ${#profiles[@]} -gt 0 ] || profiles=(cuda12.4 cuda12.8 cuda13.0)
# build/*.in (the build requirements of the profile's sgl-kernel) name an engine lock as constraint:
# they come after the engine locks.
shopt -s nullglob
for p in "${profiles[@]}"; do
  for in in stacks/locks/"$p"/*.in stacks/locks/"$p"/build/*.in; do
    out=${in%.in}.txt
    UV_NO_CONFIG=1 "$UV" pip compile "$in" --python-version "${PY[$p]}" --python-platform "${PLAT[$p]}" \
      --generate-hashes --quiet --custom-compile-command "stacks/locks/compile.sh $p" -o "$out"
    echo "$out: $(grep -cE '^[a-zA-Z0-9]' "$out") packages"
  done
done
# the digests that name the venvs, beside the locks
"$(dirname "$0")"/digests.sh
