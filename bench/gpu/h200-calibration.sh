#!/usr/bin/env bash
# Planner calibration starts of vLLM 0.26.0 on the lent 1xH200 host (no systemd, no network): each
# line of CASES is started with the argv the collection renders (bench/gpu/h200-calibration-cases.py,
# plugins/module_utils/engine_args.py render("vllm", "0.26.0", spec)) and stopped once vLLM has
# logged its memory breakdown ("Free memory on device ..."), which comes after "GPU KV cache size"
# and the CUDA-graph capture. One engine at a time; the next starts only once the GPU has no compute
# process left. Run from the collection's root on that host, as root:
#   WHEELS=/root/wheels SPARSE=.gpu/calib/sparse_ckpt.py WORK=/root/calib DEADLINE_S=540 \
#     bench/gpu/h200-calibration.sh
# A case whose WORK/ID.done exists is skipped, so a later call (same warm host) goes on where the
# last one stopped; a case is started only when the time left before DEADLINE_S (seconds from this
# script's start) is at least what such a start needs. Steps, all idempotent:
#  1. vLLM's venv over the image's torch from the carried wheels (shared GPU recipe, section 1);
#  2. WORK/host.txt: nvidia-smi and torch.cuda.mem_get_info() before any engine ran;
#  3. per case: a checkpoint with exact headers and zero data (sparse_ckpt.py FIXTURE /root/ckpt/
#     FIXTURE; fixtures with only config.json get Qwen3-4B's tokenizer files beside it), then
#     `python -m vllm.entrypoints.cli.main serve /root/ckpt/FIXTURE FLAGS` with render's environment,
#     its whole output in WORK/ID.raw after two '#' lines (start + argv; seconds to the lines seen).
# torch.compile's cache (~/.cache/vllm) is vLLM's default and shared by the runs of one host.
set -uo pipefail
: "${WHEELS:?folder of the carried wheels}" "${SPARSE:?sparse_ckpt.py}" "${WORK:?output folder}"
CASES=${CASES:-bench/gpu/h200-calibration-cases.txt}
DEADLINE_S=${DEADLINE_S:-540}
IMAGE_VENV=${IMAGE_VENV:-/opt/torch/.venv}
V=${VENV:-/opt/llmops/venvs/vllm-0.26.0}
SITE=$V/lib/python3.12/site-packages
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p "$WORK" /root/ckpt

if [ ! -d "$SITE/vllm-0.26.0.dist-info" ]; then
  [ -x "$V/bin/python" ] || "$IMAGE_VENV/bin/python3" -m venv "$V"
  echo "$IMAGE_VENV/lib/python3.12/site-packages" > "$SITE/image-torch.pth"
  "$V/bin/python" -m pip install -q --no-index --no-deps --no-compile "$WHEELS"/*.whl || exit 1
  echo "venv ready at $(el) s"
fi
if [ ! -s "$WORK/host.txt" ]; then
  {
    echo "# nvidia-h200 lent machine, before the first calibration run, $(date -u +%FT%TZ)"
    echo "host: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader) kernel $(uname -r)"
    "$V/bin/python" -c 'import torch; f, t = torch.cuda.mem_get_info(); print("mem_get_info", f, t); print("torch", torch.__version__, "cuda", torch.version.cuda)'
    "$V/bin/python" -c 'import vllm, sys; print("vllm", vllm.__version__, "python", sys.version.split()[0])' 2>/dev/null
    nvidia-smi
  } > "$WORK/host.txt" 2>&1
fi

# no process of the last engine's group left and under 2 GiB of the GPU in use
gpu_idle() {
  for _ in $(seq 120); do
    if [ -z "${1:-}" ] || ! kill -0 -- -"$1" 2>/dev/null; then
      used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
      [ "${used:-99999}" -lt 2048 ] && return 0
    fi
    sleep 0.5
  done
  return 1
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
pid=

while IFS=$'\t' read -r id fixture flags; do
  [ -n "$id" ] || continue
  [ -f "$WORK/$id.done" ] && continue
  case $fixture in
    *32B*) need=200 ;; *14B*) need=125 ;; *) need=112 ;;
  esac
  left=$(( DEADLINE_S - $(el) ))
  if [ "$left" -lt "$need" ]; then echo "no time for $id ($left s left, needs $need)"; continue; fi
  ckpt=/root/ckpt/$fixture
  if [ ! -f "$ckpt/model.safetensors.index.json" ]; then
    python3 "$SPARSE" "tests/fixtures/qwen/$fixture" "$ckpt" < /dev/null || exit 1
    for f in vocab.json merges.txt tokenizer_config.json; do
      [ -f "$ckpt/$f" ] || cp "tests/fixtures/qwen/Qwen3-4B/$f" "$ckpt/"
    done
  fi
  gpu_idle "$pid" || { echo "GPU not idle before $id"; nvidia-smi; exit 1; }
  raw=$WORK/$id.raw
  start=$(date +%s.%N)
  echo "# $id $(date -u +%FT%TZ) argv: vllm serve $ckpt $flags" > "$raw"
  # shellcheck disable=SC2086
  env HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
    VLLM_API_KEY=calibration-h200-key-0123456789 \
    setsid "$V/bin/python" -m vllm.entrypoints.cli.main serve "$ckpt" $flags < /dev/null > "$raw.out" 2>&1 &
  pid=$!
  kv=; mem=; why=timeout; cap=$(( $(el) + need + 120 ))
  while [ $(( DEADLINE_S - $(el) )) -gt 5 ] && [ "$(el)" -lt "$cap" ]; do
    now=$(date +%s.%N)
    if [ -z "$kv" ] && grep -q 'GPU KV cache size' "$raw.out"; then kv=$(secs "$start" "$now"); fi
    if grep -q 'Free memory on device' "$raw.out"; then mem=$(secs "$start" "$now"); why=breakdown; break; fi
    kill -0 "$pid" 2>/dev/null || { why=exited; break; }
    sleep 0.5
  done
  kill -- -"$pid" 2>/dev/null
  sleep 2
  kill -9 -- -"$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  echo "# elapsed_to_kv_s=${kv:-none} elapsed_to_breakdown_s=${mem:-none} stop=$why" >> "$raw"
  cat "$raw.out" >> "$raw" && rm -f "$raw.out"
  echo "$id: kv ${kv:-none} s, breakdown ${mem:-none} s, $why, at $(el) s"
  grep -h 'Model loading took\|Available KV cache memory\|GPU KV cache size\|Free memory on device' "$raw" | sed 's/^/    /' | cut -c1-260
  [ "$why" = breakdown ] && touch "$WORK/$id.done"
  [ "$why" = breakdown ] || tail -20 "$raw"
done < "$CASES"
echo "calibration driver end at $(el) s"
