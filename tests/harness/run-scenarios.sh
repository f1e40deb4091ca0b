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
# BESIDE names scenarios run one after the other in the background while the first entries run:
# engine starts and Ansible's controller are mostly single-threaded, so a second scenario uses the
# core they leave idle. Their output goes to LOG_DIR (default .cache/molecule-logs) and is printed
# when they end; the background must be done before the last entry starts, which runs alone.
# A failed entry is reported at the end; the entries of the same scenario after it are skipped.
# Each entry's verify writes its JUnit file to RESULTS_DIR (default .cache/test-results) as
# molecule-NAME[-ENGINE].xml, for the summary at the end of `make test`.
set -u -o pipefail

molecule=${MOLECULE:-molecule}
log_dir=${LOG_DIR:-.cache/molecule-logs}
results_dir=$(realpath -m "${RESULTS_DIR:-.cache/test-results}")
mkdir -p "$results_dir"

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
    PYTEST_ADDOPTS=$(junit_of "$name") "$molecule" test -s "$name" > "$log_dir/$name.log" 2>&1 || rc=$?
    echo "$name $rc $(( $(date +%s) - start ))" >> "$log_dir/beside.done"
  done
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

last=$(( ${#entries[@]} - 1 ))
for i in "${!entries[@]}"; do
  entry=${entries[$i]}
  name=$(scenario_of "$entry")
  next=${entries[$((i + 1))]:-}
  keep=false
  [[ -n "$next" && "$next" == "$name@"* ]] && keep=true
  if [[ -n "$beside_pid" && $i -eq $last ]]; then
    echo "== waiting for the scenarios beside ($BESIDE) before $entry"
    wait "$beside_pid"
    beside_pid=""
    report_beside
  fi
  start=$(date +%s)
  if [[ "$broken" == "$name" ]]; then
    echo "== scenario $entry: skipped, an earlier entry of $name failed"
    failed+=("$entry")
    continue
  fi
  rc=0
  PYTEST_ADDOPTS=$(junit_of "$entry")
  export PYTEST_ADDOPTS
  if [[ "$entry" == *@* ]]; then
    engine=${entry#*@}
    for action in converge idempotence verify; do
      LLMOPS_ENGINE=$engine LLMOPS_SWITCHED_LEG=1 "$molecule" "$action" -s "$name" || { rc=$?; break; }
    done
    if [[ $keep == false || $rc -ne 0 ]]; then
      "$molecule" destroy -s "$name" || true
    fi
  elif [[ $keep == true ]]; then
    # --destroy never skips the sequence's first destroy too: leftovers of an interrupted run go here
    "$molecule" destroy -s "$name" && "$molecule" test -s "$name" --destroy never || rc=$?
    if [[ $rc -ne 0 ]]; then
      "$molecule" destroy -s "$name" || true
    fi
  else
    "$molecule" test -s "$name" || rc=$?
  fi
  if [[ $rc -ne 0 ]]; then
    failed+=("$entry")
    broken=$name
  fi
  echo "== scenario $entry: $(( $(date +%s) - start )) s"
done

if [[ -n "$beside_pid" ]]; then
  wait "$beside_pid"
  report_beside
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "== failed scenarios: ${failed[*]}"
  exit 1
fi
