#!/bin/sh
# Guest side of tools/lab/run (busybox sh, in the VM or on a sched_ext host).
#
# Reads the plan (PLAN, one setting a line: NAME|KIND|ARGS|WORKLOAD:PARAM ...; '|', not a
# tab: read collapses empty fields between whitespace separators)
# and runs REPS interleaved repetitions: for each rep, for each setting (in reverse order
# in even reps), load the scheduler, run that setting's workloads, unload. Prints:
#   LAB-META key value...                               run facts
#   LAB r=REP s=SETTING w=WORKLOAD p=PARAM m=METRIC u=UNIT v=VALUE   one measurement
#   LABWL r=REP s=SETTING w=WORKLOAD p=PARAM {json}     scx_wakelab counter deltas of one run
#   LABHIST r=REP s=SETTING [buckets]                   scx_wakelab enqueue->run histogram, per block
#   LABHOP r=REP s=SETTING [[buckets],...]              scx_wakelab per-hop histograms, per block
#   LABWLHOP r=REP s=SETTING w=WORKLOAD p=PARAM [[buckets],...]   the same, of one run
#   LAB-LOG r=REP s=SETTING text                        log lines worth keeping
#   LAB-END at UPTIME
# PARAM '-' means none. Every number is measured around one workload run only.
REPS=${REPS:-3}
HB_LOOPS=${HB_LOOPS:-100}; PIPE_LOOPS=${PIPE_LOOPS:-5000}; QPERF_TIME=${QPERF_TIME:-2}
LATCTX_ENOUGH=${LATCTX_ENOUGH:-10000}; LATCTX_PROCS=${LATCTX_PROCS:-16}; MC_SECS=${MC_SECS:-3}; TB_SECS=${TB_SECS:-3}
LATCTX_ARGS=${LATCTX_ARGS:-}   # lat_ctx's arguments instead of the rings below (tools/lab/run --lat-ctx-args)
BENCH_TIMEOUT=${BENCH_TIMEOUT:-180}; LOAD_TIMEOUT=${LOAD_TIMEOUT:-60}
TO=/usr/local/bin/timeout
[ -x "$TO" ] || TO=timeout
LMB=${LMB:-/opt/lmbench/bin}
T=/sys/kernel/tracing
EV=$T/events/sched/sched_migrate_task
TRIG='hist:keys=comm,orig_cpu,dest_cpu:vals=hitcount:size=4096'
WEV=$T/events/sched/sched_wakeup
WTRIG='hist:keys=comm:vals=hitcount:size=4096'
FEATURES=/sys/kernel/debug/sched/features; FEATURES_SET=""
NCPU=$(nproc)
REP=0; SNAME=warmup

state() { cat /sys/kernel/sched_ext/state 2>/dev/null || echo absent; }
upt() { cut -d' ' -f1 /proc/uptime; }
logl() { while IFS= read -r l; do echo "LAB-LOG r=$REP s=$SNAME $l"; done; }
wait_state() { # STATE SECS [PID]: poll; stop early when PID died
    i=0
    while [ "$(state)" != "$1" ] && [ $i -lt $(( $2 * 10 )) ]; do
        if [ -n "$3" ] && ! kill -0 "$3" 2>/dev/null; then break; fi
        sleep 0.1; i=$((i + 1))
    done
    [ "$(state)" = "$1" ]
}

# ---- topology ------------------------------------------------------------------
NODEMAP=""; LASTNODE=""; NNODES=0
for n in /sys/devices/system/node/node[0-9]*; do
    NNODES=$((NNODES + 1)); LASTNODE=${n##*/node}
    for c in "$n"/cpu[0-9]*; do [ -e "$c" ] && NODEMAP="$NODEMAP ${c##*/cpu}:${n##*/node}"; done
done
# cpus of a node as a list, and hex masks (RPS, taskset)
node_cpus() { for p in $NODEMAP; do [ "${p#*:}" = "$1" ] && echo "${p%%:*}"; done; }
mask_of() { m=0; while read -r c; do m=$((m | (1 << c))); done; printf '%x' "$m"; }  # busybox awk has no '^'
FIRST_CPUS=$(node_cpus "$(echo "$NODEMAP" | awk '{ split($1, p, ":"); print p[2] }')" | tr '\n' ',' | sed 's/,$//')
LAST_CPUS=$(node_cpus "$LASTNODE")
LAST_MASK=$(echo "$LAST_CPUS" | mask_of)
ALL_MASK=$(seq 0 $((NCPU - 1)) | mask_of)

echo "LAB-META kernel $(uname -r)"
echo "LAB-META cpus $NCPU"
for n in /sys/devices/system/node/node[0-9]*; do echo "LAB-META node ${n##*/} $(cat "$n"/cpulist)"; done
echo "LAB-META smt_cpu0 $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list)"
echo "LAB-META llc_cpu0 $(cat /sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list 2>/dev/null)"
echo "LAB-META clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
echo "LAB-META cmdline $(cat /proc/cmdline)"
echo "LAB-META clock ${WAKELAB_CLOCK:-host}"
echo "LAB-META params reps=$REPS hb_loops=$HB_LOOPS pipe_loops=$PIPE_LOOPS qperf_time=$QPERF_TIME latctx_enough=$LATCTX_ENOUGH latctx_procs=$LATCTX_PROCS mc_secs=$MC_SECS tb_secs=$TB_SECS"
[ -n "$LATCTX_ARGS" ] && echo "LAB-META latctx_args $LATCTX_ARGS"
[ -w "$EV/trigger" ] || echo "LAB-META warning no hist trigger for sched_migrate_task"
[ -w "$WEV/trigger" ] || echo "LAB-META warning no hist trigger for sched_wakeup"
[ "$(cat /proc/sys/kernel/sched_schedstats 2>/dev/null)" = 1 ] || echo 1 >/proc/sys/kernel/sched_schedstats 2>/dev/null

# ---- counters around one run ------------------------------------------------------
# schedstat: cpuN yld_count legacy sched_count sched_goidle ttwu_count ttwu_local rq_cpu_time run_delay pcount;
# a domain line ends ttwu_wake_remote ttwu_move_affine ttwu_move_balance in every version.
# Out: run delay, remote wake-ups, wake-ups, wake-ups wake_affine() moved to the waker's CPU.
schedstat() {
    awk '/^cpu[0-9]/ { d += $9; r += $6 - $7; w += $6 } /^domain/ { a += $(NF - 1) }
         END { printf "%.0f %.0f %.0f %.0f", d, r, w, a }' /proc/schedstat
}
# Sched features for a block of the kernel's own scheduler (an eevdf setting's ARGS, e.g.
# NO_DELAY_DEQUEUE). Fails at the first the kernel refuses; FEATURES_SET lists those
# written, and `features_undo` writes each one's opposite.
features_set() {
    FEATURES_SET=""
    [ -w "$FEATURES" ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null
    for f in "$@"; do echo "$f" >"$FEATURES" 2>/dev/null || return 1; FEATURES_SET="$FEATURES_SET $f"; done
}
features_undo() {
    for f in $FEATURES_SET; do
        case $f in NO_*) echo "${f#NO_}" ;; *) echo "NO_$f" ;; esac >"$FEATURES" 2>/dev/null
    done
    FEATURES_SET=""
}
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
ticks_of() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 }'; }
# context switches of every thread of process $1 (the scheduler's own, not the workload's)
switches_of() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { n += $2 } END { print n + 0 }'; }
# numeric counters of `scx_wakelab stats --json`, "name value" lines (config and histogram left out)
wl_numbers() {
    sed 's/"config":{[^}]*}//; s/"enqueue_to_run_hist":\[[^]]*\]//; s/"hop_hist":\[\(\[[0-9,]*\],*\)*\]//' "$1" | tr ',{}' '\n\n\n' |
        sed -n 's/^"\([a-z_0-9]*\)":\([0-9][0-9]*\)$/\1 \2/p'
}
# the per-hop histograms of a stats --json snapshot: [[buckets],...] (nothing if absent)
wl_hops() { sed -n 's/.*"hop_hist":\(\[\(\[[0-9,]*\],*\)*\]\).*/\1/p' "$1"; }
wl_snap() { scx_wakelab stats --json >"$1" 2>/dev/null || : >"$1"; }

out() { echo "LAB r=$REP s=$SNAME w=$W p=$P m=$1 u=$2 v=$3"; }

# measure CMD...: run one workload command ($W, $P set) under a timeout with every
# counter around it; leaves its output in /tmp/run.out and its status in RC.
measure() {
    echo "$TRIG" >"$EV/trigger" 2>/dev/null
    echo "$WTRIG" >"$WEV/trigger" 2>/dev/null
    c0=$(awk '/^ctxt/ { print $2 }' /proc/stat); b0=$(busy_ticks)
    s0=$(schedstat); a0=""; w0=""; [ -n "$SPID" ] && { a0=$(ticks_of "$SPID"); w0=$(switches_of "$SPID"); }
    [ "$KIND" = wakelab ] && wl_snap /tmp/wl.a
    t0=$(upt)
    $TO "$BENCH_TIMEOUT" "$@" >/tmp/run.out 2>&1
    RC=$?
    t1=$(upt)
    [ "$KIND" = wakelab ] && wl_snap /tmp/wl.b
    c1=$(awk '/^ctxt/ { print $2 }' /proc/stat); b1=$(busy_ticks); s1=$(schedstat)
    a1=""; w1=""; [ -n "$SPID" ] && { a1=$(ticks_of "$SPID"); w1=$(switches_of "$SPID"); }
    cat "$EV/hist" >/tmp/hist 2>/dev/null
    echo "!$TRIG" >"$EV/trigger" 2>/dev/null
    cat "$WEV/hist" >/tmp/whist 2>/dev/null
    echo "!$WTRIG" >"$WEV/trigger" 2>/dev/null
    out wall_s s "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
    out ctxt count $((c1 - c0))
    out cpu_s s "$(awk -v a="$b0" -v b="$b1" 'BEGIN { printf "%.2f", (b - a) / 100 }')"
    set -- $s0 $s1
    out run_delay_ns ns $(($5 - $1))
    out remote_wakeups count $(($6 - $2))
    out wakeups count $(($7 - $3))
    out affine_moves count $(($8 - $4))
    # the workload's own wake-ups (comm in TASKS), as its migrations below
    sed -n 's/.*comm: *\([^ }]*\) *} *hitcount: *\([0-9]*\).*/\1 \2/p' /tmp/whist |
        awk -v tasks=" $TASKS " -v pre="LAB r=$REP s=$SNAME w=$W p=$P" '
            index(tasks, " " $1 " ") { n += $2 } END { printf "%s m=task_wakeups u=count v=%d\n", pre, n }'
    [ -n "$a0" ] && [ -n "$a1" ] && out agent_cpu_s s "$(awk -v a="$a0" -v b="$a1" 'BEGIN { printf "%.2f", (b - a) / 100 }')"
    [ -n "$w0" ] && [ -n "$w1" ] && out sched_ctxt count $((w1 - w0))
    # migrations: all tasks but the scheduler's own threads (comm $SCOMM: a user-space
    # scheduler's moves are not placements of the workload), the scheduler's apart, and
    # the workload's own (comm in TASKS)
    sed -n 's/.*comm: *\([^,]*[^ ,]\) *, *orig_cpu: *\([0-9]*\), *dest_cpu: *\([0-9]*\) *} *hitcount: *\([0-9]*\).*/\1 \2 \3 \4/p' /tmp/hist |
        awk -v map="$NODEMAP" -v tasks=" $TASKS " -v sched="$SCOMM" -v pre="LAB r=$REP s=$SNAME w=$W p=$P" '
            BEGIN { n = split(map, w, " "); for (i = 1; i <= n; i++) { split(w[i], p, ":"); node[p[1]] = p[2] } }
            sched != "" && $1 == sched { sm += $4; if (node[$2] != node[$3]) xsm += $4; next }
            { x = node[$2] != node[$3]; all += $4; if (x) xall += $4
              if (index(tasks, " " $1 " ")) { own += $4; if (x) xown += $4 } }
            END { printf "%s m=migrations u=count v=%d\n%s m=cross_node_migrations u=count v=%d\n", pre, all, pre, xall
                  printf "%s m=task_migrations u=count v=%d\n%s m=task_cross_node_migrations u=count v=%d\n", pre, own, pre, xown
                  if (sched != "") printf "%s m=sched_migrations u=count v=%d\n%s m=sched_cross_node_migrations u=count v=%d\n", pre, sm, pre, xsm }'
    # TOP_MIGRATORS=N: log the N task names with the most cross-node migrations
    if [ "${TOP_MIGRATORS:-0}" -gt 0 ]; then
        top=$(sed -n 's/.*comm: *\([^,]*[^ ,]\) *, *orig_cpu: *\([0-9]*\), *dest_cpu: *\([0-9]*\) *} *hitcount: *\([0-9]*\).*/\1 \2 \3 \4/p' /tmp/hist |
            awk -v map="$NODEMAP" 'BEGIN { n = split(map, w, " "); for (i = 1; i <= n; i++) { split(w[i], p, ":"); node[p[1]] = p[2] } }
                node[$2] != node[$3] { x[$1] += $4 } END { for (c in x) print x[c], c }' |
            sort -rn | head -n "$TOP_MIGRATORS" | tr '\n' ' ')
        echo "$W $P cross-node migrations by task: ${top:-none}" | logl
    fi
    d=$(sed -n 's/^ *Dropped: *//p' /tmp/hist)
    [ -n "$d" ] && [ "$d" != 0 ] && echo "hist dropped $d events" | logl
    if [ "$KIND" = wakelab ] && [ -s /tmp/wl.a ] && [ -s /tmp/wl.b ]; then
        wl_numbers /tmp/wl.a >/tmp/wl.na; wl_numbers /tmp/wl.b >/tmp/wl.nb
        echo "LABWL r=$REP s=$SNAME w=$W p=$P $(awk 'BEGIN { printf "{" } NR == FNR { old[$1] = $2; next }
            { printf "%s\"%s\":%.0f", sep, $1, $2 - old[$1]; sep = "," } END { print "}" }' /tmp/wl.na /tmp/wl.nb)"
        ha=$(wl_hops /tmp/wl.a); hb=$(wl_hops /tmp/wl.b)
        # before the agent's first publication the start has none ([]): all zeros
        case "$hb" in
            *'[['*) echo "LABWLHOP r=$REP s=$SNAME w=$W p=$P $(awk -v a="$ha" -v b="$hb" 'BEGIN {
                gsub(/^\[\[|\]\]$/, "", a); gsub(/^\[\[|\]\]$/, "", b)
                n = split(b, rb, /\],\[/); split(a, ra, /\],\[/); out = "["
                for (i = 1; i <= n; i++) {
                    m = split(rb[i], vb, ","); split(ra[i], va, ","); out = out (i > 1 ? "," : "") "["
                    for (j = 1; j <= m; j++) out = out (j > 1 ? "," : "") (vb[j] - va[j])
                    out = out "]"
                }
                print out "]" }')" ;;
        esac
    fi
}

# primary VALUE UNIT: the workload's primary metric, or a failure line
primary() {
    if [ $RC -ne 0 ] || [ -z "$1" ]; then
        out failed count "$RC"
        tail -n 4 /tmp/run.out | logl
    else
        out value "$2" "$1"
    fi
}

# hogs_on / hogs_off: one spinning hog per CPU of the last node
HOGS=""
hogs_on() { for c in $LAST_CPUS; do taskset -c "$c" sh -c 'while :; do :; done' & HOGS="$HOGS $!"; done; }
hogs_off() { [ -n "$HOGS" ] && { kill $HOGS 2>/dev/null; wait $HOGS 2>/dev/null; }; HOGS=""; }
RPS=/sys/class/net/lo/queues/rx-0/rps_cpus
# net_rx: "ALL LASTNODE" NET_RX softirq counts (/proc/softirqs columns are CPU0..N-1)
net_rx() { awk -v last=" $(echo $LAST_CPUS) " '$1 == "NET_RX:" { for (i = 2; i <= NF; i++) { a += $i; if (index(last, " " (i - 2) " ")) l += $i } }
                                            END { printf "%.0f %.0f", a, l }' /proc/softirqs; }

qperf_us() { # qperf output -> microseconds
    sed -n 's/^ *latency *= *\([0-9.]*\) *\([a-z]*\).*/\1 \2/p' "$1" | tail -n 1 |
        awk '{ f = ($2 == "ns") ? 0.001 : ($2 == "us") ? 1 : ($2 == "ms") ? 1000 : ($2 == "sec" || $2 == "s") ? 1000000 : -1
               if (f > 0) printf "%.3f", $1 * f }'
}

# run_wl WORKLOAD PARAM [warm]: one workload run, measured (warm: short and silent)
run_wl() {
    W=$1; P=$2; warm=$3
    l=$HB_LOOPS; pl=$PIPE_LOOPS; qt=$QPERF_TIME; en=$LATCTX_ENOUGH; ms=$MC_SECS; ts=$TB_SECS
    [ -n "$warm" ] && { l=10; pl=300; qt=1; en=1000; ms=1; ts=1; }
    case $W in
        hackbench-*)
            o=""; case $W in *-thread-*) o="-T" ;; esac
            case $W in *-pipes) o="$o -p" ;; esac
            TASKS="hackbench"
            if [ -n "$warm" ]; then hackbench $o -g "$P" -l "$l" >/dev/null 2>&1; return; fi
            measure hackbench $o -g "$P" -l "$l"
            primary "$(sed -n 's/^Time: *\([0-9.]*\).*/\1/p' /tmp/run.out | tail -n 1)" s ;;
        perf-sched-pipe)
            # PARAM N: N pairs at once (value = their mean usecs/op); none = one pair
            TASKS="perf sched-pipe"
            if [ -n "$warm" ]; then perf bench sched pipe -l "$pl" >/dev/null 2>&1; return; fi
            if [ "$P" = - ] || [ "$P" = 1 ]; then
                measure perf bench sched pipe -l "$pl"
                primary "$(sed -n 's/^ *\([0-9.]*\) usecs\/op.*/\1/p' /tmp/run.out | tail -n 1)" us
            else
                rm -f /tmp/pp.*
                measure sh -c "for i in \$(seq $P); do perf bench sched pipe -l $pl >/tmp/pp.\$i 2>&1 & done; wait"
                primary "$(cat /tmp/pp.* 2>/dev/null | sed -n 's/^ *\([0-9.]*\) usecs\/op.*/\1/p' |
                           awk -v n="$P" '{ s += $1; k++ } END { if (k == n) printf "%.3f", s / k }')" us
            fi ;;
        lat-ctx)
            # -P NCPU rings of LATCTX_PROCS (16), one repetition, no warm-up, a small
            # ENOUGH. Rings, not pairs: Tianchen Ding's seed-3 report ran rings of 96
            # (lmbench supports up to 20). In a ring of 2 the sleeper is woken again
            # while still delayed, so under delayed dequeue most wake-ups are requeues
            # that never reach the placement path the seed is about; in a ring of 16
            # almost none are (the counts: tools/lab/checks-notes.md, seed 3). One short
            # repetition, because lat_ctx -P NCPU keeps every vCPU busy and the virtual
            # clock runs them in turn on one host thread: each guest second costs many
            # wall seconds, which made lmbench's defaults look like a hang in the former
            # runner, tools/bench/baseline (measured: docs/benchmarks/lab-notes.md).
            # Each run's guest time is recorded (wall_s) and bounded (BENCH_TIMEOUT).
            TASKS="lat_ctx"
            # lat_ctx prints one 'NPROCS USECS' line per size: the ring's, or with
            # LATCTX_ARGS the last size's
            if [ -n "$LATCTX_ARGS" ]; then
                set -- env ENOUGH="$en" TIMING_O=0 LOOP_O=0 $LMB/lat_ctx $LATCTX_ARGS; n='[0-9][0-9]*'
            else
                set -- env ENOUGH="$en" TIMING_O=0 LOOP_O=0 $LMB/lat_ctx -P "$NCPU" -W 0 -N 1 -s 0 "$LATCTX_PROCS"; n=$LATCTX_PROCS
            fi
            if [ -n "$warm" ]; then $TO 60 "$@" >/dev/null 2>&1; return; fi
            measure "$@"
            primary "$(sed -n "s/^$n \\([0-9.][0-9.]*\\)\$/\\1/p" /tmp/run.out | tail -n 1)" us ;;
        qperf-tcp-lat)
            TASKS="qperf"
            qperf >/dev/null 2>&1 & QS=$!; sleep 0.3
            if [ -n "$warm" ]; then qperf -t 1 127.0.0.1 tcp_lat >/dev/null 2>&1
            else measure qperf -t "$qt" 127.0.0.1 tcp_lat; primary "$(qperf_us /tmp/run.out)" us; fi
            kill $QS 2>/dev/null; wait $QS 2>/dev/null ;;
        seed1-qperf)
            # Barry Song's case scaled down: PARAM rps+hogs steers lo's receive softirq
            # onto the last node's CPUs and spins one hog on each; plain = neither.
            # Server and client start on the first node, then may run anywhere: a
            # softirq waker on a hog CPU that claims "about to sleep" pulls the wakee
            # across nodes. Fresh pair per run.
            [ "$NNODES" -ge 2 ] || { [ -z "$warm" ] && echo "seed1-qperf needs 2 NUMA nodes: skipped" | logl; return; }
            TASKS="qperf"; old=$(cat $RPS)
            if [ "$P" = rps+hogs ]; then
                echo "$LAST_MASK" >$RPS
                [ "$(cat $RPS | sed 's/^0*//')" = "$LAST_MASK" ] || echo "RPS mask $LAST_MASK not taken: $(cat $RPS)" | logl
                hogs_on
            fi
            taskset -c "$FIRST_CPUS" sh -c "taskset -p $ALL_MASK \$\$ >/dev/null; exec qperf" >/dev/null 2>&1 & QS=$!
            sleep 0.3
            set -- taskset -c "$FIRST_CPUS" sh -c "taskset -p $ALL_MASK \$\$ >/dev/null; exec qperf -t $qt 127.0.0.1 tcp_lat"
            if [ -n "$warm" ]; then "$@" >/dev/null 2>&1
            else
                n0=$(net_rx); measure "$@"; n1=$(net_rx)
                primary "$(qperf_us /tmp/run.out)" us
                # where the receive softirq ran: the evidence that RPS steered it
                set -- $n0 $n1; out net_rx_softirqs count $(($3 - $1)); out net_rx_softirqs_last_node count $(($4 - $2))
            fi
            kill $QS 2>/dev/null; wait $QS 2>/dev/null
            hogs_off; echo "$old" >$RPS ;;
        memcached)
            # Rik van Riel's memcache-like test: request/response over loopback TCP,
            # percentiles of the response time and the total CPU time (cpu_s).
            TASKS="memcached mcload"
            memcached -u root -l 127.0.0.1 -p 11211 -U 0 -t $(( (NCPU + 1) / 2 )) >/dev/null 2>&1 & MS=$!
            i=0; until mcload -p 1 >/dev/null 2>&1 || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
            set -- mcload -c "$P" -t "$ms"
            if [ -n "$warm" ]; then "$@" >/dev/null 2>&1
            else
                measure "$@"
                primary "$(sed -n 's/.*p99_us=\([0-9.]*\).*/\1/p' /tmp/run.out)" us
                for k in p50_us p95_us p99_us rps requests; do
                    v=$(sed -n "s/.* $k=\([0-9.]*\).*/\1/p" /tmp/run.out); [ -n "$v" ] && out "$k" "${k#*_}" "$v"
                done
            fi
            kill $MS 2>/dev/null; wait $MS 2>/dev/null ;;
        tbench)
            TASKS="tbench tbench_srv"
            tbench_srv >/dev/null 2>&1 & TS=$!; sleep 0.3
            set -- tbench -t "$ts" -c "${TBENCH_LOADFILE:-/wl/client.txt}" "$P" 127.0.0.1
            if [ -n "$warm" ]; then "$@" >/dev/null 2>&1
            else
                measure "$@"
                # 'Throughput 0 MB/sec' = nothing completed within the time limit: no measurement
                primary "$(sed -n 's/^Throughput \([0-9.]*[1-9][0-9.]*\) MB\/sec.*/\1/p' /tmp/run.out | tail -n 1)" MB/s
            fi
            kill $TS 2>/dev/null; wait $TS 2>/dev/null ;;
        *) echo "unknown workload $W" | logl ;;
    esac
}

# ---- the plan ---------------------------------------------------------------------
ALLWL=$(cut -d'|' -f4 "$PLAN" | tr ' ' '\n' | awk 'NF && !seen[$0]++')
echo "LAB-META settings $(cut -d'|' -f1 "$PLAN" | tr '\n' ' ')"

# Warm-up under the default scheduler, not recorded: first exec, page cache, tracefs.
# One run per workload (its first param; the seed-1 scenario without hogs): under the
# virtual clock every busy vCPU costs wall time.
KIND=eevdf; SPID=""; SCOMM=""
for wp in $(echo "$ALLWL" | awk -F: '!seen[$1]++'); do
    case $wp in seed1-qperf:*) wp=seed1-qperf:plain ;; esac
    run_wl "${wp%%:*}" "${wp#*:}" warm
done
dmesg -c >/dev/null 2>&1

# Even reps run the settings in reverse order: a setting's time can drift with its place
# in the boot (measured in docs/benchmarks/fast-lane-notes.md), and alternating the order
# spreads that drift over every setting alike instead of charging it to the late ones.
sed -n '1!G;h;$p' "$PLAN" >/tmp/plan.reversed
REP=1
while [ $REP -le "$REPS" ]; do
    # the plan on fd 3: the schedulers and workloads inherit stdin
    if [ $((REP % 2)) = 0 ]; then exec 3</tmp/plan.reversed; else exec 3<"$PLAN"; fi
    while IFS='|' read -r SNAME KIND SARGS WLS <&3; do
        [ -n "$SNAME" ] || continue
        echo "LAB-BLOCK r=$REP s=$SNAME begin at $(upt)"
        st=$(state)
        [ "$st" = disabled ] || echo "state $st before loading" | logl
        SPID=""; SCOMM=""; W=block; P=-
        if [ "$KIND" = eevdf ] && [ -n "$SARGS" ] && ! features_set $SARGS; then
            out status - features_failed
            echo "sched features $SARGS refused: block skipped" | logl
            features_undo
            continue
        fi
        if [ "$KIND" != eevdf ]; then
            bin=$SNAME; [ "$KIND" = wakelab ] && bin=scx_wakelab
            SCOMM=$(echo "$bin" | cut -c1-15)
            l0=$(upt)
            $bin $SARGS >/tmp/sched.log 2>&1 </dev/null &
            SPID=$!
            ok=0
            if wait_state enabled "$LOAD_TIMEOUT" "$SPID"; then
                ok=1
                if [ "$KIND" = wakelab ]; then # the control socket comes up just after
                    i=0; until scx_wakelab stats --json >/dev/null 2>&1; do
                        i=$((i + 1)); [ $i -ge 100 ] && { ok=0; break; }; sleep 0.2; done
                fi
            fi
            if [ $ok = 0 ]; then
                out status - load_failed
                kill -INT "$SPID" 2>/dev/null; sleep 1; kill -KILL "$SPID" 2>/dev/null; wait "$SPID"
                tail -n 15 /tmp/sched.log | logl
                wait_state disabled 30
                dmesg -c 2>/dev/null | grep -iE 'sched_ext|stall|failed to run|BUG|Oops' | logl
                continue
            fi
            out load_s s "$(awk -v a="$l0" -v b="$(upt)" 'BEGIN { printf "%.2f", b - a }')"
        fi
        blk0=$(upt)
        for wp in $WLS; do run_wl "${wp%%:*}" "${wp#*:}"; done
        W=block; P=-
        # the block as a whole: its guest time, and the scheduler's CPU time from load
        # to stop (between runs too, which the per-run agent_cpu_s leaves out)
        out block_s s "$(awk -v a="$blk0" -v b="$(upt)" 'BEGIN { printf "%.2f", b - a }')"
        if [ -n "$SPID" ]; then
            alive=1; kill -0 "$SPID" 2>/dev/null || alive=0
            st=$(state)
            tk=$(ticks_of "$SPID"); [ -n "$tk" ] && out sched_cpu_s s "$(awk -v t="$tk" 'BEGIN { printf "%.2f", t / 100 }')"
            if [ "$KIND" = wakelab ]; then
                wl_snap /tmp/wl.end
                h=$(sed -n 's/.*"enqueue_to_run_hist":\(\[[0-9,]*\]\).*/\1/p' /tmp/wl.end)
                [ -n "$h" ] && echo "LABHIST r=$REP s=$SNAME $h"
                h=$(sed -n 's/.*"hop_hist":\(\[\(\[[0-9,]*\],*\)*\]\).*/\1/p' /tmp/wl.end)
                [ -n "$h" ] && echo "LABHOP r=$REP s=$SNAME $h"
            fi
            kill -INT "$SPID" 2>/dev/null
            i=0; while kill -0 "$SPID" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
            kill -0 "$SPID" 2>/dev/null && { echo "no exit 30 s after SIGINT: SIGKILL" | logl; kill -KILL "$SPID"; }
            wait "$SPID"; rc=$?
            wait_state disabled 30 || echo "state still $(state) 30 s after the scheduler exited" | logl
            if [ $alive = 0 ] || [ "$st" != enabled ]; then
                out status - crashed; tail -n 15 /tmp/sched.log | logl
            elif [ $rc -ne 0 ]; then out status - "exit_$rc"; tail -n 5 /tmp/sched.log | logl
            else out status - ok; fi
        else
            features_undo
            out status - ok
        fi
        dmesg -c 2>/dev/null | grep -iE 'sched_ext|stall|failed to run|BUG|Oops' | logl
    done
    exec 3<&-
    REP=$((REP + 1))
done
echo "LAB-END at $(upt)"
# let the serial console drain before the harness powers off
sleep 2
