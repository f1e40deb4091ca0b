#!/usr/bin/env bash
# validate.yml proven on a GPU host where the engine is not a systemd unit (the lent H200 machine:
# no systemd, no network). Run from the collection's root on that host, as root:
#   WHEELS=/root/wheels CKPT_SRC=tests/fixtures/qwen/Qwen3-4B SPARSE=<sparse_ckpt.py> OUT=<dir> \
#     [ENGINE=vllm|sglang] [ENGINE_VERSION=...] bench/gpu/h200-validate.sh
# ENGINE=vllm (default, 0.26.0) or ENGINE=sglang (default 0.5.17, the newest SGLang whose pins take
# the image's torch 2.11.0). Steps, all with the collection's own code:
#  1. the engine's venv over the host's torch from the carried wheels (shared GPU recipe, section 1);
#  2. a checkpoint with exact headers and zero data (sparse_ckpt.py) from the fixture's config;
#  3. a stack profile `h200-image` for the run: the collection's profiles plus the image's torch with
#     this engine over it (its lock lists the carried wheels, its args are what this stack needs);
#  4. the engine argv from llmops.serving.engine_args (validated by the engine's own parser; the
#     profile's args as stack_args), started by hand with the module's environment and its log in a
#     file; SGLang through the collection's launcher (installed into the venv as the engine role
#     does), which takes the API key from the environment;
#  5. validate.yml twice (log file + URL): the first run records the benchmark baseline, the second
#     compares with it; GPU health from the real nvidia-smi;
#  6. the engine's own client as the peer on the same server: `vllm bench serve`, or
#     `python -m sglang.bench_serving --backend sglang-oai-chat` (random-ids: no dataset download).
# The argv has --max-num-seqs / --max-running-requests 256, serving_max_concurrency's default, as
# the engine role renders it (the plan validate makes reads that setting; the recorded vLLM run of
# 2026-12-02 predates this and ran with vLLM's 1024).
# SGLang on this image: the carried sglang-kernel wheel has no FA3 (flash_ops) and flashinfer has no
# prebuilt kernels, so the profile's args pick the triton attention backend and PyTorch sampling;
# SGLang's own JIT kernels (norm, rope, activation, KV store) are built by the image's nvcc at start.
# An engine already answering on the port is reused (a second call on a warm host); KEEP_ENGINE=1
# leaves it running at the end.
# What lands in $OUT: the argv, a copy of the engine log (which is written to $ENGINE_LOG, default
# /var/log/llmops-<engine>-<version>.log), both validate runs, nvidia-smi -q -x, the peer's result, a
# timings file. On the lent machine give OUT a folder of its own, not the device tool's $OUT (emptied
# before each command, and only 8 files come back from it): tar it into $OUT afterwards.
set -euo pipefail
: "${WHEELS:?folder of the carried wheels}" "${CKPT_SRC:?fixture folder with config.json}" "${SPARSE:?sparse_ckpt.py}"
: "${OUT:?output folder}"
ENGINE=${ENGINE:-vllm}
case $ENGINE in
  vllm) ENGINE_VERSION=${ENGINE_VERSION:-0.26.0} ;;
  sglang) ENGINE_VERSION=${ENGINE_VERSION:-0.5.17} ;;
  *) echo "ENGINE is vllm or sglang, not $ENGINE" >&2; exit 2 ;;
esac
MODEL_NAME=${MODEL_NAME:-qwen3-4b}
MAX_MODEL_LEN=${MAX_MODEL_LEN:-32768}
FRACTION=${FRACTION:-0.9}
WAIT_S=${WAIT_S:-600}
# where the image's torch venv is, and where the engine venv and the checkpoint go
IMAGE_VENV=${IMAGE_VENV:-/opt/torch/.venv}
V=${VENVS:-/opt/llmops/venvs}/$ENGINE-$ENGINE_VERSION
SITE=$V/lib/python3.12/site-packages
CKPT=${CKPT_ROOT:-/root/ckpt}/$MODEL_NAME
KEY=validate-h200-key-0123456789abcdef
URL=http://127.0.0.1:8000
ROOT=$(pwd)
mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "$1 $(( $(date +%s) - t0 )) s" | tee -a "$OUT/timings.txt"; }

if [ ! -d "$SITE/$ENGINE-$ENGINE_VERSION.dist-info" ]; then
  [ -x "$V/bin/python" ] || "$IMAGE_VENV/bin/python3" -m venv "$V"
  echo "$IMAGE_VENV/lib/python3.12/site-packages" > "$SITE/image-torch.pth"
  "$V/bin/python" -m pip install -q --no-index --no-deps --no-compile "$WHEELS"/*.whl
fi
stamp venv
[ -f "$CKPT/config.json" ] || python3 "$SPARSE" "$CKPT_SRC" "$CKPT" >/dev/null
stamp checkpoint

# The collection as Ansible finds it (the working tree is the collection's root).
mkdir -p /tmp/ac/ansible_collections/llmops
ln -sfn "$ROOT" /tmp/ac/ansible_collections/llmops/serving
export ANSIBLE_COLLECTIONS_PATH=/tmp/ac ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=0
PLAY="$V/bin/ansible-playbook -c local -i localhost, -e ansible_python_interpreter=$V/bin/python"

# The host's own stack: its image's torch with this engine over it, as a profile of its own (a copy
# of the collection's profiles plus this one; its lock lists the carried wheels).
mkdir -p /tmp/llmops-stacks/locks/h200-image
find "$WHEELS" -name '*.whl' -printf '%f\n' | sort | sed -E 's/^([^-]+)-([^-]+)-.*/\1==\2/' > "/tmp/llmops-stacks/locks/h200-image/$ENGINE-$ENGINE_VERSION.txt"
"$V/bin/python" - "$ENGINE" "$ENGINE_VERSION" <<'PY'
import sys, yaml
engine, version = sys.argv[1:3]
with open("stacks/profiles.yml") as handle:
    data = yaml.safe_load(handle)
entry = {"version": version, "lock": "h200-image/%s-%s.txt" % (engine, version), "flashinfer": None,
         "env": {}, "args": {}}
if engine == "sglang":
    entry.update({
        "torch": "2.11.0", "flashinfer": "0.6.15.post1",
        # the carried wheel without flash_ops (FA3), sm100 and infllm_ops: sm90 kernels only
        "sgl_kernel": {"package": "sglang-kernel", "version": "0.4.5", "archs": ["9.0"],
                       "source_url": "https://github.com/sgl-project/sglang/archive/refs/tags/v%s.tar.gz" % version,
                       "source_subdir": "sgl-kernel"},
        # no FA3 in the carried kernel, no prebuilt flashinfer kernels: triton attention, torch sampling
        "args": {"attention-backend": "triton", "sampling-backend": "pytorch"}})
data["serving_stack_profiles"]["h200-image"] = {
    "description": "the lent H200 host's image: torch 2.11.0+cu130, %s %s over it" % (engine, version),
    "driver_branch_min": 580, "cuda": "13.0", "python": "3.12", "torch": "2.11.0",
    "torch_index": "https://pypi.org/simple", "system_packages": [], "engines": {engine: entry}}
with open("/tmp/llmops-stacks/profiles.yml", "w") as handle:
    yaml.safe_dump(data, handle)
PY
STACK_ARGS=$("$V/bin/python" -c 'import json, sys, yaml; p = yaml.safe_load(open("/tmp/llmops-stacks/profiles.yml"))
print(json.dumps(p["serving_stack_profiles"]["h200-image"]["engines"][sys.argv[1]]["args"]))' "$ENGINE")

"$V/bin/ansible" localhost -c local -i localhost, -e "ansible_python_interpreter=$V/bin/python" \
  -m llmops.serving.engine_args -a "$(printf '{"engine": "%s", "engine_version": "%s", "python": "%s/bin/python", "validate": true, "stack_args": %s, "spec": {"model_path": "%s", "served_model_name": "%s", "host": "127.0.0.1", "port": 8000, "max_model_len": %s, "gpu_memory_fraction": %s, "max_concurrency": 256}}' \
    "$ENGINE" "$ENGINE_VERSION" "$V" "$STACK_ARGS" "$CKPT" "$MODEL_NAME" "$MAX_MODEL_LEN" "$FRACTION")" -o > "$OUT/argv.txt"
stamp engine_args
# From the module's answer: the argv, its environment (KEY=VALUE lines) with the API key's variable,
# and the SGLang launcher written into the venv's site-packages as the engine role writes it.
sed -n 's/^localhost | SUCCESS => //p' "$OUT/argv.txt" > /tmp/engine-args.json
[ -s /tmp/engine-args.json ] || { cat "$OUT/argv.txt"; exit 1; }
argv=$("$V/bin/python" -c 'import json; print(" ".join(json.load(open("/tmp/engine-args.json"))["command"]))')
mapfile -t engine_env < <("$V/bin/python" - "$SITE" "$KEY" <<'PY'
import json, os, sys
result = json.load(open("/tmp/engine-args.json"))
for name, value in sorted(result["env"].items()):
    print("%s=%s" % (name, value))
print("%s=%s" % (result["api_key_env"], sys.argv[2]))
launcher = result.get("launcher")
if launcher:
    with open(os.path.join(sys.argv[1], launcher["filename"]), "w") as handle:
        handle.write(launcher["content"])
PY
)

health() { "$V/bin/python" -c "import sys, urllib.request as u; u.urlopen(u.Request(sys.argv[1] + '/health', headers={'Authorization': 'Bearer $KEY'}), timeout=2)" "$URL" 2>/dev/null; }
# The engine's log lives outside $OUT, so that an engine reused by a later call (another $OUT, or
# an $OUT that the device tool empties before each command) is still read from where it writes.
LOG=${ENGINE_LOG:-/var/log/llmops-$ENGINE-$ENGINE_VERSION.log}
trap 'cp "$LOG" "$OUT/engine.log" 2>/dev/null || true' EXIT
if health; then
  echo "engine already answering on $URL: reused" | tee -a "$OUT/timings.txt"
  engine=
else
  echo "argv: $argv" > "$LOG"
  # shellcheck disable=SC2086
  env "${engine_env[@]}" setsid $argv >> "$LOG" 2>&1 &
  engine=$!
  for _ in $(seq "$WAIT_S"); do
    health && break
    kill -0 $engine 2>/dev/null || { tail -50 "$LOG"; exit 1; }
    sleep 1
  done
  health || { echo "engine not answering after $WAIT_S s" | tee -a "$OUT/timings.txt"; tail -30 "$LOG"; exit 1; }
fi
stamp engine_health

nvidia-smi -q -x > "$OUT/nvidia-smi-q.xml"
spec=$(printf '{"serving_hosts": "all", "serving_stack": "h200-image", "serving_stacks_file": "/tmp/llmops-stacks/profiles.yml", "serving_locks_dir": "/tmp/llmops-stacks/locks", "serving_engine": "%s", "serving_engine_version": "%s", "serving_model": {"name": "%s", "source": "%s", "lora": null}, "serving_api_key": "%s", "serving_max_model_len": %s, "serving_gpu_memory_fraction": %s, "preflight_engine_python": "%s/bin/python", "validate_engine_log_file": "%s", "validate_engine_url": "%s", "validate_model_dir": "%s", "validate_baseline_path": "%s"}' \
  "$ENGINE" "$ENGINE_VERSION" "$MODEL_NAME" "$CKPT" "$KEY" "$MAX_MODEL_LEN" "$FRACTION" "$V" "$LOG" "$URL" "$CKPT" \
  "${BASELINE:-/root/validate/baseline.json}")
# shellcheck disable=SC2086
$PLAY playbooks/validate.yml -e "$spec" > "$OUT/validate-1.txt" 2>&1 || echo "validate 1 rc $?" >> "$OUT/timings.txt"
stamp validate_1
# shellcheck disable=SC2086
$PLAY playbooks/validate.yml -e "$spec" > "$OUT/validate-2.txt" 2>&1 || echo "validate 2 rc $?" >> "$OUT/timings.txt"
stamp validate_2

if [ "$ENGINE" = vllm ]; then
  OPENAI_API_KEY=$KEY "$V/bin/vllm" bench serve --backend openai-chat --base-url "$URL" \
    --endpoint /v1/chat/completions --model "$MODEL_NAME" --tokenizer "$CKPT" --dataset-name random \
    --random-input-len 512 --random-output-len 128 --num-prompts 64 --max-concurrency 4 --seed 0 \
    --save-result --result-dir "$OUT" --result-filename peer-vllm-bench.json > "$OUT/peer-vllm-bench.txt" 2>&1 \
    || echo "vllm bench serve rc $?" >> "$OUT/timings.txt"
else
  # random-ids: random token ids (the `random` dataset downloads ShareGPT); range ratio 1: exactly
  # 512 in / 128 out, as vLLM's random dataset gives
  OPENAI_API_KEY=$KEY "$V/bin/python" -m sglang.bench_serving --backend sglang-oai-chat --base-url "$URL" \
    --model "$MODEL_NAME" --tokenizer "$CKPT" --dataset-name random-ids --random-input-len 512 \
    --random-output-len 128 --random-range-ratio 1 --num-prompts 64 --max-concurrency 4 --seed 0 \
    --output-file "$OUT/peer-sglang-bench.jsonl" > "$OUT/peer-sglang-bench.txt" 2>&1 \
    || echo "sglang.bench_serving rc $?" >> "$OUT/timings.txt"
fi
stamp peer
if [ -n "$engine" ] && [ "${KEEP_ENGINE:-0}" != 1 ]; then
  kill -- -"$engine" 2>/dev/null || kill "$engine" 2>/dev/null || true
fi
