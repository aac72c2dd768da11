#!/bin/sh
# The probe of cf09f0d (base e97a7a5), 9567fd9+newidle (base cf09f0d), and the clock trim:
#   tools/vm/wakelab-vm run --clock icount --append tsc=reliable --binary NEW/scx_wakelab \
#     --copy BASE/scx_wakelab_base --copy builds.sh -- "sh /wl/builds.sh"
# Alternating builds in one boot: /wl/scx_wakelab_base (before) and scx_wakelab (after).
qperf >/dev/null 2>&1 &
perf bench sched pipe -l 2000 >/dev/null
latctx() { ENOUGH=5000 TIMING_O=0 LOOP_O=0 /opt/lmbench/bin/lat_ctx -P 8 -W 0 -N 1 -s 0 2 2>&1 | sed -n "s/^2 \([0-9.]*\)$/\1/p" | tail -n 1; }
pipe() { perf bench sched pipe -l 5000 | awk '/usecs\/op/{print $1}'; }
qp() { qperf -t 2 127.0.0.1 tcp_lat | awk '/latency/{print $3}'; }
echo "RES eevdf pipe $(pipe) $(pipe) qperf $(qp) lat_ctx $(latctx)"
for round in 1 2; do
  for b in base new; do
    if [ $b = base ]; then /wl/scx_wakelab_base $ARGS > /tmp/wl.log 2>&1 & W=$!
    else scx_wakelab $ARGS > /tmp/wl.log 2>&1 & W=$!; fi
    sleep 3
    perf bench sched pipe -l 1000 >/dev/null
    r="$(pipe) $(pipe) $(pipe)"; q=$(qp); l=$(latctx)
    echo "RES $b pipe $r qperf $q lat_ctx $l"
    echo "STATS $b $(scx_wakelab stats --json 2>/dev/null | tr -d '\n')"
    kill -INT $W; wait $W
  done
done
echo "RES eevdf pipe $(pipe) $(pipe) qperf $(qp) lat_ctx $(latctx)"
