#!/bin/sh
# Reliability checks (issue 5), run inside the VM by tools/vm-tests: load,
# faults and bad input, each with its evidence. Besides the CHECK lines,
#   CASE <id> <what was done>     starts a case (its CHECKs follow)
#   EVID <key>: <text>            evidence for the current case
# which `tools/vm-tests --table FILE` turns into the table in docs/reliability.md.
# Every workload task writes a line when it finishes; "nothing lost" means
# every line is there.
. ./lib.sh
NCPU=$(nproc)
T=/usr/local/bin/timeout
export RUST_BACKTRACE=0

case_() { echo "CASE $1 $2"; dmesg -c >/dev/null; }
evid() { k=$1; shift; echo "EVID $k: $*"; }

# The kernel's sched_ext lines since the case started (enable, disable,
# restart, ejection reasons), as evidence.
kernel_evidence() {
    dmesg | grep -E 'sched_ext|scx' | sed 's/^\[[ 0-9.]*\] //' | tail -n "${1:-6}" | while read -r l; do
        evid kernel "$l"
    done
}

# counter NAME: from `scx_wakelab stats --json` of the running instance.
counter() {
    scx_wakelab stats --json 2>/dev/null | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" | head -n 1
}
# exit_counter NAME LOG: from the exit stats line of a finished instance.
exit_counter() {
    sed -n 's/.*exit stats json: //p' "$2" | tail -n 1 | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}

# jobs ID N ROUNDS: N background jobs, each forking 2*ROUNDS short-lived
# processes through a pipe, then writing one line to /tmp/done.ID.
jobs_start() {
    rm -f "/tmp/done.$1"
    j=0
    while [ $j -lt "$2" ]; do
        ( i=0; while [ $i -lt "$3" ]; do echo $i | cat >/dev/null; i=$((i + 1)); done
          echo "job $j" >>"/tmp/done.$1" ) &
        j=$((j + 1))
    done
}
jobs_done() { [ -f "/tmp/done.$1" ] && wc -l <"/tmp/done.$1" || echo 0; }

# stress-ng (0.15 in the guest) says which stressors it started and whether
# every instance completed: "successful run completed" (else "unsuccessful").
stress_summary() {
    echo "$(sed -n 's/.*dispatching hogs: //p' "$1" | head -n 1) -> $(grep -oE '(un)?successful run completed' "$1" | head -n 1)"
}
stress_ok() { grep -q 'dispatching hogs' "$1" && grep -q ' successful run completed' "$1"; }

# one_line_error NAME EXPECTED_RC CMD...: the command fails with EXPECTED_RC
# (or any non-zero code if "nz"), one line on stderr, no panic or backtrace.
one_line_error() {
    name=$1; want=$2; shift 2
    "$@" >/tmp/bad.out 2>/tmp/bad.err
    rc=$?
    lines=$(grep -c . /tmp/bad.err)
    first=$(head -n 1 /tmp/bad.err)
    evid "$name" "\`$*\` -> exit $rc: $first"
    if [ "$rc" -ne 0 ] && { [ "$want" = nz ] || [ "$rc" = "$want" ]; } && [ "$lines" = 1 ] \
        && ! grep -qiE 'panicked|backtrace' /tmp/bad.err; then
        pass "$name"
    else
        fail "$name" "exit $rc, $lines stderr lines: $(head -c 300 /tmp/bad.err | tr '\n' ' ')"
    fi
}

wait_file_line() { # FILE PATTERN SECS
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt $(( $3 * 10 )) ]; do sleep 0.1; i=$((i + 1)); done
    grep -q "$2" "$1" 2>/dev/null
}

# states_seen SECS: the distinct sched_ext states seen over SECS seconds
# (by the clock, not a count of looks: each look forks, and a loaded TCG
# guest once stretched 16 looks 0.5 s apart to 20 s), in order, each after
# a space (" enabled" when it never changed).
states_seen() {
    local seen="" st end
    end=$(awk -v u="$(cut -d' ' -f1 /proc/uptime)" -v s="$1" 'BEGIN { print u + s }')
    while :; do
        st=$(sched_state); case " $seen " in *" $st "*) ;; *) seen="$seen $st" ;; esac
        awk -v u="$(cut -d' ' -f1 /proc/uptime)" -v e="$end" 'BEGIN { exit !(u < e) }' || break
        sleep 0.5
    done
    printf '%s' "$seen"
}
child_pid() { sed -n 's/.*scx_wakelab started (pid \([0-9]*\)).*/\1/p' "$1" | tail -n 1; }

# load_finished CASE ID: the load a case started (stress-ng as $STRESS with
# its output in /tmp/ID.stress, 16 fork-loop jobs of 40 rounds as ID) ran to
# the end: stress-ng exits 0 and every stressor and job completed.
load_finished() {
    wait $STRESS
    rc=$?
    expect_eq "$1_stress_ng_exit_0" "$rc" 0
    i=0; while [ "$(jobs_done "$2")" -lt 16 ] && [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done
    n=$(jobs_done "$2")
    evid completions "stress-ng exit $rc: $(stress_summary "/tmp/$2.stress"); fork-loop jobs done $n of 16 (1280 processes)"
    expect_eq "$1_every_task_finished" "$n $(stress_ok "/tmp/$2.stress" && echo ok)" "16 ok"
}

# load_start ID SECS STRESSORS...: the load load_finished checks: stress-ng
# for SECS with STRESSORS as $STRESS (its output in /tmp/ID.stress), and 16
# fork-loop jobs of 40 rounds as ID.
load_start() {
    ls_id=$1; ls_secs=$2; shift 2
    stress-ng -t "$ls_secs" "$@" --metrics-brief >"/tmp/$ls_id.stress" 2>&1 &
    STRESS=$!
    jobs_start "$ls_id" 16 40
}

# expect_state NAME STATE SECS: sched_ext reaches STATE within SECS seconds.
expect_state() {
    if wait_state "$2" "$3"; then pass "$1"; else fail "$1" "state $(sched_state)"; fi
}

# expect_gt NAME VALUE LIMIT DETAIL: VALUE is above LIMIT (either empty: 0);
# DETAIL says what was seen when it is not.
expect_gt() {
    if [ "${2:-0}" -gt "${3:-0}" ]; then pass "$1"; else fail "$1" "$4"; fi
}

# stop_sched NAME LINES: SIGINT to $SCHED, which exits 0 (check NAME); the
# last LINES kernel lines as evidence; then wait for sched_ext to disable.
stop_sched() {
    kill -INT $SCHED; wait $SCHED
    expect_eq "$1" "$?" 0
    kernel_evidence "$2"
    wait_state disabled 10 >/dev/null
}

# last_topology_is LOG N: the scheduler's latest topology line is N CPUs.
last_topology_is() { grep 'topology: ' "$1" | tail -n 1 | grep -q "topology: $2 CPUs online"; }

# restarted NAME LOG KEY CONDITION...: after a hotplug, CONDITION holds and
# the restarted scheduler (log in LOG) is enabled within 30 s; its restart
# request and new topology are evidence KEY.
restarted() {
    rs_name=$1; rs_log=$2; rs_key=$3; shift 3
    if "$@" && wait_state enabled 30; then
        pass "$rs_name"
    else fail "$rs_name" "state $(sched_state); $(grep -E 'loaded:|restart|EXIT' "$rs_log" | tail -n 3 | tr '\n' ' ')"; fi
    evid "$rs_key" "$(grep -E 'asked for a restart|topology:' "$rs_log" | sed 's/^.*topology/topology/;s/^.*the kernel/the kernel/' | tail -n 2 | tr '\n' ';')"
}

expect_eq state_disabled_before_tests "$(sched_state)" disabled
echo "EVID env: kernel $(uname -r), $NCPU CPUs, clock ${WAKELAB_CLOCK:-?}"

# --- 1. Bad input, no scheduler needed ----------------------------------------
case_ bad_input "every flag kind with out-of-range, malformed and conflicting values; bad explain scenario files; clients with no running instance"
one_line_error bad_unknown_flag 2 scx_wakelab --no-such-flag
one_line_error bad_slice_out_of_range 2 scx_wakelab --slice-us 0
one_line_error bad_slice_not_a_number 2 scx_wakelab --slice-us abc
one_line_error bad_stats_interval 2 scx_wakelab --stats 0
one_line_error bad_exit_dump_len 2 scx_wakelab --exit-dump-len=-5
one_line_error bad_preset 2 scx_wakelab --preset v4.19
one_line_error bad_set_malformed 2 scx_wakelab --set missing_equals
one_line_error bad_set_unknown_key 2 scx_wakelab --set no_such_flag=1
one_line_error bad_set_bad_value 2 scx_wakelab --set recent_used=sideways
one_line_error bad_set_out_of_range 2 scx_wakelab --set imbalance_pct_llc=5
one_line_error bad_set_conflict 2 scx_wakelab --set idle_scan=single-pass --set idle_candidate=false
one_line_error bad_restart_limit 2 scx_wakelab --supervise --restart-limit 0
one_line_error bad_restart_option_alone 2 scx_wakelab --restart-delay 2
one_line_error bad_idle_balance_option_alone 2 scx_wakelab --idle-balance-busy-us 500
one_line_error bad_idle_balance_busy_out_of_range 2 scx_wakelab --idle-balance --idle-balance-busy-us 2000000
echo '{"topology": ' >/tmp/truncated.json
echo '{"topology": {"nodes": "two"}}' >/tmp/wrongtype.json
one_line_error bad_explain_missing_file nz scx_wakelab explain /tmp/no-such-scenario.json
one_line_error bad_explain_truncated_json nz scx_wakelab explain /tmp/truncated.json
one_line_error bad_explain_wrong_field_type nz scx_wakelab explain /tmp/wrongtype.json
one_line_error bad_stats_no_instance 1 scx_wakelab stats
one_line_error bad_set_no_instance 1 scx_wakelab set wa_idle=false
one_line_error bad_monitor_no_instance 1 scx_wakelab stats --monitor 1
expect_eq state_still_disabled_after_bad_input "$(sched_state)" disabled

# --- 2. Ring-overflow storm, 45 s, scx CI protocol --------------------------
# A thread storm (stress-ng pthread: each worker creates up to 1024 threads
# that wait on a condition variable, then wakes them all with one broadcast),
# fork and clone storms and fork-loop jobs, for 45 s. The ring counts as full
# at $RING_LIMIT waiting messages (hidden --debug-ring-limit; the same
# fallback path): overflowing the real 8192 entries takes ~9000 threads woken
# at once, which under TCG leaves runnable tasks more than the watchdog's 5 s
# behind (measured with perf bench futex wake -t 9000: "watchdog failed to
# check in for 5.056s"), and an agent more than a second behind is bypassed
# before its ring fills (~100-600 decisions/s here), so the limit is small:
# 64 overflowed 741 times in one CI run and never in another (49412
# decisions, the agent kept up), hence 16.
RING_LIMIT=16
case_ storm "thread/fork storm for 45 s: stress-ng --pthread $NCPU --pthread-max 1024 --fork $NCPU --clone $NCPU, 16 fork-loop jobs; under \`timeout --preserve-status 80 scx_wakelab --debug-ring-limit $RING_LIMIT\`"
$T --foreground --preserve-status 80 scx_wakelab --debug-ring-limit $RING_LIMIT --stats 10 >/tmp/storm.sched 2>&1 &
SCHED=$!
expect_state storm_scheduler_enabled enabled 30
stress-ng -t 45 --pthread "$NCPU" --pthread-max 1024 --fork "$NCPU" --fork-max 256 --clone "$NCPU" \
    --clone-max 256 --metrics-brief >/tmp/storm.stress 2>&1 &
STRESS=$!
jobs_start storm 16 20
wait $STRESS
SRC=$?
expect_eq storm_stress_ng_exit_0 "$SRC" 0
if stress_ok /tmp/storm.stress; then pass storm_every_stressor_completed
else fail storm_every_stressor_completed "$(tail -n 3 /tmp/storm.stress | tr '\n' ' ')"; fi
# The jobs finish under our scheduler too (it runs until 80 s).
while [ "$(jobs_done storm)" -lt 16 ] && kill -0 $SCHED 2>/dev/null; do sleep 1; done
N=$(jobs_done storm)
if [ "$(sched_state)" = enabled ]; then LOADED="all under scx_wakelab"; else
    LOADED="the last after it unloaded at 80 s"
    i=0; while [ "$(jobs_done storm)" -lt 16 ] && [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done
    N=$(jobs_done storm)
fi
expect_eq storm_fork_jobs_all_done "$N" 16
wait $SCHED
RC=$?
evid completions "stress-ng exit $SRC: $(stress_summary /tmp/storm.stress); fork-loop jobs done $N of 16 (640 processes), $LOADED"
evid exit "scx_wakelab exit status $RC after SIGTERM at 80 s; $(grep -m1 'EXIT:' /tmp/storm.sched)"
expect_eq storm_scheduler_exit_0 "$RC" 0
RF=$(exit_counter nr_ring_full_fallbacks /tmp/storm.sched)
AD=$(exit_counter nr_agent_dispatches /tmp/storm.sched)
SF=$(exit_counter nr_agent_stall_fallbacks /tmp/storm.sched)
SR=$(exit_counter nr_stall_rescues /tmp/storm.sched)
evid counters "nr_ring_full_fallbacks $RF, nr_agent_stall_fallbacks $SF, nr_stall_rescues $SR, nr_agent_dispatches $AD"
expect_gt storm_ring_overflowed_into_fallback "$RF" 0 "nr_ring_full_fallbacks ${RF:-none}"
no_kernel_errors storm_no_stall_in_kernel_log
kernel_evidence 4
wait_state disabled 10 >/dev/null

# --- 3. SIGKILL of the agent mid-load, supervised ---------------------------
case_ sigkill "SIGKILL to the agent 5 s into a load, under \`scx_wakelab --supervise --restart-delay 3 --trace /tmp/kill.jsonl\`; then SIGTERM to the supervisor"
rm -f /tmp/kill.jsonl /tmp/kill.jsonl.2
scx_wakelab --supervise --restart-delay 3 --trace /tmp/kill.jsonl >/tmp/kill.sched 2>&1 &
SUP=$!
expect_state sigkill_scheduler_enabled enabled 30
CHILD=$(child_pid /tmp/kill.sched)
load_start kill 20 -c "$NCPU" -f "$NCPU"
# A CPU hog whose class /proc/PID/sched shows (ext.enabled 1: ours, 0: fair).
( while :; do :; done ) &
HOG=$!
ext_of() { grep 'ext.enabled' /proc/$1/sched 2>/dev/null | awk '{print $NF}'; }
sleep 5
BEFORE=$(ext_of $HOG)
kill -9 "$CHILD"
# The restart waits 3 s: the fair class has the tasks meanwhile.
expect_state sigkill_state_goes_disabled disabled 10
FAIR=$(ext_of $HOG)
expect_eq sigkill_tasks_back_on_fair_class "$BEFORE -> $FAIR" "1 -> 0"
expect_state sigkill_supervisor_brings_it_back enabled 40
AGAIN=$(ext_of $HOG)
evid sched_class "a CPU hog's ext.enabled: $BEFORE before the kill, $FAIR after it, $AGAIN after the restart"
expect_eq sigkill_tasks_back_on_ours_after_restart "$AGAIN" 1
kill $HOG
NEW=$(child_pid /tmp/kill.sched)
evid supervisor "$(grep -m1 'killed by signal' /tmp/kill.sched | sed 's/^.*supervisor/supervisor/'); new pid $NEW (was $CHILD)"
OPS=$(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)
case "$OPS" in wakelab*) pass sigkill_restarted_instance_is_ours ;; *) fail sigkill_restarted_instance_is_ours "root/ops '$OPS'" ;; esac
load_finished sigkill kill
# Ask for a decision from the restarted agent before stopping it.
D=$(counter nr_agent_dispatches)
evid counters "restarted agent: nr_agent_dispatches $D"
expect_gt sigkill_restarted_agent_places_tasks "$D" 0 "nr_agent_dispatches ${D:-none}"
# The restart traces to a file of its own; the killed run's trace stays.
evid traces "$(wc -l /tmp/kill.jsonl /tmp/kill.jsonl.2 2>&1 | grep -v total | tr '\n' ';')"
if [ -s /tmp/kill.jsonl ] && [ -s /tmp/kill.jsonl.2 ]; then pass sigkill_restart_traces_beside_the_first
else fail sigkill_restart_traces_beside_the_first "$(ls -l /tmp/kill.jsonl* 2>&1 | tr '\n' ' ')"; fi
kill -TERM "$SUP"
wait $SUP
RC=$?
expect_eq sigkill_supervisor_stops_cleanly_on_sigterm "$RC" 0
sleep 3
expect_eq sigkill_no_restart_after_sigterm "$(sched_state)" disabled
evid exit "supervisor exit $RC on SIGTERM; $(grep 'stopped on request' /tmp/kill.sched | sed 's/^.*supervisor/supervisor/')"
no_kernel_errors sigkill_no_stall_in_kernel_log
kernel_evidence 6

# --- 4. SIGSTOP of the agent past the watchdog timeout ----------------------
case_ sigstop "SIGSTOP to the agent for 8 s (watchdog timeout 5 s) under a load, supervised; then SIGCONT"
scx_wakelab --supervise --restart-delay 1 --exit-dump-len 32768 >/tmp/stop.sched 2>&1 &
SUP=$!
expect_state sigstop_scheduler_enabled enabled 30
CHILD=$(child_pid /tmp/stop.sched)
load_start stop 25 -c "$NCPU" -f "$NCPU"
sleep 3
SF0=$(counter nr_agent_stall_fallbacks); AD0=$(counter nr_agent_dispatches); SR0=$(counter nr_stall_rescues)
STOP_AT=$(cut -d' ' -f1 /proc/uptime)
kill -STOP "$CHILD"
SEEN=$(states_seen 8)
kill -CONT "$CHILD"
evid state "states seen while stopped:$SEEN; stopped for $(awk -v s="$STOP_AT" -v e="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.1f", e - s }') s"
expect_eq sigstop_never_ejected "$SEEN" " enabled"
if [ "$SEEN" != " enabled" ]; then
    sleep 2
    evid ejection "$(grep -m1 'EXIT:' /tmp/stop.sched)"
    echo "--- supervised scheduler's log after the ejection (exit dump) ---"
    grep -v '^\s*$' /tmp/stop.sched | grep -A80 -m1 'DEBUG DUMP' | head -n 80
fi
sleep 3
SF1=$(counter nr_agent_stall_fallbacks); AD1=$(counter nr_agent_dispatches); SR1=$(counter nr_stall_rescues)
sleep 3
AD2=$(counter nr_agent_dispatches)
evid counters "nr_agent_stall_fallbacks $SF0 -> $SF1; nr_stall_rescues (tasks already waiting for the stopped agent) $SR0 -> $SR1; nr_agent_dispatches $AD0 -> $AD1 -> $AD2 (3 s after SIGCONT, 6 s after)"
expect_gt sigstop_stall_fallback_counted "$SF1" "$SF0" "$SF0 -> $SF1"
expect_gt sigstop_agent_places_again_after_sigcont "$AD2" "$AD1" "$AD1 -> $AD2"
expect_eq sigstop_same_instance "$(child_pid /tmp/stop.sched)" "$CHILD"
grep -q 'stopped responding' /tmp/stop.sched && evid supervisor "$(grep -m1 'stopped responding' /tmp/stop.sched)"
load_finished sigstop stop
no_kernel_errors sigstop_no_stall_in_kernel_log
kill -TERM "$SUP"
wait $SUP
RC=$?
expect_eq sigstop_supervisor_exit_0 "$RC" 0
kernel_evidence 6
wait_state disabled 10 >/dev/null

# --- 4b. The agent stopped or killed with decisions half carried out ----------
# --debug-half-apply: 2 s after load the agent carries out half a batch,
# leaves the other half recorded in BPF but not carried out, and stops or
# kills itself. The recorded half must still reach its CPUs (the heartbeat,
# or a rescue before it moves the rest, carries decisions out without the
# agent), the undecided parked tasks must be rescued, and nothing may be lost
# or ejected.
case_ half_applied_stop "fast lane: SIGSTOP of the agent with a batch half carried out (\`--debug-half-apply stop\`) under a load, 8 s; then SIGCONT"
scx_wakelab --debug-half-apply stop >/tmp/half.sched 2>&1 &
SCHED=$!
expect_state half_stop_scheduler_enabled enabled 30
load_start half 20 -c "$NCPU" -f "$NCPU"
# The agent stops itself once it has run 2 s and has a batch of two or more.
i=0; while [ "$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' /proc/$SCHED/status 2>/dev/null)" != T ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
STOPPED=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' /proc/$SCHED/status 2>/dev/null)
expect_eq half_stop_agent_stopped_itself "$STOPPED" T
SEEN=$(states_seen 8)
kill -CONT $SCHED
evid state "states seen while stopped:$SEEN"
expect_eq half_stop_never_ejected "$SEEN" " enabled"
sleep 3
LATE=$(counter nr_applied_late); RESC=$(counter nr_stall_rescues); FB=$(counter nr_agent_stall_fallbacks)
evid counters "decisions carried out without the agent, by the heartbeat or a rescue (nr_applied_late) $LATE; parked tasks rescued $RESC; tasks sent past the stopped agent $FB"
expect_gt half_stop_recorded_half_carried_out "$LATE" 0 "nr_applied_late ${LATE:-none}"
expect_gt half_stop_load_bypassed_the_stopped_agent "$FB" 0 "nr_agent_stall_fallbacks ${FB:-none}"
load_finished half_stop half
no_kernel_errors half_stop_no_stall_in_kernel_log
stop_sched half_stop_scheduler_exit_0 4

case_ half_applied_kill "fast lane: SIGKILL of the agent with a batch half carried out (\`--debug-half-apply kill\`) under a load; then a new instance"
scx_wakelab --debug-half-apply kill >/tmp/halfk.sched 2>&1 &
SCHED=$!
expect_state half_kill_scheduler_enabled enabled 30
load_start halfk 20 -c "$NCPU" -f "$NCPU"
wait $SCHED
RC=$?
expect_eq half_kill_agent_killed_itself "$RC" 137
# Its death hands every task back to the fair class, parked ones included.
expect_state half_kill_state_goes_disabled disabled 10
scx_wakelab >/tmp/halfk2.sched 2>&1 &
SCHED=$!
expect_state half_kill_new_instance_loads enabled 30
load_finished half_kill halfk
no_kernel_errors half_kill_no_stall_in_kernel_log
stop_sched half_kill_new_instance_exit_0 4

# --- 4c. A CPU goes offline while tasks are parked -----------------------------
HOT=3
case_ parked_hotplug "CPU $HOT offline while the agent is stopped (SIGSTOP) and woken tasks wait parked for it, under a load; then SIGCONT and CPU $HOT online"
scx_wakelab >/tmp/ph.sched 2>&1 &
SCHED=$!
expect_state parked_hotplug_scheduler_enabled enabled 30
load_start ph 20 -c "$NCPU" -f "$NCPU"
sleep 2
kill -STOP $SCHED
# Within the stall threshold (1 s): woken tasks are still parked.
sleep 0.3
echo 0 >/sys/devices/system/cpu/cpu$HOT/online
sleep 1
kill -CONT $SCHED
restarted parked_hotplug_restarts_with_fewer_cpus /tmp/ph.sched restart \
    wait_file_line /tmp/ph.sched "topology: $((NCPU - 1)) CPUs online" 60
echo 1 >/sys/devices/system/cpu/cpu$HOT/online
load_finished parked_hotplug ph
i=0; while [ "$(grep -c 'topology: ' /tmp/ph.sched)" -lt 3 ] && [ $i -lt 60 ]; do sleep 1; i=$((i + 1)); done
expect_eq parked_hotplug_same_process "$(kill -0 $SCHED 2>/dev/null && echo alive)" alive
no_kernel_errors parked_hotplug_no_stall_in_kernel_log
stop_sched parked_hotplug_scheduler_exit_0 6

# --- 5. CPU offline and online ------------------------------------------------
HOT=3
case_ hotplug "CPU $HOT offline, then online, under a load; plus runtime \`set\` with an unknown flag and value"
$T --foreground --preserve-status 400 scx_wakelab >/tmp/hot.sched 2>&1 &
SCHED=$!
expect_state hotplug_scheduler_enabled enabled 30
one_line_error runtime_set_unknown_key 2 scx_wakelab set no_such_flag=1
one_line_error runtime_set_bad_value 2 scx_wakelab set recent_used=sideways
one_line_error runtime_set_malformed 2 scx_wakelab set wa_idle
expect_eq runtime_bad_set_leaves_scheduler_running "$(sched_state)" enabled
load_start hot 25 -c "$NCPU" -f "$NCPU"
sleep 3
echo 0 >/sys/devices/system/cpu/cpu$HOT/online
restarted hotplug_offline_restarts_with_fewer_cpus /tmp/hot.sched after_offline \
    wait_file_line /tmp/hot.sched "topology: $((NCPU - 1)) CPUs online" 90
sleep 3
echo 1 >/sys/devices/system/cpu/cpu$HOT/online
i=0; while [ "$(grep -c 'topology: ' /tmp/hot.sched)" -lt 3 ] && [ $i -lt 90 ]; do sleep 1; i=$((i + 1)); done
restarted hotplug_online_restarts_with_all_cpus /tmp/hot.sched after_online \
    last_topology_is /tmp/hot.sched "$NCPU"
expect_eq hotplug_same_process "$(kill -0 $SCHED 2>/dev/null && echo alive)" alive
load_finished hotplug hot
kill -TERM $SCHED 2>/dev/null
wait $SCHED
RC=$?
evid exit "scx_wakelab exit status $RC after SIGTERM; loads: $(grep -c 'loaded:' /tmp/hot.sched)"
echo "--- hotplug scheduler log (restarts) ---"; grep -E 'restart|topology|loaded|EXIT' /tmp/hot.sched
expect_eq hotplug_scheduler_exit_0 "$RC" 0
no_kernel_errors hotplug_no_stall_in_kernel_log
kernel_evidence 8
wait_state disabled 10 >/dev/null

# --- 6. Another scheduler already loaded ------------------------------------
# Without scx_rlfifo in the guest (tools/peers not built), a second
# scx_wakelab on its own socket: else the socket check refuses first.
if command -v scx_rlfifo >/dev/null; then OTHER=scx_rlfifo; else OTHER="scx_wakelab --socket /run/other-wakelab.sock"; fi
case_ other_scheduler "$OTHER loaded first; then scx_wakelab, and scx_wakelab --supervise --restart-limit 2"
$OTHER >/tmp/other.log 2>&1 &
OTHERPID=$!
expect_state other_scheduler_enabled enabled 30
OPS=$(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)
evid loaded "root/ops: $OPS"
one_line_error other_scheduler_refused_clearly 1 scx_wakelab
if grep -q "already running ($OPS" /tmp/bad.err; then pass other_scheduler_named; else fail other_scheduler_named "$(cat /tmp/bad.err)"; fi
$T 60 scx_wakelab --supervise --restart-limit 2 --restart-delay 0.5 >/tmp/other.sup 2>&1
RC=$?
evid supervisor "exit $RC: $(tail -n 1 /tmp/other.sup)"
if [ $RC = 1 ] && tail -n 1 /tmp/other.sup | grep -q 'failed 2 times in a row.*giving up' \
    && [ "$(grep -c 'already running' /tmp/other.sup)" = 2 ] && ! grep -q panicked /tmp/other.sup; then
    pass other_scheduler_supervisor_gives_up
else fail other_scheduler_supervisor_gives_up "exit $RC: $(tail -n 2 /tmp/other.sup | tr '\n' ' ')"; fi
expect_eq other_scheduler_undisturbed "$(sched_state) $(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)" "enabled $OPS"
kill -INT $OTHERPID
wait $OTHERPID
expect_state other_scheduler_unloads disabled 20
kernel_evidence 4

# --- 7. Hostile local users and socket clients (issue 14) --------------------
# An unprivileged user must not read stats or set flags; a root client that
# sends 100 MB without a newline, or one byte every 4 s, is cut off while
# others are served, and loses no decision. The load is paced (cyclictest: 4
# threads waking every 4 ms). The decision rate with and without the clients
# is recorded as evidence, not judged: under TCG on a busy host it drifts
# more than any bound a check could hold (a timing comparison belongs in a
# benchmark, not in the test suite).
case_ hostile_clients "nobody runs stats, set and a flood; root runs, 3 times, a 100 MB flood and 3 one-byte-per-4-s clients beside cyclictest -t 4 -i 4000"
$T --foreground --preserve-status 600 scx_wakelab >/tmp/host.sched 2>&1 &
SCHED=$!
expect_state hostile_scheduler_enabled enabled 30
i=0; until scx_wakelab stats --json >/dev/null 2>&1 || [ $i -ge 100 ]; do sleep 0.2; i=$((i + 1)); done
evid socket "$(ls -l /var/run/scx/root/stats | awk '{print $1, $3, $4}')"
case "$(ls -l /var/run/scx/root/stats | cut -c1-10)" in srw-------) pass socket_private ;;
*) fail socket_private "$(ls -l /var/run/scx/root/stats)" ;; esac
CHANGES0=$(counter config_changes)
su -s /bin/sh nobody -c 'scx_wakelab stats' >/tmp/nobody.out 2>/tmp/nobody.err
rc=$?
evid nobody_stats "exit $rc, $(wc -c </tmp/nobody.out) bytes of stats, stderr: $(head -n 1 /tmp/nobody.err)"
if [ $rc -ne 0 ] && [ ! -s /tmp/nobody.out ] && [ "$(grep -c . /tmp/nobody.err)" = 1 ]; then pass unprivileged_cannot_read_stats
else fail unprivileged_cannot_read_stats "exit $rc: $(head -c 200 /tmp/nobody.out) $(head -c 200 /tmp/nobody.err)"; fi
su -s /bin/sh nobody -c 'scx_wakelab set wa_idle=false' >/tmp/nobody.out 2>/tmp/nobody.err
rc=$?
evid nobody_set "exit $rc, stderr: $(head -n 1 /tmp/nobody.err)"
if [ $rc -ne 0 ] && [ "$(counter config_changes)" = "$CHANGES0" ]; then pass unprivileged_cannot_set_flags
else fail unprivileged_cannot_set_flags "exit $rc, config_changes $CHANGES0 -> $(counter config_changes)"; fi
if command -v sockclient >/dev/null; then
    su -s /bin/sh nobody -c 'sockclient flood /var/run/scx/root/stats 1000000' >/tmp/nobody.flood 2>&1
    evid nobody_flood "$(cat /tmp/nobody.flood)"
    if grep -q 'cannot connect' /tmp/nobody.flood; then pass unprivileged_cannot_connect
    else fail unprivileged_cannot_connect "$(cat /tmp/nobody.flood)"; fi
fi

# decisions_per_s SECS: the agent's decision rate over SECS.
decisions_per_s() {
    d0=$(counter nr_decisions); t0=$(cut -d' ' -f1 /proc/uptime)
    sleep "$1"
    d1=$(counter nr_decisions); t1=$(cut -d' ' -f1 /proc/uptime)
    awk -v a="$d0" -v b="$d1" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.0f", (b - a) / (e - s) }'
}
# hostile_round N: a 100 MB flood and 3 one-byte-per-4-s clients, started
# together; their reports in /tmp/flood.N and /tmp/drip.N.K.
hostile_round() {
    CLIENTS=
    for k in 1 2 3; do
        sockclient drip /var/run/scx/root/stats 12 4 >/tmp/drip.$1.$k 2>&1 &
        CLIENTS="$CLIENTS $!"
    done
    sockclient flood /var/run/scx/root/stats 100000000 >/tmp/flood.$1 2>&1 &
    CLIENTS="$CLIENTS $!"
}
# decisions_per_s SECS, with cyclictest beside it; its latency in /tmp/cyc.out.
paced_window() {
    cyclictest -q -t 4 -i 4000 -d 0 -D "$1" >/tmp/cyc.out 2>&1 &
    CYC=$!
    decisions_per_s "$1"
    wait $CYC
}
# cyclictest's average and max wake-up latency (us) over its threads.
cyc_latency() {
    sed -n 's/.*Avg: *\([0-9]*\) Max: *\([0-9]*\).*/\1 \2/p' /tmp/cyc.out |
        awk '{ a += $1; if ($2 > m) m = $2; n++ } END { if (n) printf "avg %.0f max %d", a / n, m; else printf "none" }'
}
# Rounds of an undisturbed window, then one with the hostile clients.
ROUNDS=3
WINDOW=8
QUIET=; LOUD=; QLAT=; LLAT=
if command -v sockclient >/dev/null && command -v cyclictest >/dev/null; then
    # One window first, not counted: the first after the scheduler loads can
    # run well below the rest (docs/benchmarks/fast-lane-notes.md).
    WARM=$(paced_window 4)
    evid decision_rate_warmup "decisions/s in a first 4 s window, not counted: $WARM"
    LOST0=$(counter nr_lost_decisions); RESC0=$(counter nr_stall_rescues)
    r=0
    while [ $r -lt $ROUNDS ]; do
        r=$((r + 1))
        QUIET="$QUIET $(paced_window $WINDOW)"
        QLAT="$QLAT; $(cyc_latency)"
        hostile_round $r
        if [ $r = 1 ]; then
            # While the three drips hold their connections (1 s in, of the 5 s
            # the server gives them), an ordinary request is answered.
            ( sleep 1; t0=$(cut -d' ' -f1 /proc/uptime)
              $T 5 scx_wakelab stats --json >/tmp/stats.during 2>&1
              echo "$? $(awk -v s="$t0" -v e="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.1f", e - s }')" >/tmp/stats.took ) &
            ASK=$!
        fi
        LOUD="$LOUD $(paced_window $WINDOW)"
        LLAT="$LLAT; $(cyc_latency)"
        if [ $r = 1 ]; then
            wait $ASK
            read -r rc took </tmp/stats.took
            evid stats_beside_clients "asked 1 s after the clients connected: exit $rc in ${took} s"
            if [ "$rc" = 0 ] && grep -q nr_decisions /tmp/stats.during; then pass stats_answered_beside_hostile_clients
            else fail stats_answered_beside_hostile_clients "exit $rc: $(head -c 200 /tmp/stats.during)"; fi
        fi
        # The server hangs up on the drips at 5 s; they stop when they see it.
        wait $CLIENTS
    done
    # A parked task rescued while the agent kept up lost its decision on the
    # way: it waited agent_stall_ns (1 s) for nothing (the race fixed in
    # 6d414e0, docs/benchmarks/fast-lane-notes.md).
    LOST1=$(counter nr_lost_decisions); RESC1=$(counter nr_stall_rescues)
    evid lost_decisions "nr_lost_decisions $LOST0 -> $LOST1, nr_stall_rescues $RESC0 -> $RESC1 over $r pairs of $WINDOW s windows"
    if [ -n "$LOST0" ] && [ "$LOST1" = "$LOST0" ]; then pass no_decision_lost_under_paced_load
    else fail no_decision_lost_under_paced_load "nr_lost_decisions '$LOST0' -> '$LOST1'"; fi
    evid flood "$(cat /tmp/flood.1)"
    for k in 1 2 3; do evid "drip$k" "$(cat /tmp/drip.1.$k)"; done
    cut_floods=$(cat /tmp/flood.* | grep "request longer than 4096 bytes" | sed -n 's/.*server took \([0-9]*\) of.*/\1/p' | awk '$1 < 10000000' | wc -l)
    if [ "$cut_floods" = "$r" ]; then pass flood_client_cut_off
    else fail flood_client_cut_off "$cut_floods of $r floods cut off: $(cat /tmp/flood.* | tr '\n' ' ')"; fi
    cut_drips=$(cat /tmp/drip.*.* | grep -c 'held [0-7]\.[0-9] s, then: the server')
    if [ "$cut_drips" = $((3 * r)) ]; then pass slow_clients_cut_off
    else fail slow_clients_cut_off "$cut_drips of $((3 * r)) cut off: $(cat /tmp/drip.1.* | tr '\n' ' ')"; fi
else
    fail hostile_clients_built "sockclient or cyclictest missing in the guest (tools/vm-tests builds tests/vm/sockclient.c with the host's C compiler and copies the host's cyclictest)"
fi
evid decision_rate "decisions/s in $WINDOW s windows, undisturbed:$QUIET; with the clients:$LOUD"
evid wakeup_latency "cyclictest us, undisturbed$QLAT; with the clients$LLAT"
expect_eq hostile_scheduler_still_enabled "$(sched_state)" enabled
kill -TERM $SCHED 2>/dev/null
wait $SCHED
expect_eq hostile_scheduler_exit_0 "$?" 0
no_kernel_errors hostile_no_stall_in_kernel_log

# --- 8. A fork storm through a small per-task table --------------------------
# --task-table-size 64 (its floor) against 2 rounds of 1280 short-lived
# processes: the table evicts instead of growing, and the agent's peak
# resident memory does not grow from the first round to the second.
case_ task_table_storm "scx_wakelab --task-table-size 64; twice 16 fork-loop jobs of 40 rounds (1280 processes) beside stress-ng fork"
$T --foreground --preserve-status 300 scx_wakelab --task-table-size 64 >/tmp/tt.sched 2>&1 &
SCHED=$!
expect_state storm_scheduler_enabled enabled 30
i=0; until scx_wakelab stats --json >/dev/null 2>&1 || [ $i -ge 100 ]; do sleep 0.2; i=$((i + 1)); done
AGENT=
for d in /proc/[0-9]*; do
    [ "$(cat "$d/comm" 2>/dev/null)" = scx_wakelab ] && grep -q task-table-size "$d/cmdline" 2>/dev/null && AGENT=${d#/proc/}
done
vm() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$AGENT/status"; }
evid start "agent pid $AGENT: VmRSS $(vm VmRSS) kB, VmHWM $(vm VmHWM) kB"
for round in 1 2; do
    load_start "tt$round" 15 -f "$NCPU"
    load_finished storm_round$round tt$round
    eval "HWM$round=$(vm VmHWM)"
    evid "round$round" "VmRSS $(vm VmRSS) kB, VmHWM $(vm VmHWM) kB, task_evictions $(counter task_evictions), nr_decisions $(counter nr_decisions)"
done
EV=$(counter task_evictions)
expect_gt storm_table_evicts "$EV" 1000 "task_evictions ${EV:-none}"
if [ -n "$HWM1" ] && [ "$HWM2" -le $((HWM1 + 1024)) ]; then pass storm_agent_memory_bounded
else fail storm_agent_memory_bounded "VmHWM after round 1 ${HWM1:-?} kB, after round 2 ${HWM2:-?} kB"; fi
expect_eq storm_scheduler_still_enabled "$(sched_state)" enabled
kill -TERM $SCHED 2>/dev/null
wait $SCHED
expect_eq storm_scheduler_exit_0 "$?" 0
no_kernel_errors storm_no_stall_in_kernel_log

# --- 9. The handoff: decisions taken from memory by ops.enqueue() -------------
# Wake-ups are sent from ops.select_cpu() and, when the polling agent decides
# before the enqueue, carried out by the enqueue itself (bpf/intf.h,
# wl_shared.handoff). Under a ping-pong pair (which has the wakee's CPU woken by
# an IPI after the waker's select) some must be, beside a fork/thread load that
# races requeues and exits with the slots; no decision may be lost (rescued
# while the agent kept up), and --agent-handoff false must send none.
case_ handoff "perf bench sched pipe beside a stress-ng fork/pthread load, under scx_wakelab, then under --agent-handoff false"
$T --foreground --preserve-status 300 scx_wakelab >/tmp/ho.sched 2>&1 &
SCHED=$!
expect_state handoff_scheduler_enabled enabled 30
i=0; until scx_wakelab stats --json >/dev/null 2>&1 || [ $i -ge 100 ]; do sleep 0.2; i=$((i + 1)); done
load_start ho 10 -f "$NCPU" --pthread 2
perf bench sched pipe -l 20000 >/tmp/ho.pipe 2>&1
load_finished handoff ho
perf bench sched pipe -l 5000 >>/tmp/ho.pipe 2>&1
HO=$(counter nr_handoffs); HM=$(counter nr_handoff_msgs); HB=$(counter nr_handoff_slot_busy)
ND=$(counter nr_decisions); LOST=$(counter nr_lost_decisions); RESC=$(counter nr_stall_rescues)
evid counters "nr_decisions $ND, nr_handoff_msgs $HM, nr_handoffs $HO, nr_handoff_slot_busy $HB, nr_lost_decisions $LOST, nr_stall_rescues $RESC; sched pipe $(grep usecs/op /tmp/ho.pipe | tr -s ' ' | tr '\n' ';')"
expect_gt handoff_decisions_taken_by_enqueue "$HO" 0 "nr_handoffs ${HO:-none}"
expect_eq handoff_no_decision_lost "${LOST:-x}" 0
expect_eq handoff_scheduler_still_enabled "$(sched_state)" enabled
no_kernel_errors handoff_no_stall_in_kernel_log
kill -TERM $SCHED 2>/dev/null
wait $SCHED
expect_eq handoff_scheduler_exit_0 "$?" 0
$T --foreground --preserve-status 300 scx_wakelab --agent-handoff false >/tmp/ho2.sched 2>&1 &
SCHED=$!
expect_state handoff_off_scheduler_enabled enabled 30
i=0; until scx_wakelab stats --json >/dev/null 2>&1 || [ $i -ge 100 ]; do sleep 0.2; i=$((i + 1)); done
perf bench sched pipe -l 5000 >/dev/null 2>&1
HM=$(counter nr_handoff_msgs); ND=$(counter nr_decisions)
evid counters_off "nr_decisions $ND, nr_handoff_msgs $HM"
expect_eq handoff_off_sends_none "${HM:-x}" 0
expect_gt handoff_off_still_decides "$ND" 5000 "nr_decisions ${ND:-none}"
kill -TERM $SCHED 2>/dev/null
wait $SCHED
expect_eq handoff_off_scheduler_exit_0 "$?" 0
