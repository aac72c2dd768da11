#!/bin/sh
# Live decisions replay offline (issue 4): run scx_wakelab with --trace while
# a workload runs, then replay every recorded decision through `explain`.
. ./lib.sh

for preset in mainline v5.10; do
    scx_wakelab --preset "$preset" --trace /tmp/trace-$preset.jsonl >/tmp/replay-$preset.log 2>&1 &
    S=$!
    if ! wait_state enabled 120; then fail "replay_${preset}_loaded" "state $(sched_state)"; kill $S; continue; fi
    hackbench -p -g 2 -l 100 >/dev/null
    perf bench sched pipe -l 1000 >/dev/null
    kill -INT $S; wait $S
    N=$(wc -l < /tmp/trace-$preset.jsonl)
    # Engine decisions only: delayed sleepers requeued in place are not traced.
    if [ "$N" -ge 200 ]; then pass "replay_${preset}_trace_recorded"; else fail "replay_${preset}_trace_recorded" "$N records"; fi
    # The loads the engine decided on are the state estimator's PELT averages
    # (bpf/estimator.bpf.c), not runnable tasks x 1024: most non-zero ones are
    # off a multiple of 1024, as a decayed average is.
    set -- $(grep -o '"load":[0-9]*' /tmp/trace-$preset.jsonl | cut -d: -f2 |
        awk '$1 > 0 { n++; if ($1 % 1024) off++ } END { printf "%d %d", n, off }')
    if [ "${1:-0}" -ge 100 ] && [ $(( ${2:-0} * 2 )) -gt "${1:-0}" ]; then
        pass "replay_${preset}_loads_are_estimated"
    else fail "replay_${preset}_loads_are_estimated" "${2:-0} of ${1:-0} non-zero loads off a multiple of 1024"; fi
    scx_wakelab explain --trace /tmp/trace-$preset.jsonl >/tmp/explain-$preset.out 2>&1
    RC=$?
    if [ $RC -eq 0 ]; then pass "replay_${preset}_same_cpus"
    else fail "replay_${preset}_same_cpus" "rc=$RC $(tail -n 3 /tmp/explain-$preset.out | tr '\n' ' ')"; fi
    echo "--- explain --trace ($preset):"; tail -n 3 /tmp/explain-$preset.out
    grep -o '"trace_dropped":[0-9]*' /tmp/replay-$preset.log | tail -n 1
done
