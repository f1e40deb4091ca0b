#!/usr/bin/env bash
# Planner calibration starts of vLLM 0.26.0 on the lent 1xH200 host (no systemd, no network): each
# line of CASES is started with the argv the collection renders (plugins/module_utils/engine_args.py
# render("vllm", "0.26.0", spec) in bench/gpu/h200-calibration-cases.py, h200-hybrid-cases.py) and
# stopped once vLLM has logged its memory breakdown ("Free memory on device ..."), which comes after
# "GPU KV cache size" and the CUDA-graph capture. One engine at a time; the next starts only
# once the GPU has no compute process left. Run from the collection's root on that host, as root:
#   WHEELS=/root/wheels SPARSE=.gpu/calib/sparse_ckpt.py WORK=/root/calib DEADLINE_S=540 \
#     bench/gpu/h200-calibration.sh
# and for the hybrid Qwen3.5/3.6 shapes, which have a config and no weights:
#   RUN=hybrid MODEL_DIR=config RESUME=1 NEED_S=150 WHEELS=/root/wheels WORK=/root/hybrid \
#     DEADLINE_S=570 bench/gpu/h200-calibration.sh
# A case whose WORK/ID.done exists is skipped, so a later call (same warm host) goes on where the
# last one stopped; a case is started only when the time left before DEADLINE_S (seconds from this
# script's start) is at least what such a start needs. Settings besides WHEELS, WORK and DEADLINE_S
# (unset: the calibration's):
#   RUN        calibration (default) or hybrid: CASES defaults to bench/gpu/h200-RUN-cases.txt, and
#              RUN names the series in host.txt and in the last line; hybrid also writes the
#              transformers and triton versions to host.txt and shows a hybrid model's KV layout
#              lines (block size, mamba padding, cache mode, concurrency) after each start
#   MODEL_DIR  sparse (default, needs SPARSE): a checkpoint with exact headers and zero data
#              (sparse_ckpt.py FIXTURE /root/ckpt/FIXTURE); config: the fixture's config.json alone,
#              for cases whose flags carry --load-format dummy (vLLM's random weights). Either way
#              Qwen3-4B's tokenizer files go beside it where the fixture has none
#   NEED_S     the seconds a start needs (unset: 112, 125 for a 14B, 200 for a 32B fixture); with
#              NEED_S the first case without time ends the call, as no later one fits either
#   RESUME     set (RESUME=1): a start that has not reached its breakdown line by DEADLINE_S is left
#              running (setsid: it outlives the device call) and the next call polls it instead of
#              starting it again (WORK/ID.pid, WORK/ID.t0); a failed start's output is kept as
#              WORK/ID.failed-EPOCH.raw. Unset: a start is stopped at DEADLINE_S or need + 120 s
# Steps, all idempotent:
#  1. vLLM's venv over the image's torch from the carried wheels (shared GPU recipe, section 1);
#  2. WORK/host.txt: nvidia-smi and torch.cuda.mem_get_info() before any engine ran;
#  3. per case: the model directory /root/ckpt/FIXTURE (MODEL_DIR), then
#     `python -m vllm.entrypoints.cli.main serve /root/ckpt/FIXTURE FLAGS` with render's environment,
#     its whole output in WORK/ID.raw after two '#' lines (start + argv; seconds to the lines seen).
# torch.compile's cache (~/.cache/vllm) is vLLM's default and shared by the runs of one host.
set -uo pipefail
RUN=${RUN:-calibration}
MODEL_DIR=${MODEL_DIR:-sparse}
NEED_S=${NEED_S:-}
RESUME=${RESUME:-}
: "${WHEELS:?folder of the carried wheels}" "${WORK:?output folder}"
case $MODEL_DIR in
  sparse) : "${SPARSE:?sparse_ckpt.py}" ;;
  config) ;;
  *) echo "MODEL_DIR is sparse or config, not $MODEL_DIR" >&2; exit 2 ;;
esac
CASES=${CASES:-bench/gpu/h200-$RUN-cases.txt}
DEADLINE_S=${DEADLINE_S:-540}
IMAGE_VENV=${IMAGE_VENV:-/opt/torch/.venv}
V=${VENV:-/opt/llmops/venvs/vllm-0.26.0}
SITE=$V/lib/python3.12/site-packages
# the engine's lines shown after each start, and the packages whose versions host.txt records
SHOW='Model loading took\|Available KV cache memory\|GPU KV cache size\|Free memory on device'
WIDTH=260
VERSIONS=()
if [ "$RUN" = hybrid ]; then
  SHOW="$SHOW\|Maximum concurrency\|attention block size\|Padding mamba\|Mamba cache mode"
  WIDTH=400
  VERSIONS=(transformers triton)
fi
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
    echo "# nvidia-h200 lent machine, before the first $RUN run, $(date -u +%FT%TZ)"
    echo "host: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader) kernel $(uname -r)"
    "$V/bin/python" -c 'import torch; f, t = torch.cuda.mem_get_info(); print("mem_get_info", f, t); print("torch", torch.__version__, "cuda", torch.version.cuda)'
    "$V/bin/python" -c 'import vllm, sys; print("vllm", vllm.__version__, "python", sys.version.split()[0], *[m + " " + __import__(m).__version__ for m in sys.argv[1:]])' "${VERSIONS[@]}" 2>/dev/null
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
# Qwen3-4B's tokenizer files where the model directory has none (no memory figure depends on them)
tokenizer() {
  for f in vocab.json merges.txt tokenizer_config.json; do
    [ -f "$1/$f" ] || cp "tests/fixtures/qwen/Qwen3-4B/$f" "$1/"
  done
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
pid=

while IFS=$'\t' read -r id fixture flags; do
  [ -n "$id" ] || continue
  [ -f "$WORK/$id.done" ] && continue
  if [ -n "$NEED_S" ]; then
    need=$NEED_S
  else
    case $fixture in
      *32B*) need=200 ;; *14B*) need=125 ;; *) need=112 ;;
    esac
  fi
  raw=$WORK/$id.raw
  if [ -f "$WORK/$id.pid" ] && kill -0 "$(cat "$WORK/$id.pid")" 2>/dev/null; then
    pid=$(cat "$WORK/$id.pid"); start=$(cat "$WORK/$id.t0")
    echo "$id: still starting (pid $pid), polling again at $(el) s"
  else
    left=$(( DEADLINE_S - $(el) ))
    if [ "$left" -lt "$need" ]; then
      echo "no time for $id ($left s left, needs $need)"
      if [ -n "$NEED_S" ]; then break; fi
      continue
    fi
    ckpt=/root/ckpt/$fixture
    if [ "$MODEL_DIR" = config ]; then
      mkdir -p "$ckpt"
      cp "tests/fixtures/qwen/$fixture/config.json" "$ckpt/"
      tokenizer "$ckpt"
    elif [ ! -f "$ckpt/model.safetensors.index.json" ]; then
      python3 "$SPARSE" "tests/fixtures/qwen/$fixture" "$ckpt" < /dev/null || exit 1
      tokenizer "$ckpt"
    fi
    gpu_idle "$pid" || { echo "GPU not idle before $id"; nvidia-smi; exit 1; }
    start=$(date +%s.%N)
    echo "# $id $(date -u +%FT%TZ) argv: vllm serve $ckpt $flags" > "$raw"
    # shellcheck disable=SC2086
    env HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
      VLLM_API_KEY=calibration-h200-key-0123456789 \
      setsid "$V/bin/python" -m vllm.entrypoints.cli.main serve "$ckpt" $flags < /dev/null > "$raw.out" 2>&1 &
    pid=$!
    if [ -n "$RESUME" ]; then echo "$pid" > "$WORK/$id.pid"; echo "$start" > "$WORK/$id.t0"; fi
  fi
  kv=; mem=
  if [ -n "$RESUME" ]; then why=deadline; cap=$DEADLINE_S; else why=timeout; cap=$(( $(el) + need + 120 )); fi
  while [ $(( DEADLINE_S - $(el) )) -gt 5 ] && [ "$(el)" -lt "$cap" ]; do
    now=$(date +%s.%N)
    if [ -z "$kv" ] && grep -q 'GPU KV cache size' "$raw.out"; then kv=$(secs "$start" "$now"); fi
    if grep -q 'Free memory on device' "$raw.out"; then mem=$(secs "$start" "$now"); why=breakdown; break; fi
    kill -0 "$pid" 2>/dev/null || { why=exited; break; }
    sleep 0.5
  done
  if [ "$why" = deadline ]; then
    echo "$id: no breakdown line yet at $(el) s (kv line: ${kv:-none}); left running for the next call"
    tail -5 "$raw.out" | cut -c1-300
    break
  fi
  kill -- -"$pid" 2>/dev/null
  sleep 2
  kill -9 -- -"$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  [ -n "$kv" ] || kv=$(grep -q 'GPU KV cache size' "$raw.out" && echo "before-$mem")
  echo "# elapsed_to_kv_s=${kv:-none} elapsed_to_breakdown_s=${mem:-none} stop=$why" >> "$raw"
  cat "$raw.out" >> "$raw" && rm -f "$raw.out" "$WORK/$id.pid"
  echo "$id: kv ${kv:-none} s, breakdown ${mem:-none} s, $why, at $(el) s"
  grep -h "$SHOW" "$raw" | sed 's/^/    /' | cut -c1-"$WIDTH"
  if [ "$why" = breakdown ]; then
    touch "$WORK/$id.done"
  elif [ -n "$RESUME" ]; then
    mv "$raw" "$WORK/$id.failed-$(date +%s).raw"
    grep -v '^\s*$' "$WORK"/"$id".failed-*.raw | tail -40 | cut -c1-400
  else
    tail -20 "$raw"
  fi
done < "$CASES"
echo "$RUN driver end at $(el) s"
