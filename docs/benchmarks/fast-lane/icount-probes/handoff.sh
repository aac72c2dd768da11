#!/bin/sh
# The handoff (wake-ups sent from ops.select_cpu(), decisions taken by ops.enqueue()
# from memory) on and off, and optionally an older build, alternating in one boot:
# sched pipe, qperf tcp_lat and the lab's lat_ctx, each followed by the scheduler's
# counters so far (stats --json).
#   tools/vm/wakelab-vm run --binary BUILD/scx_wakelab --clock icount --append tsc=reliable \
#     [--copy OLD_BUILD/scx_wakelab_base] --copy handoff.sh -- "sh /wl/handoff.sh"
qperf >/dev/null 2>&1 &
perf bench sched pipe -l 2000 >/dev/null
latctx() { ENOUGH=5000 TIMING_O=0 LOOP_O=0 /opt/lmbench/bin/lat_ctx -P 8 -W 0 -N 1 -s 0 2 2>&1 | sed -n "s/^2 \([0-9.]*\)$/\1/p" | tail -n 1; }
pipe() { perf bench sched pipe -l 5000 | awk '/usecs\/op/{print $1}'; }
stats() { echo "STATS $1 $(scx_wakelab stats --json)"; }
echo "EEVDF pipe $(pipe) qperf $(qperf -t 2 127.0.0.1 tcp_lat | awk '/latency/{print $3}') lat_ctx $(latctx)"
settings="true false"
[ -x /wl/scx_wakelab_base ] && settings="base true false"
for round in 1 2; do
  for s in $settings; do
    if [ $s = base ]; then /wl/scx_wakelab_base > /tmp/wl.log 2>&1 & W=$!
    else scx_wakelab --agent-handoff $s > /tmp/wl.log 2>&1 & W=$!; fi
    sleep 3
    perf bench sched pipe -l 1000 >/dev/null
    r="$(pipe) $(pipe) $(pipe)"; stats pipe
    q=$(qperf -t 2 127.0.0.1 tcp_lat | awk '/latency/{print $3}'); stats qperf
    l=$(latctx); stats lat_ctx
    echo "HANDOFF $s pipe $r qperf $q lat_ctx $l"
    kill -INT $W; wait $W
  done
done
echo "EEVDF pipe $(pipe) qperf $(qperf -t 2 127.0.0.1 tcp_lat | awk '/latency/{print $3}') lat_ctx $(latctx)"
