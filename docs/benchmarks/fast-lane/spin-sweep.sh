#!/bin/sh
# The --agent-spin-us sweep of docs/benchmarks/fast-lane.md (guest side). For each setting
# in CFGS ('|'-separated: 'eevdf', scx_wakelab's arguments, or 'before ARGS' for a second build
# copied to /wl/before) it loads scx_wakelab, runs
# sched pipe, lat_ctx, qperf tcp_lat and hackbench once, and prints per benchmark the
# context switches (/proc/stat ctxt) and `scx_wakelab stats --json` before and after.
# Run (2026-12-03, the build of f12a569):
#   tools/vm/wakelab-vm run --clock icount --copy docs/benchmarks/fast-lane/spin-sweep.sh:bench.sh \
#     --env 'CFGS=eevdf|--agent-spin-us 0|--agent-spin-us 20|--agent-spin-us 50|--agent-spin-us 100|--agent-spin-us 200|--agent-spin-us 500' \
#     -- 'sh ./bench.sh'
# That boot lacked --append tsc=reliable: its times are not comparable (EEVDF sched pipe
# 82 us/op against 18 in the lab); its counts are.
B=scx_wakelab
start() {
  B=scx_wakelab; [ "$1" = before ] && { B=/wl/before/scx_wakelab; shift; }
  $B "$@" >/tmp/s.log 2>&1 &
  P=$!
  i=0; while [ "$(cat /sys/kernel/sched_ext/state)" != enabled ] && [ $i -lt 100 ] && kill -0 $P 2>/dev/null; do sleep 0.2; i=$((i+1)); done
  [ "$(cat /sys/kernel/sched_ext/state)" = enabled ] || { echo NOT LOADED; tail -5 /tmp/s.log; return 1; }
  i=0; until $B stats --json >/dev/null 2>&1 || [ $i -ge 50 ]; do sleep 0.2; i=$((i+1)); done
}
stop() { kill -INT $P; wait $P; echo "exit $?"; grep -iE "warn|error" /tmp/s.log | head -3; }
m() { # NAME CMD...
  n=$1; shift
  $B stats --json > /tmp/a.json 2>/dev/null
  c0=$(awk '/^ctxt/ {print $2}' /proc/stat)
  "$@" > /tmp/o 2>&1
  c1=$(awk '/^ctxt/ {print $2}' /proc/stat)
  $B stats --json > /tmp/b.json 2>/dev/null
  echo "BENCH $n ctxt=$((c1-c0)) out=$(grep -E 'usecs/op|latency|Time|^2 ' /tmp/o | tail -1 | tr -s ' ' | tr ' ' '_')"
  echo "JSONA $n $(cat /tmp/a.json)"
  echo "JSONB $n $(cat /tmp/b.json)"
}
# warm-up under EEVDF: first exec, page cache
perf bench sched pipe -l 1000 >/dev/null 2>&1
ENOUGH=1000 /opt/lmbench/bin/lat_ctx -P 8 -W 0 -N 1 -s 0 2 >/dev/null 2>&1
hackbench -g 1 -l 10 >/dev/null 2>&1
PL=${PL:-5000}
IFS='|'
for cfg in $CFGS; do
  IFS=' '
  echo "=== CFG $cfg"
  if [ "$cfg" = eevdf ]; then P=""; else start $cfg || continue; grep -o "decisions by.*" /tmp/s.log; fi
  m pipe perf bench sched pipe -l $PL
  [ -n "$PIPEONLY" ] && { m pipe2 perf bench sched pipe -l $PL; [ -n "$P" ] && stop; IFS='|'; continue; }
  m latctx env ENOUGH=5000 TIMING_O=0 LOOP_O=0 /opt/lmbench/bin/lat_ctx -P 8 -W 0 -N 1 -s 0 2
  qperf >/dev/null 2>&1 & Q=$!; sleep 0.3
  m qperf qperf -t 1 127.0.0.1 tcp_lat
  kill $Q; wait $Q 2>/dev/null
  m hackbench hackbench -g 4 -l 100
  [ -n "$P" ] && stop
  IFS='|'
done
