#!/bin/sh
# Where the time of a sched pipe run goes, EEVDF then scx_wakelab (default flags),
# sampled on every CPU by the guest's perf (cpu-clock, 10 kHz of virtual time).
#   tools/vm/wakelab-vm run --clock icount --append tsc=reliable \
#     --copy profile.sh -- 'sh /wl/profile.sh'
perf bench sched pipe -l 2000 >/dev/null
rep() {
  perf report -i $1 --stdio --sort comm,dso 2>/dev/null | grep -v "^#" | grep -v "^$" | head -25
  perf report -i $1 --stdio --sort sym 2>/dev/null | grep -v "^#" | grep -v "^$" | head -45
}
perf record -a -F 10000 -e cpu-clock -o /tmp/eevdf.data -- perf bench sched pipe -l 5000 2>&1 | grep usecs/op
rep /tmp/eevdf.data
scx_wakelab > /tmp/wl.log 2>&1 & W=$!
sleep 3
perf bench sched pipe -l 2000 >/dev/null
perf record -a -F 10000 -e cpu-clock -o /tmp/wl.data -- perf bench sched pipe -l 5000 2>&1 | grep usecs/op
echo "=== wakelab"
rep /tmp/wl.data
kill -INT $W; wait $W
