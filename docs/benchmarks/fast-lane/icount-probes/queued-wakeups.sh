#!/bin/sh
# sched pipe and qperf tcp_lat under scx_wakelab with and without SCX_OPS_ALLOW_QUEUED_WAKEUP,
# polling 50 us and 0, interrupt and context-switch counts around each run. Needs a build
# where agent.rs sets ALLOW_QUEUED_WAKEUP only when WL_QW is set (an experiment, not kept):
#   tools/vm/wakelab-vm run --binary THAT_BUILD --clock icount --append tsc=reliable \
#     --copy queued-wakeups.sh -- "sh /wl/queued-wakeups.sh"
irq() { awk '/RES:|IWI:|CAL:/{s=0; for(i=2;i<=9;i++) s+=$i; printf "%s%d ", $1, s}' /proc/interrupts; awk '/^ctxt/{printf "ctxt:%d", $2}' /proc/stat; echo; }
qperf >/dev/null 2>&1 &
perf bench sched pipe -l 2000 >/dev/null
for i in 1 2; do perf bench sched pipe -l 5000 | grep usecs/op; done
qperf -t 2 127.0.0.1 tcp_lat | grep latency
for qw in off on; do for spin in 50 0; do
  if [ $qw = on ]; then export WL_QW=1; else unset WL_QW; fi
  scx_wakelab --agent-spin-us $spin > /tmp/wl.log 2>&1 & W=$!
  sleep 3
  perf bench sched pipe -l 2000 >/dev/null
  for i in 1 2; do
    irq; perf bench sched pipe -l 5000 | grep usecs/op; irq
  done
  qperf -t 2 127.0.0.1 tcp_lat | grep latency
  echo "== qw $qw spin $spin"
  scx_wakelab stats | grep -E "hops|agent:|bpf:"
  kill -INT $W; wait $W
done; done
