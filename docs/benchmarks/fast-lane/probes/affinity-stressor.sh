#!/bin/sh
# Run: tools/vm/wakelab-vm run --clock mt --copy affinity-stressor.sh -- 'sh /wl/affinity-stressor.sh'
# (2026-12-04; output in affinity-stressor.out)
# stress-ng's affinity stressor (tasks that move between single CPUs) beside CPU hogs,
# under scx_wakelab: no ejection, and how often a fallback task had to go first.
scx_wakelab >/tmp/wl.log 2>&1 &
W=$!
i=0; until [ "$(cat /sys/kernel/sched_ext/state)" = enabled ] || [ $i -ge 600 ]; do sleep 0.1; i=$((i+1)); done
i=0; until scx_wakelab stats --json >/dev/null 2>&1 || [ $i -ge 100 ]; do sleep 0.2; i=$((i+1)); done
echo "loaded: state $(cat /sys/kernel/sched_ext/state)"
stress-ng -t 30 --affinity 8 -c 8 -f 4 --metrics-brief >/tmp/st.log 2>&1
echo "stress-ng exit $?: $(grep -oE '(un)?successful run completed' /tmp/st.log)"
echo "state $(cat /sys/kernel/sched_ext/state)"
scx_wakelab stats --json | tr ',' '\n' | grep -E '"(nr_fallback_starving|nr_stall_rescues|nr_agent_stall_fallbacks|nr_ring_full_fallbacks|nr_decisions)"' | tr '\n' ' '; echo
dmesg | grep -E "sched_ext|stall" | tail -n 5
kill -INT $W; wait $W; echo "scx_wakelab exit $?"
