# shellcheck shell=bash
# Sourced by bench/gpu/vllm-wheels.sh and sglang-wheels.sh: carried_wheels LIST DEST downloads the
# wheels a carried-wheels.txt LIST names (its second column, NAME-VERSION-...whl) into DEST/wheels for
# the lent GPU host's Python 3.12 on manylinux x86_64, without their dependencies (the list is whole).
carried_wheels() {
  local list=$1 dest=$2 tag platforms=()
  mkdir -p "$dest/wheels"
  grep -v '^#' "$list" | awk '{print $2}' | sed -E 's/^([^-]+)-([^-]+)-.*/\1==\2/' > "$dest/wheels.txt"
  for tag in manylinux1 manylinux2010 manylinux2014 manylinux_2_5 manylinux_2_12 manylinux_2_17 manylinux_2_24 \
             manylinux_2_26 manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34 manylinux_2_35; do
    platforms+=(--platform "${tag}_x86_64")
  done
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --abi cp312 --abi abi3 --abi none "${platforms[@]}" --platform any -d "$dest/wheels" -r "$dest/wheels.txt"
}
