#!/usr/bin/env bash
# Runs ENGINE=sglang bench/gpu/h200-validate.sh (validate twice a call) in pairs on the lent H200 host:
# pair 1 starts the engine (KEEP_ENGINE=1), later pairs reuse it. The peer (sglang.bench_serving) is
# skipped: the script's process group is ended once validate_2 is stamped. Marks go into the engine
# log before each validate run so the prefill lines can be told apart. Usage: drive.sh DEADLINE_S OUTDIR
set -u
DEADLINE=${1:-520}; RES=${2:-/root/out}
LOG=/var/log/llmops-sglang-0.5.17.log
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
mark() { echo "=== LLMOPS-MARK $* $(date -u +%FT%TZ) ===" >> "$LOG"; echo "mark $* at $(el) s $(date -u +%T)"; }
echo "drive start $(date -u +%FT%TZ)"
for i in 1 2 3 4 5 6; do
  if [ "$i" -gt 1 ] && [ "$(el)" -gt $(( DEADLINE - 75 )) ]; then echo "no time for pair $i"; break; fi
  d=/root/run$i; mkdir -p "$d"
  ENGINE=sglang WHEELS=/root/wheels CKPT_SRC=tests/fixtures/qwen/Qwen3-4B SPARSE=.gpu/sparse_ckpt.py OUT=$d KEEP_ENGINE=1 \
    setsid bench/gpu/h200-validate.sh > "$d/script.out" 2>&1 &
  p=$!; m1=; m2=
  while kill -0 "$p" 2>/dev/null; do
    if [ -z "$m1" ] && grep -q '^engine_health ' "$d/timings.txt" 2>/dev/null; then mark "validate $((2*i-1)) (call pair $i, validate-1) starts"; m1=1; fi
    if [ -z "$m2" ] && grep -q '^validate_1 ' "$d/timings.txt" 2>/dev/null; then
      cp /var/lib/llmops-bench/validate.json "$d/loadgen-1.json" 2>/dev/null; mark "validate $((2*i)) (call pair $i, validate-2) starts"; m2=1; fi
    if grep -q '^validate_2 ' "$d/timings.txt" 2>/dev/null; then
      cp /var/lib/llmops-bench/validate.json "$d/loadgen-2.json" 2>/dev/null; mark "validate $((2*i)) ended (peer skipped)"
      kill -- -"$p" 2>/dev/null; break; fi
    if [ "$(el)" -gt "$DEADLINE" ]; then mark "deadline, pair $i stopped"; kill -- -"$p" 2>/dev/null; break; fi
    sleep 0.2
  done
  wait "$p" 2>/dev/null
  echo "== pair $i at $(el) s"; cat "$d/timings.txt" 2>/dev/null
  grep -ho '"benchmark[^"]*"\|failed=[0-9]*' "$d"/validate-*.txt 2>/dev/null
  grep -q '^engine_health ' "$d/timings.txt" 2>/dev/null || { tail -40 "$d/script.out"; break; }
done
cp "$LOG" /root/engine.log
(cd /root && tar czf "$RES/runs.tgz" engine.log run[0-9]*)
echo "drive end at $(el) s"
