#!/usr/bin/env bash
# validate.yml proven on a GPU host where the engine is not a systemd unit (the lent H200 machine:
# no systemd, no network). Run from the collection's root on that host, as root:
#   WHEELS=/root/wheels CKPT_SRC=tests/fixtures/qwen/Qwen3-4B SPARSE=<sparse_ckpt.py> OUT=<dir> \
#     bench/gpu/h200-validate.sh
# Steps, all with the collection's own code:
#  1. a vLLM venv over the host's torch from the carried wheels (shared GPU recipe, section 1);
#  2. a checkpoint with exact headers and zero data (sparse_ckpt.py) from the fixture's config;
#  3. the engine argv from llmops.serving.engine_args (validated by vLLM's own parser), started by hand
#     with its log in a file;
#  4. validate.yml twice (log file + URL): the first run records the benchmark baseline, the second
#     compares with it; GPU health from the real nvidia-smi;
#  5. `vllm bench serve` as the peer client on the same server.
# The argv has --max-num-seqs 256, serving_max_concurrency's default, as the engine role renders it
# (the plan validate makes reads that setting; the recorded run of 2026-12-02 predates this and ran
# with vLLM's 1024). What lands in $OUT: the engine log, both validate runs, nvidia-smi -q -x, the peer's result, a
# timings file.
set -euo pipefail
: "${WHEELS:?folder of the carried wheels}" "${CKPT_SRC:?fixture folder with config.json}" "${SPARSE:?sparse_ckpt.py}"
: "${OUT:?output folder}"
ENGINE_VERSION=${ENGINE_VERSION:-0.26.0}
MODEL_NAME=${MODEL_NAME:-qwen3-4b}
MAX_MODEL_LEN=${MAX_MODEL_LEN:-32768}
FRACTION=${FRACTION:-0.9}
V=/opt/llmops/venvs/vllm-$ENGINE_VERSION
CKPT=/root/ckpt/$MODEL_NAME
KEY=validate-h200-key-0123456789abcdef
ROOT=$(pwd)
t0=$(date +%s)
stamp() { echo "$1 $(( $(date +%s) - t0 )) s" | tee -a "$OUT/timings.txt"; }

if [ ! -x "$V/bin/vllm" ]; then
  /opt/torch/.venv/bin/python3 -m venv "$V"
  echo /opt/torch/.venv/lib/python3.12/site-packages > "$V/lib/python3.12/site-packages/image-torch.pth"
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

"$V/bin/ansible" localhost -c local -i localhost, -e "ansible_python_interpreter=$V/bin/python" \
  -m llmops.serving.engine_args -a "$(printf '{"engine": "vllm", "engine_version": "%s", "python": "%s/bin/python", "validate": true, "spec": {"model_path": "%s", "served_model_name": "%s", "host": "127.0.0.1", "port": 8000, "max_model_len": %s, "gpu_memory_fraction": %s, "max_concurrency": 256}}' \
    "$ENGINE_VERSION" "$V" "$CKPT" "$MODEL_NAME" "$MAX_MODEL_LEN" "$FRACTION")" -o > "$OUT/argv.txt"
stamp engine_args
argv=$(sed -n 's/^localhost | SUCCESS => //p' "$OUT/argv.txt" | "$V/bin/python" -c 'import json,sys; print(" ".join(json.load(sys.stdin)["command"]))')
[ -n "$argv" ] || { cat "$OUT/argv.txt"; exit 1; }
echo "argv: $argv" > "$OUT/engine.log"
# shellcheck disable=SC2086
VLLM_API_KEY=$KEY setsid $argv >> "$OUT/engine.log" 2>&1 &
engine=$!
for _ in $(seq 600); do
  "$V/bin/python" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/health', timeout=2)" 2>/dev/null && break
  kill -0 $engine 2>/dev/null || { tail -50 "$OUT/engine.log"; exit 1; }
  sleep 1
done
stamp engine_health

nvidia-smi -q -x > "$OUT/nvidia-smi-q.xml"
# The host's own stack: its image's torch with this vLLM over it, as a profile of its own (a copy of
# the collection's profiles plus this one; its lock lists the carried wheels).
mkdir -p /tmp/llmops-stacks/locks/h200-image
find "$WHEELS" -name '*.whl' -printf '%f\n' | sort | sed -E 's/^([^-]+)-([^-]+)-.*/\1==\2/' > "/tmp/llmops-stacks/locks/h200-image/vllm-$ENGINE_VERSION.txt"
"$V/bin/python" - "$ENGINE_VERSION" <<'PY'
import sys, yaml
with open("stacks/profiles.yml") as handle:
    data = yaml.safe_load(handle)
data["serving_stack_profiles"]["h200-image"] = {
    "description": "the lent H200 host's image: torch 2.11.0+cu130, vLLM %s over it" % sys.argv[1],
    "driver_branch_min": 580, "cuda": "13.0", "python": "3.12", "torch": "2.11.0",
    "torch_index": "https://pypi.org/simple", "system_packages": [],
    "engines": {"vllm": {"version": sys.argv[1], "lock": "h200-image/vllm-%s.txt" % sys.argv[1],
                         "flashinfer": None, "env": {}, "args": {}}}}
with open("/tmp/llmops-stacks/profiles.yml", "w") as handle:
    yaml.safe_dump(data, handle)
PY
spec=$(printf '{"serving_hosts": "all", "serving_stack": "h200-image", "serving_stacks_file": "/tmp/llmops-stacks/profiles.yml", "serving_locks_dir": "/tmp/llmops-stacks/locks", "serving_engine": "vllm", "serving_engine_version": "%s", "serving_model": {"name": "%s", "source": "%s", "lora": null}, "serving_api_key": "%s", "serving_max_model_len": %s, "serving_gpu_memory_fraction": %s, "preflight_engine_python": "%s/bin/python", "validate_engine_log_file": "%s/engine.log", "validate_engine_url": "http://127.0.0.1:8000", "validate_model_dir": "%s", "validate_baseline_path": "/root/validate/baseline.json"}' \
  "$ENGINE_VERSION" "$MODEL_NAME" "$CKPT" "$KEY" "$MAX_MODEL_LEN" "$FRACTION" "$V" "$OUT" "$CKPT")
# shellcheck disable=SC2086
$PLAY playbooks/validate.yml -e "$spec" > "$OUT/validate-1.txt" 2>&1 || echo "validate 1 rc $?" >> "$OUT/timings.txt"
stamp validate_1
# shellcheck disable=SC2086
$PLAY playbooks/validate.yml -e "$spec" > "$OUT/validate-2.txt" 2>&1 || echo "validate 2 rc $?" >> "$OUT/timings.txt"
stamp validate_2

OPENAI_API_KEY=$KEY "$V/bin/vllm" bench serve --backend openai-chat --base-url http://127.0.0.1:8000 \
  --endpoint /v1/chat/completions --model "$MODEL_NAME" --tokenizer "$CKPT" --dataset-name random \
  --random-input-len 512 --random-output-len 128 --num-prompts 64 --max-concurrency 4 --seed 0 \
  --save-result --result-dir "$OUT" --result-filename peer-vllm-bench.json > "$OUT/peer-vllm-bench.txt" 2>&1 \
  || echo "vllm bench serve rc $?" >> "$OUT/timings.txt"
stamp peer
kill $engine 2>/dev/null || true
