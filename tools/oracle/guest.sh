#!/bin/sh
# The oracle lab's guest side (tools/oracle/run): for each workload, record the kernel's
# own fair-class placements while the workload runs, then replay them through the engine,
# with the kernel's inputs and with the live agent's (each replay after an ORACLE-COMPARE
# line naming its inputs); the newly-idle balances are recorded beside them and accounted
# for after an ORACLE-NEWIDLE line.
# Env: WORKLOADS (space-separated names below), SECS (seconds of workload each),
# SECS_FOR (space-separated WORKLOAD=SECONDS: those workloads' own seconds instead),
# DISCRIMINATE=1 to replay with the other kernels' presets too (oracle compare --discriminate),
# STAND_INS (space-separated workloads) to cost each of the live agent's stand-ins on those
# (oracle compare --stand-ins, with the kernel's inputs: eighteen more replays a record),
# REPS to run the workloads that many times, interleaved, each recorded apart and named
# WORKLOAD@REP (the lab's per-rep spread of the seeds' kernel effects).
set -u
REPS=${REPS:-1}
LMB=${LMB:-/opt/lmbench/bin}
SECS_DEFAULT=${SECS:-8}
SECS=$SECS_DEFAULT
secs_of() { # workload: its SECS_FOR seconds, else SECS_DEFAULT
    for e in ${SECS_FOR:-}; do
        [ "${e%%=*}" = "$1" ] && { echo "${e#*=}"; return; }
    done
    echo "$SECS_DEFAULT"
}
discriminate=
[ "${DISCRIMINATE:-0}" = 1 ] && discriminate=--discriminate
echo "ORACLE-KERNEL $(uname -r)"

# A kernel built without BTF has no /sys/kernel/btf/vmlinux. Hide the directory under an
# empty tmpfs: `oracle record` must refuse in one line and a non-zero exit.
if mount -t tmpfs none /sys/kernel/btf 2>/dev/null; then
    scx_wakelab oracle record --out /tmp/nobtf.jsonl --seconds 1 >/tmp/nobtf.out 2>&1
    rc=$?
    umount /sys/kernel/btf
    echo "ORACLE-NOBTF rc=$rc lines=$(wc -l </tmp/nobtf.out) $(head -c 300 /tmp/nobtf.out | tr '\n' ' ')"
fi

workload() { # name: runs for about SECS seconds
    end=$(( $(date +%s) + SECS ))
    case "$1" in
        sched-pipe) timeout "$SECS" perf bench sched pipe -l 100000000 ;;
        # NCPU/4 pairs at once, as the lab's seed-4 check runs it: enough that prev is
        # sometimes busy and the recent_used_cpu block is consulted.
        sched-pipe-pairs)
            pairs=$(( $(nproc) / 4 )); [ "$pairs" -ge 1 ] || pairs=1
            # Wait for the pairs by pid: a bare wait would wait for the recorder too.
            pids=
            for i in $(seq "$pairs"); do
                timeout "$SECS" perf bench sched pipe -l 100000000 & pids="$pids $!"
            done
            wait $pids ;;
        hackbench-pipes) while [ "$(date +%s)" -lt $end ]; do hackbench -p -g 4 -l 100; done ;;
        hackbench-sockets) while [ "$(date +%s)" -lt $end ]; do hackbench -g 4 -l 100; done ;;
        # More groups than the VM's 8 CPUs: 480 tasks, so that wake-ups leave prev often.
        hackbench-pipes-12g) while [ "$(date +%s)" -lt $end ]; do hackbench -p -g 12 -l 50; done ;;
        qperf-tcp-lat)
            qperf & s=$!; sleep 0.3
            qperf -t "$SECS" 127.0.0.1 tcp_lat; kill $s ;;
        lat-ctx)
            while [ "$(date +%s)" -lt $end ]; do env ENOUGH=200000 "$LMB/lat_ctx" -s 0 2; done ;;
        tbench)
            tbench_srv & s=$!; sleep 0.3
            tbench -t "$SECS" -c /wl/client.txt 4 127.0.0.1; kill $s ;;
        *) echo "unknown workload $1" >&2; return 2 ;;
    esac
}

rep=1
while [ $rep -le "$REPS" ]; do
    for w in $WORKLOADS; do
        name=$w
        [ "$REPS" -gt 1 ] && name="$w@$rep"
        out=/tmp/oracle-$w.jsonl
        ni=/tmp/newidle-$w.jsonl
        rm -f "$out" "$ni"
        scx_wakelab oracle record --out "$out" --newidle "$ni" --seconds 3600 2>/tmp/rec.err &
        rec=$!
        # The file appears once the programs are attached; do not run the workload before.
        i=0
        while [ ! -e "$out" ] && kill -0 $rec 2>/dev/null && [ $i -lt 600 ]; do
            sleep 0.1; i=$((i + 1))
        done
        SECS=$(secs_of "$w")
        workload "$w" >/dev/null 2>&1
        kill -INT $rec 2>/dev/null   # the recorder stops cleanly on SIGINT, as on Ctrl-C
        wait $rec
        rc=$?
        echo "ORACLE-BEGIN $name record-rc=$rc"
        sed 's/^/  record: /' /tmp/rec.err | tail -n 4
        if [ $rc -eq 0 ]; then
            for inputs in kernel live; do
                echo "ORACLE-COMPARE inputs=$inputs"
                stand_ins=
                case " ${STAND_INS:-} " in *" $w "*) [ "$inputs" = kernel ] && stand_ins=--stand-ins ;; esac
                scx_wakelab oracle compare --inputs "$inputs" $discriminate $stand_ins "$out"
            done
            echo "ORACLE-NEWIDLE"
            scx_wakelab oracle newidle "$ni"
        fi
        # The guest's /tmp is memory: seven workloads' records of both kinds do not fit in it.
        rm -f "$out" "$ni"
        echo "ORACLE-END $name"
    done
    rep=$((rep + 1))
done
