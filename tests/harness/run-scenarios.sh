#!/usr/bin/env bash
# Runs Molecule scenarios in order and prints each one's time.
#   run-scenarios.sh default default@sglang fleet
#   BESIDE="offline nvidia" run-scenarios.sh default default@sglang fleet
# NAME runs `molecule test -s NAME`. NAME@ENGINE runs the scenario NAME again on the hosts its entry
# just before left (they are kept for it): converge with LLMOPS_ENGINE=ENGINE, which switches the
# converged hosts to that engine through site.yml, then idempotence and verify; the hosts are
# destroyed after the last entry of NAME. Sharing converged hosts this way costs one create and one
# base converge per scenario instead of one per engine. Its verify does not repeat the tests marked
# engine_independent (LLMOPS_SWITCHED_LEG=1, tests/integration/conftest.py).
# BESIDE names scenarios run one after the other in the background while the entries run: engine
# starts and Ansible's controller are mostly single-threaded, so a second scenario uses the core
# they leave idle. An entry or BESIDE name make:TARGET runs `make TARGET` instead (make test ends
# both lanes with its demo and its checks so). The output of BESIDE goes to LOG_DIR
# (default .cache/molecule-logs) and is printed when all of them have ended, after the entries.
# A scenario's hosts are removed in the background once its last entry ends (teardown): deleting a
# host's venvs is minutes of disk time and little CPU, which the next scenario need not wait for.
# The script waits for every teardown before it ends, so no host outlives the run.
# A failed entry is reported at the end; the entries of the same scenario after it are skipped.
# The converge of the entries named in VERBOSE (default: every entry of the default scenario) runs
# at -vvv, its output in LOG_DIR/ENTRY.converge.log (the tail printed here): the verify greps it for
# every key the scenario set (LLMOPS_CONVERGE_LOG, tests/integration/test_secrets.py).
# Each entry's verify writes its JUnit file to RESULTS_DIR (default .cache/test-results) as
# molecule-NAME[-ENGINE].xml, for the summary at the end of `make test`.
set -u -o pipefail

molecule=${MOLECULE:-molecule}
log_dir=${LOG_DIR:-.cache/molecule-logs}
results_dir=$(realpath -m "${RESULTS_DIR:-.cache/test-results}")
mkdir -p "$results_dir"

verbose=" ${VERBOSE:-default default@sglang} "
mkdir -p "$log_dir"

# converge ENTRY NAME: molecule converge, at -vvv into a log for the entries named in VERBOSE
converge() {
  local log
  if [[ "$verbose" == *" $1 "* ]]; then
    log=$(realpath -m "$log_dir/${1/@/-}.converge.log")
    echo "== scenario $1: converge at -vvv, output in $log (its tail below)"
    "$molecule" converge -s "$2" -- -vvv > "$log" 2>&1
    local rc=$?
    tail -n 40 "$log"
    export LLMOPS_CONVERGE_LOG=$log
    return $rc
  fi
  unset LLMOPS_CONVERGE_LOG
  "$molecule" converge -s "$2"
}

# least_free FILE: the least free disk (GB) and available memory (GiB) that sample_free wrote to FILE
# The test hosts' venvs (about 3 GB each, one per host and engine version) live on the disk of
# LLMOPS_CACHE's file system, and each engine on the CPU holds GBs of memory while both lanes run:
# each entry's line says how close it came to running out of either.
sample_free() {
  while :; do
    printf '%s %s\n' "$(df --output=avail -B1G "${LLMOPS_CACHE:-.}" | tail -n 1 | tr -d ' ')" \
      "$(awk '/^MemAvailable:/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)"
    sleep 10
  done > "$1" 2>/dev/null
}
least_free() {
  printf 'least free disk: %s GB, least available memory: %s GiB' \
    "$(sort -n -k1,1 "$1" | head -n 1 | cut -d' ' -f1)" "$(sort -g -k2,2 "$1" | head -n 1 | cut -d' ' -f2)"
}

# machine_state: what a failed entry may have run out of, for a log read after the machine is gone:
# memory, the disk of LLMOPS_CACHE, and the processes the kernel killed for memory.
machine_state() {
  echo "== machine state after the failure:"
  free -m | sed 's/^/   /'
  df -h "${LLMOPS_CACHE:-.}" | sed 's/^/   /'
  { dmesg 2>/dev/null || journalctl -k --no-pager -q 2>/dev/null; } \
    | grep -iE 'out of memory|oom-kill|killed process' | tail -n 10 | sed 's/^/   kernel: /'
}

# teardown NAME: molecule destroy -s NAME in the background, its output in LOG_DIR/NAME.destroy.log.
# A lane waits for its own teardowns at its end (wait_teardowns); a failed one is named there.
# It runs at the lowest CPU priority, and at idle disk priority where the I/O scheduler has classes
# (BFQ): while the offline hosts' venvs were deleted, the fleet's four containers took 144 s to
# start instead of 17 s.
# The networks a scenario made for its hosts beside Molecule's (llmops-NAME-*SUFFIX: the offline
# scenario's cluster network) go with them: Molecule's destroy removes only the containers.
teardowns=()
teardown() {
  { ionice -c 3 nice -n 19 "$molecule" destroy -s "$1" && remove_networks "$1"; } > "$log_dir/$1.destroy.log" 2>&1 &
  teardowns+=("$!:$1")
}
remove_networks() {
  podman network ls --format '{{.Name}}' | grep -x "llmops-$1-.*${LLMOPS_HOST_SUFFIX:-}" | xargs -r podman network rm -f
}
wait_teardowns() {
  local t
  for t in "${teardowns[@]}"; do
    wait "${t%%:*}" || echo "== teardown of ${t#*:} failed: its hosts may be left, see $log_dir/${t#*:}.destroy.log"
  done
  teardowns=()
}

# scenario_test NAME: molecule test -s NAME with its last destroy in the background (teardown);
# leftovers of an interrupted run are destroyed first, as molecule test would.
scenario_test() {
  local rc=0
  "$molecule" destroy -s "$1" || return $?
  "$molecule" test -s "$1" --destroy never || rc=$?
  teardown "$1"
  return $rc
}

junit_of() { printf -- '--junitxml=%s/molecule-%s.xml' "$results_dir" "${1/@/-}"; }
entries=("$@")
failed=()
broken=""

scenario_of() { printf '%s' "${1%%@*}"; }

run_beside() {
  local name start rc
  for name in $BESIDE; do
    start=$(date +%s)
    rc=0
    if [[ "$name" == make:* ]]; then
      "${MAKE:-make}" --no-print-directory "${name#make:}" > "$log_dir/$name.log" 2>&1 || rc=$?
    else
      PYTEST_ADDOPTS=$(junit_of "$name") scenario_test "$name" > "$log_dir/$name.log" 2>&1 || rc=$?
    fi
    [[ $rc -eq 0 ]] || machine_state >> "$log_dir/$name.log"
    echo "$name $rc $(( $(date +%s) - start ))" >> "$log_dir/beside.done"
  done
  wait_teardowns
}

report_beside() {
  local name rc seconds
  while read -r name rc seconds; do
    echo "== scenario $name (beside): output of $log_dir/$name.log"
    cat "$log_dir/$name.log"
    echo "== scenario $name (beside): $seconds s"
    if [[ $rc -ne 0 ]]; then failed+=("$name"); fi
  done < "$log_dir/beside.done"
}

beside_pid=""
if [[ -n "${BESIDE:-}" ]]; then
  mkdir -p "$log_dir"
  rm -f "$log_dir/beside.done"
  run_beside &
  beside_pid=$!
fi

for i in "${!entries[@]}"; do
  entry=${entries[$i]}
  name=$(scenario_of "$entry")
  next=${entries[$((i + 1))]:-}
  keep=false
  [[ -n "$next" && "$next" == "$name@"* ]] && keep=true
  start=$(date +%s)
  if [[ "$entry" == make:* ]]; then
    rc=0
    "${MAKE:-make}" --no-print-directory "${entry#make:}" || rc=$?
    [[ $rc -eq 0 ]] || failed+=("$entry")
    echo "== scenario $entry: $(( $(date +%s) - start )) s"
    continue
  fi
  if [[ "$broken" == "$name" ]]; then
    echo "== scenario $entry: skipped, an earlier entry of $name failed"
    failed+=("$entry")
    continue
  fi
  rc=0
  sample_free "$log_dir/free.samples" &
  sampler=$!
  PYTEST_ADDOPTS=$(junit_of "$entry")
  export PYTEST_ADDOPTS
  if [[ "$entry" == *@* ]]; then
    engine=${entry#*@}
    export LLMOPS_ENGINE=$engine LLMOPS_SWITCHED_LEG=1
    converge "$entry" "$name" || rc=$?
    for action in idempotence verify; do
      [[ $rc -eq 0 ]] || break
      "$molecule" "$action" -s "$name" || rc=$?
    done
    unset LLMOPS_ENGINE LLMOPS_SWITCHED_LEG
    if [[ $keep == false || $rc -ne 0 ]]; then
      teardown "$name"
    fi
  elif [[ $keep == true ]]; then
    # the scenario's sequence without its last destroy (the hosts are kept for the next entry);
    # leftovers of an interrupted run go first
    for action in destroy create prepare converge idempotence verify; do
      if [[ $action == converge ]]; then converge "$entry" "$name" || rc=$?; else "$molecule" "$action" -s "$name" || rc=$?; fi
      [[ $rc -eq 0 ]] || break
    done
    if [[ $rc -ne 0 ]]; then
      teardown "$name"
    fi
  else
    scenario_test "$name" || rc=$?
  fi
  if [[ $rc -ne 0 ]]; then
    failed+=("$entry")
    broken=$name
    machine_state
  fi
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  echo "== scenario $entry: $(( $(date +%s) - start )) s ($(least_free "$log_dir/free.samples"))"
done

wait_teardowns
if [[ -n "$beside_pid" ]]; then
  echo "== waiting for the scenarios beside ($BESIDE)"
  wait "$beside_pid"
  report_beside
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "== failed scenarios: ${failed[*]}"
  machine_state
  exit 1
fi
