#!/bin/sh
# Base 50a674b, new dd599d9: tools/vm/wakelab-vm run --clock icount --append tsc=reliable
#   --binary NEW/scx_wakelab --copy BASE/scx_wakelab_base --copy spin.sh -- "sh /wl/spin.sh"
counter() { scx_wakelab stats --json 2>/dev/null | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" | head -n 1; }
perf bench sched pipe -l 2000 >/dev/null
for b in base new base new; do
  if [ $b = base ]; then /wl/scx_wakelab_base > /tmp/wl.log 2>&1 & W=$!
  else scx_wakelab > /tmp/wl.log 2>&1 & W=$!; fi
  sleep 3
  c0=$(counter agent_cpu_ns); s0=$(counter agent_spin_ns); d0=$(counter nr_decisions)
  t=$(perf bench sched messaging -p -g 1 -l 200 2>&1 | awk '/Total time/{print $3}')
  sleep 0.2
  c1=$(counter agent_cpu_ns); s1=$(counter agent_spin_ns); d1=$(counter nr_decisions)
  p=$(perf bench sched pipe -l 3000 | awk '/usecs\/op/{print $1}')
  echo "SPIN $b hackbench-1 $t s: decisions $((d1-d0)) agent cpu ms $(( (c1-c0)/1000000 )) spin ms $(( (s1-s0)/1000000 )); pipe $p"
  kill -INT $W; wait $W
done
