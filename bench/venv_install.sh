#!/usr/bin/env bash
# uv against pip on the same hash-locked requirement set, cold and warm cache, into a fresh venv.
#   bench/venv_install.sh [LOCK] [WHEELHOUSE]
# Defaults: the cpu profile's vLLM lock and the controller wheelhouse `make wheelhouse` builds
# ($LLMOPS_CACHE/wheelhouse/cpu). Installs use --no-index against the wheelhouse, so the figures
# measure the installers (resolve-free hash-checked install, unpack, link), not the network.
# "cold": empty installer cache; "warm": the same cache again, into another fresh venv.
# Writes bench/results/venv_install-<date>.md (a Markdown table) and prints it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOCK=${1:-$ROOT/stacks/locks/cpu/vllm-0.32.0.txt}
WH=${2:-${LLMOPS_CACHE:-$HOME/.cache/llmops-serving}/wheelhouse/cpu}
PY=${PYTHON:-python3.11}
UV=${UV:-$ROOT/.venv/bin/uv}
WORK=$(mktemp -d /tmp/llmops-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 UV_NO_CONFIG=1 UV_LINK_MODE=copy
out=$ROOT/bench/results/venv_install-$(date -u +%Y%m%d).md
mkdir -p "$ROOT/bench/results"
rows=()
run() {  # installer cache-state
  local inst=$1 state=$2 venv=$WORK/venv-$1-$2 t0 t1
  if [ "$inst" = uv ]; then
    "$UV" venv -q --python "$PY" "$venv"
    t0=$(date +%s.%N)
    UV_CACHE_DIR=$WORK/cache-uv "$UV" pip sync -q --python "$venv/bin/python" --require-hashes \
      --no-index --find-links "$WH" "$LOCK"
  else
    "$PY" -m venv "$venv"
    t0=$(date +%s.%N)
    PIP_CACHE_DIR=$WORK/cache-pip "$venv/bin/pip" install -q --no-deps --require-hashes \
      --no-index --find-links "$WH" -r "$LOCK"
  fi
  t1=$(date +%s.%N)
  local n size
  n=$("$venv/bin/python" -c 'import importlib.metadata as m; print(len(list(m.distributions())))')
  size=$(du -sm "$venv" | cut -f1)
  rows+=("| $inst | $state | $(printf '%.1f' "$(echo "$t1 - $t0" | bc)") | $n | $size |")
  echo "${rows[-1]}" >&2
  rm -rf "$venv"
}
for inst in uv pip; do run "$inst" cold; run "$inst" warm; done
{
  echo "Lock: ${LOCK#"$ROOT"/} ($(grep -cE '^[a-zA-Z0-9]' "$LOCK") pinned packages), from wheelhouse ${WH}"
  echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $("$PY" -V), uv $("$UV" --version | cut -d' ' -f2), pip $("$PY" -m pip --version | cut -d' ' -f2); $(date -u +%F)"
  echo
  echo "| installer | cache | install s | dists | venv MiB |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "$out"
