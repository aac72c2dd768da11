# Ablation switches of a temporary build of e97a7a5 (not kept): WL_ABL_NO_AGENT (BPF queues every
# wake-up on its CPU itself, no message), WL_ABL_TRIVIAL (the agent decides prev_cpu without
# reading the CPUs or the engine), WL_ABL_SEND_ONLY (messages sent and read, the enqueue ignores
# the decision). Run with tools/vm/wakelab-vm run --clock icount --append tsc=reliable
# --binary BUILD/scx_wakelab --bin scx_bpfland --env SET=1|2 --copy ablation.sh -- 'sh /wl/ablation.sh'
# (SET=1: ablation-1-e97a7a5.out, whose STATS lines were cut at 3000 bytes; SET=2: ablation-2-e97a7a5.out)
qperf >/dev/null 2>&1 &
perf bench sched pipe -l 2000 >/dev/null
pipe() { perf bench sched pipe -l 5000 | awk '/usecs\/op/{print $1}'; }
qp() { qperf -t 2 127.0.0.1 tcp_lat | awk '/latency/{print $3}'; }
echo "RES eevdf pipe $(pipe) $(pipe) qperf $(qp)"
run() {
  name=$1; shift
  env $ENVS "$@" > /tmp/wl.log 2>&1 & W=$!
  sleep 3
  perf bench sched pipe -l 1000 >/dev/null
  r="$(pipe) $(pipe) $(pipe)"; q=$(qp)
  echo "RES $name pipe $r qperf $q"
  echo "STATS $name $(scx_wakelab stats --json 2>/dev/null | tr -d '\n')"
  kill -INT $W; wait $W
}
for round in 1 2; do
  if [ "$SET" = 1 ]; then
    ENVS= run full scx_wakelab
    ENVS=WL_ABL_TRIVIAL=1 run trivial scx_wakelab
    ENVS=WL_ABL_TRIVIAL=1 run trivial_nodd scx_wakelab --delayed-dequeue false
    ENVS=WL_ABL_NO_AGENT=1 run no_agent scx_wakelab --delayed-dequeue false
    ENVS= run bpfland scx_bpfland
  else
    ENVS=WL_ABL_NO_AGENT=1 run no_agent scx_wakelab --delayed-dequeue false
    ENVS="WL_ABL_SEND_ONLY=1 WL_ABL_TRIVIAL=1" run send_only scx_wakelab
    ENVS="WL_ABL_SEND_ONLY=1 WL_ABL_TRIVIAL=1" run send_only_nodd scx_wakelab --delayed-dequeue false
    ENVS=WL_ABL_TRIVIAL=1 run trivial scx_wakelab
    ENVS=WL_ABL_TRIVIAL=1 run trivial_nohandoff scx_wakelab --agent-handoff false
    ENVS= run full scx_wakelab
  fi
done
echo "RES eevdf pipe $(pipe) $(pipe) qperf $(qp)"
