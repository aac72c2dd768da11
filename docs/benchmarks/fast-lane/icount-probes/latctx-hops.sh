#!/bin/sh
# Where lat_ctx's time goes under scx_wakelab: the lab's lat_ctx (8 rings of 2 processes)
# three times under one load, the scheduler's counters after each (drift-summary.py reads
# this output as it reads drift.sh's).
#   tools/vm/wakelab-vm run --binary BUILD/scx_wakelab --clock icount --append tsc=reliable \
#     --copy latctx-hops.sh -- "sh /wl/latctx-hops.sh"
LMB=${LMB:-/opt/lmbench/bin}
lat() { ENOUGH=5000 "$LMB/lat_ctx" -P 8 -s 0 -N 1 -W 0 2 2>&1 | awk '{v=$2} END{print v}'; }
echo "RUN eevdf-1 usecs_op=$(lat) ctxt= agent_ticks="
scx_wakelab > /tmp/wl.log 2>&1 & W=$!
sleep 3
for i in 1 2 3; do
    echo "RUN load1-$i usecs_op=$(lat) ctxt= agent_ticks=$(awk '{print $14 + $15}' /proc/$W/stat)"
    echo "STATS-BEGIN load1-$i"; scx_wakelab stats --json; echo; echo "STATS-END load1-$i"
done
kill -INT $W; wait $W
