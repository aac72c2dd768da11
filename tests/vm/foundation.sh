#!/bin/sh
# Foundation checks (issue 2), run inside the VM by tools/vm-tests.
. ./lib.sh
NCPU=$(nproc)

expect_eq state_disabled_before_load "$(sched_state)" disabled

# --- Load, hackbench, the scx CI stress protocol, clean exit ---------------
# The scheduler's life is bounded from when it is enabled, not from its start:
# loading (the verifier, under TCG) takes tens of seconds, more beside a load,
# so a fixed lifetime from the start could end before the workloads below
# ran. 300 s is only a safety bound; the suite stops it with SIGTERM.
dmesg -c >/dev/null
/usr/local/bin/timeout --foreground --preserve-status 300 scx_wakelab -v --stats 5 >/tmp/sched.log 2>&1 &
SCHED=$!

if wait_state enabled 120; then pass state_enabled_after_load; else fail state_enabled_after_load "state $(sched_state)"; fi
OPS=$(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)
case "$OPS" in wakelab*) pass root_ops_names_us ;; *) fail root_ops_names_us "root/ops is '$OPS'" ;; esac
stress-ng -t 31 --aggressive -M -c "$NCPU" -f "$NCPU" --affinity 1 --affinity-delay 1 --affinity-pin \
    >/tmp/stress.log 2>&1 &
STRESS=$!

# A second instance must refuse, naming the running one (checked first,
# while the first instance is surely still loaded).
# Bounded: if it wrongly loaded, it must not hang the suite.
/usr/local/bin/timeout 20 scx_wakelab >/tmp/second.log 2>&1
RC=$?
if [ $RC -ne 0 ] && grep -q 'already running' /tmp/second.log; then pass error_another_scheduler_running
else fail error_another_scheduler_running "rc=$RC: $(head -c 300 /tmp/second.log)"; fi
# With sockets of its own, the second instance reaches the kernel's state.
/usr/local/bin/timeout 20 scx_wakelab --socket /tmp/second.sock >/tmp/second-own-socket.log 2>&1
RC=$?
if [ $RC -ne 0 ] && grep -q 'another sched_ext scheduler is already running (wakelab' /tmp/second-own-socket.log; then
    pass error_another_scheduler_running_own_socket
else fail error_another_scheduler_running_own_socket "rc=$RC: $(head -c 300 /tmp/second-own-socket.log)"; fi

check hackbench_pipes hackbench -p -g 4 -l 200
check hackbench_sockets hackbench -g 4 -l 200

wait $STRESS
RC=$?
expect_eq stress_ng_completes "$RC" 0
kill -TERM $SCHED # timeout passes SIGTERM on to scx_wakelab
wait $SCHED
RC=$?
expect_eq scheduler_exits_0_after_sigterm "$RC" 0
if wait_state disabled 10; then pass state_disabled_after_exit; else fail state_disabled_after_exit "state $(sched_state)"; fi
no_kernel_errors no_stall_or_error_in_kernel_log
if grep -q 'EXIT: unregistered from user space' /tmp/sched.log; then pass exit_reason_is_unregister
else fail exit_reason_is_unregister "$(grep -m1 EXIT: /tmp/sched.log)"; fi
echo "DATA foundation_exit_stats $(sed -n 's/.*exit stats json: //p' /tmp/sched.log | tail -n 1)"
echo "--- scheduler log (tail) ---"; tail -n 12 /tmp/sched.log

# --- Error cases --------------------------------------------------------------
scx_wakelab --debug-break-verifier >/tmp/verifier.log 2>&1
RC=$?
if [ $RC -ne 0 ] && grep -q 'the verifier said: .*invalid mem access' /tmp/verifier.log && ! grep -q panicked /tmp/verifier.log
then pass error_bpf_load_names_verifier_reason
else fail error_bpf_load_names_verifier_reason "rc=$RC: $(grep -m1 error: /tmp/verifier.log)"; fi
expect_eq state_disabled_after_load_failure "$(sched_state)" disabled

su -s /bin/sh nobody -c scx_wakelab >/tmp/nonroot.log 2>&1
RC=$?
if [ $RC -ne 0 ] && grep -q 'must run as root' /tmp/nonroot.log; then pass error_not_root
else fail error_not_root "rc=$RC: $(head -c 300 /tmp/nonroot.log)"; fi
