#!/bin/sh
# What runs for long under scx_wakelab during sched pipe: every task run longer than 1 ms
# (sched_switch on all CPUs), and the agent's own runs and gaps, for two runs in one load.
#   tools/vm/wakelab-vm run --binary BUILD/scx_wakelab --clock icount --append tsc=reliable \
#     --copy agent-gaps.sh -- "sh /wl/agent-gaps.sh"
scx_wakelab > /tmp/wl.log 2>&1 & W=$!
sleep 3
perf bench sched pipe -l 1000 >/dev/null
for i in 1 2; do
    perf record -q -e sched:sched_switch -a -o /tmp/p.data -- perf bench sched pipe -l 5000 2>&1 | grep usecs/op
    echo "== run $i: task runs over 1 ms (cpu, start s, ms, comm, pid, state at switch-out)"
    perf script -i /tmp/p.data -F cpu,time,trace 2>/dev/null | awk '
    {
        cpu = $1; gsub(/[\[\]]/, "", cpu); t = $2; sub(/:$/, "", t)
        pc = ""; pp = ""; ps = ""; nc = ""; np = ""
        for (i = 3; i <= NF; i++) {
            if ($i ~ /^prev_comm=/) pc = substr($i, 11)
            else if ($i ~ /^prev_pid=/) pp = substr($i, 10)
            else if ($i ~ /^prev_state=/) ps = substr($i, 12)
            else if ($i ~ /^next_comm=/) nc = substr($i, 11)
            else if ($i ~ /^next_pid=/) np = substr($i, 10)
        }
        if ((cpu in since) && pp != 0 && (t - since[cpu]) > 0.001)
            printf "RUN cpu%s %.6f %.2f %s %s %s\n", cpu, since[cpu], (t - since[cpu]) * 1000, pc, pp, ps
        since[cpu] = t
        if (pc == "scx_wakelab") { out[pp] = t }
        if (nc == "scx_wakelab" && (np in out) && (t - out[np]) > 0.001)
            printf "AGENT-GAP cpu%s %.6f %.2f ms off cpu\n", cpu, out[np], (t - out[np]) * 1000
    }' | sort -t' ' -k4 -rn | head -40
done
scx_wakelab stats | grep -E "hops|agent:|bpf:"
kill -INT $W; wait $W
