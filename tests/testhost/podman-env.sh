#!/bin/bash
# Sourced by every harness script: points podman at the project's own containers.conf instead of
# editing /etc/containers. This VM needs runc (crun rejects its hybrid cgroup layout) and ulimits
# no higher than root's hard limits (root lacks CAP_SYS_RESOURCE here).
: "${LLMOPS_CACHE:=${HOME}/.cache/llmops-serving}"
export LLMOPS_CACHE
mkdir -p "$LLMOPS_CACHE"
export CONTAINERS_CONF="$LLMOPS_CACHE/containers.conf"
if [ ! -s "$CONTAINERS_CONF" ]; then
  hn=$(ulimit -Hn); [ "$hn" = unlimited ] && hn=1048576
  cat > "$CONTAINERS_CONF" <<EOC
[containers]
default_ulimits = ["nofile=$hn:$hn", "nproc=32768:32768"]
[engine]
runtime = "runc"
EOC
fi
