#!/bin/sh
# How low the round trip lets scx_wakelab go under the virtual clock, per workload: the
# build (full), an agent that decides prev_cpu without reading the CPUs or running the
# engine (trivial), and BPF queueing every wake-up on its CPU with no agent involved
# (no_agent), beside EEVDF and scx_rustland, alternating in one boot. The switches are a
# temporary patch (floor-ablation.patch beside this file), not in any commit:
#   git apply floor-ablation.patch && cargo build --release
#   tools/vm/wakelab-vm run --clock icount --append tsc=reliable --binary BUILD/scx_wakelab \
#     --bin ~/.cache/scx_wakelab/peers/bin/scx_rustland --copy floor.sh -- 'sh /wl/floor.sh'
# (floor-60f43c0.out: the patch's first form, which read WL_ABL_TRIVIAL from the environment
# every batch; floor-60f43c0-set2.out: --env SET=2, the patch as it is here.)
qperf >/dev/null 2>&1 &
perf bench sched pipe -l 2000 >/dev/null
latctx() { ENOUGH=5000 TIMING_O=0 LOOP_O=0 /opt/lmbench/bin/lat_ctx -P 8 -W 0 -N 1 -s 0 2 2>&1 | sed -n "s/^2 \([0-9.]*\)$/\1/p" | tail -n 1; }
pipe() { perf bench sched pipe -l 5000 | awk '/usecs\/op/{print $1}'; }
qp() { qperf -t 2 127.0.0.1 tcp_lat | awk '/latency/{print $3}'; }
measure() { echo "RES $1 pipe $(pipe) $(pipe) qperf $(qp) lat_ctx $(latctx) $(latctx)"; }
perf bench sched pipe -l 2000 >/dev/null
measure eevdf
run() {
  name=$1; shift
  env $ENVS "$@" > /tmp/s.log 2>&1 & W=$!
  sleep 3
  perf bench sched pipe -l 1000 >/dev/null
  measure $name
  case "$1" in scx_wakelab) echo "STATS $name $(scx_wakelab stats --json 2>/dev/null | tr -d '\n')";; esac
  kill -INT $W; wait $W
}
if [ "$SET" = 2 ]; then
  # The trivial agent again, its switch read once (the first patch read it from the
  # environment every batch): sched pipe, qperf and one lat_ctx, beside the build.
  measure() { echo "RES $1 pipe $(pipe) $(pipe) $(pipe) qperf $(qp) lat_ctx $(latctx)"; }
  for round in 1 2; do
    ENVS=WL_ABL_TRIVIAL=1 run trivial scx_wakelab
    ENVS= run full scx_wakelab
  done
  echo "RES eevdf pipe $(pipe) $(pipe) qperf $(qp)"
  exit 0
fi
for round in 1 2; do
  ENVS= run full scx_wakelab
  ENVS=WL_ABL_TRIVIAL=1 run trivial scx_wakelab
  ENVS=WL_ABL_NO_AGENT=1 run no_agent scx_wakelab --delayed-dequeue false --agent-handoff false
  ENVS= run rustland scx_rustland
done
measure eevdf
