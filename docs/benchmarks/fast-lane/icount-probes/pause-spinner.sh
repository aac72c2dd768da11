#!/bin/sh
# Does a spinning CPU cost the workload time under the virtual clock?
# EEVDF only: sched pipe alone, beside a PAUSE spinner on CPU 7, beside a plain spinner.
# Host: gcc -O2 -static -o pausespin pausespin.c
#   tools/vm/wakelab-vm run --no-binary --clock icount --append tsc=reliable \
#     --bin pausespin --copy pause-spinner.sh -- 'sh /wl/pause-spinner.sh'
set -x
for i in 1 2; do
  perf bench sched pipe -l 5000 | grep usecs/op
  taskset -c 7 pausespin p & P=$!; sleep 0.2
  perf bench sched pipe -l 5000 | grep usecs/op
  kill $P; wait $P 2>/dev/null
  taskset -c 7 pausespin n & P=$!; sleep 0.2
  perf bench sched pipe -l 5000 | grep usecs/op
  kill $P; wait $P 2>/dev/null
done
