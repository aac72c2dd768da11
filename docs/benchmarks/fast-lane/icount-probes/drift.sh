#!/bin/sh
# Does sched pipe slow down run after run under one load of scx_wakelab, and does a
# restart reset it? EEVDF before, between and after; per run the agent's CPU time and the
# scheduler's counters (stats --json, diffed on the host by drift-summary.py).
#   tools/vm/wakelab-vm run --binary BUILD/scx_wakelab --clock icount --append tsc=reliable \
#     --copy drift.sh -- "sh /wl/drift.sh"
run() { # tag
    a=$(awk '/^ctxt/{print $2}' /proc/stat)
    t=$(perf bench sched pipe -l 5000 | awk '/usecs\/op/{print $1}')
    b=$(awk '/^ctxt/{print $2}' /proc/stat)
    cpu=""
    [ -n "${W:-}" ] && cpu=$(awk '{print $14 + $15}' /proc/$W/stat)
    echo "RUN $1 usecs_op=$t ctxt=$((b - a)) agent_ticks=$cpu"
    if [ -n "${W:-}" ]; then
        echo "STATS-BEGIN $1"; scx_wakelab stats --json; echo; echo "STATS-END $1"
    fi
}
perf bench sched pipe -l 2000 >/dev/null
W=
run eevdf-a1; run eevdf-a2
for load in 1 2; do
    scx_wakelab > /tmp/wl.$load.log 2>&1 & W=$!
    sleep 3
    perf bench sched pipe -l 1000 >/dev/null
    for i in 1 2 3 4 5 6; do run load$load-$i; done
    kill -INT $W; wait $W; W=
    run eevdf-after$load
done
