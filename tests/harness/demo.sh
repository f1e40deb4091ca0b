#!/bin/bash
# make demo / make demo-down: a throwaway systemd host in podman, converged by playbooks/site.yml.
#   ENGINE=vllm|sglang  DEMO_PORT=18443 (the gateway, published on 127.0.0.1 only)
#   DEMO_NAME=llmops-demo (the container; `make test` proves the demo on a host of its own)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
. "$ROOT/tests/testhost/podman-env.sh"
NAME=${DEMO_NAME:-llmops-demo}
PORT=${DEMO_PORT:-18443}
ENGINE=${ENGINE:-vllm}
IMAGE=localhost/llmops-testhost-debian12:latest
D=$LLMOPS_CACHE/demo; mkdir -p "$D" "$LLMOPS_CACHE/uv" "$LLMOPS_CACHE/apt-archives/bookworm/partial"

case ${1:-up} in
down)
  podman rm -f -t 5 "$NAME" >/dev/null 2>&1 && echo "removed $NAME" || echo "no $NAME to remove"
  exit 0;;
up) ;;
*) echo "usage: $0 up|down" >&2; exit 2;;
esac

# Random keys, kept on the controller (0600) and passed as an extra-vars file, not argv: the engine's
# (only the gateway sends it) and the demo client's (what curl sends to the gateway).
umask 077
for f in engine_key client_key; do
  [ -s "$D/$f" ] || head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$D/$f"
done
printf 'serving_api_key: "%s"\ngateway_api_keys: [{name: demo, key: "%s"}]\n' \
  "$(cat "$D/engine_key")" "$(cat "$D/client_key")" > "$D/secrets.yml"
umask 022

if ! podman container exists "$NAME"; then
  podman run -d --name "$NAME" --hostname "$NAME" --systemd always --cap-add SYS_ADMIN --shm-size 2g \
    -p "127.0.0.1:$PORT:8443" \
    -v "$LLMOPS_CACHE/wheelhouse/cpu:/srv/llmops/wheelhouse:ro" \
    -v "$LLMOPS_CACHE/uv:/var/cache/llmops/uv" \
    -v "$LLMOPS_CACHE/apt-archives/bookworm:/var/cache/apt/archives" \
    "$IMAGE" /sbin/init >/dev/null
elif [ "$(podman inspect -f '{{.State.Running}}' "$NAME")" != true ]; then
  podman start "$NAME" >/dev/null
fi
for _ in $(seq 50); do
  s=$(podman exec "$NAME" systemctl is-system-running 2>/dev/null || true)
  case $s in running|degraded) break;; esac; sleep 0.2
done

start=$(date +%s)
# inventories/demo names the host llmops-demo; another container is reached as its ansible_host
ENGINE=$ENGINE ansible-playbook -i "$ROOT/inventories/demo" "$ROOT/playbooks/site.yml" -e "@$D/secrets.yml" \
  ${DEMO_NAME:+-e "ansible_host=$NAME"}
echo "converged in $(( $(date +%s) - start )) s"

cat <<EOT

The demo endpoint is up: $ENGINE behind an authenticated TLS gateway (self-signed certificate,
hence -k), model qwen3-tiny with random weights (answers are nonsense; the protocol, chat
template and token ids are real). Try:

  curl -sk https://127.0.0.1:$PORT/v1/chat/completions \\
    -H "Authorization: Bearer \$(cat $D/client_key)" -H 'Content-Type: application/json' \\
    -d '{"model": "qwen3-tiny", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16}'

Tear it down with: make demo-down
EOT
