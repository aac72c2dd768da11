#!/bin/sh
# Two builds of scx_wakelab alternated in one boot (A = /wl/scx_wakelab-a, B = the
# installed one), three rounds in A B B A A B order, EEVDF first and last: sched pipe and
# qperf tcp_lat per load, with the agent's CPU time and decisions from stats.
#   tools/vm/wakelab-vm run --binary B/scx_wakelab --clock icount --append tsc=reliable \
#     --copy A/scx_wakelab:scx_wakelab-a --copy ab.sh -- "sh /wl/ab.sh"
qperf >/dev/null 2>&1 &
eevdf() {
    echo "EEVDF $(perf bench sched pipe -l 5000 | awk '/usecs\/op/{print $1}') $(qperf -t 2 127.0.0.1 tcp_lat | awk '/latency/{print $3 $4}')"
}
one() { # tag binary
    $2 > /tmp/wl.log 2>&1 & W=$!
    sleep 3
    perf bench sched pipe -l 1000 >/dev/null
    p1=$(perf bench sched pipe -l 5000 | awk '/usecs\/op/{print $1}')
    p2=$(perf bench sched pipe -l 5000 | awk '/usecs\/op/{print $1}')
    q=$(qperf -t 2 127.0.0.1 tcp_lat | awk '/latency/{print $3 $4}')
    s=$($2 stats | grep -E "agent:|^decisions|cpu per 1000" | tr '\n' ' ')
    kill -INT $W; wait $W
    echo "LOAD $1 pipe $p1 $p2 qperf $q | $s"
}
perf bench sched pipe -l 2000 >/dev/null
eevdf
for r in 1 2 3; do
    if [ $((r % 2)) = 1 ]; then one A-$r /wl/scx_wakelab-a; one B-$r scx_wakelab
    else one B-$r scx_wakelab; one A-$r /wl/scx_wakelab-a; fi
done
eevdf
