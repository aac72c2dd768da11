#!/bin/sh
# Where do cyclictest's 1 s wake-ups come from? cyclictest beside scx_wakelab,
# counters before and after, and the max latency per thread.
# Run: tools/vm/wakelab-vm run --clock mt --bin /usr/bin/cyclictest --copy cyclictest-stalls.sh -- 'sh /wl/cyclictest-stalls.sh'
# (2026-12-04 at b6e9135; output in cyclictest-stalls.out)
scx_wakelab >/tmp/wl.log 2>&1 &
W=$!
i=0; until scx_wakelab stats --json >/dev/null 2>&1 || [ $i -ge 100 ]; do sleep 0.2; i=$((i+1)); done
c() { scx_wakelab stats --json 2>/dev/null | tr ',' '\n' | grep -E '"(nr_decisions|nr_stall_rescues|nr_agent_stall_fallbacks|nr_ring_full_fallbacks|nr_stale_decisions|nr_bounced_decisions|nr_decisions_task_gone|apply_retries|nr_agent_dispatches|nr_direct_dispatches|nr_queued_to_agent|nr_enqueue_without_select)"' | tr '\n' ' '; echo; }
echo "BEFORE $(c)"
cyclictest -q -t 4 -i 4000 -d 0 -D 20 -h 1000 >/tmp/cyc.out 2>&1
echo "AFTER  $(c)"
grep -E "^T:|# Max Latencies|# Histogram Overflows|# Total" /tmp/cyc.out
echo "=== alone: cyclictest under EEVDF"
kill -INT $W; wait $W
cyclictest -q -t 4 -i 4000 -d 0 -D 20 >/tmp/cyc2.out 2>&1
grep -E "^T:" /tmp/cyc2.out
