# Helpers for guest-side test scripts (busybox sh). busybox runs its own applets
# before PATH lookups, so coreutils tools are called by full path
# (/usr/local/bin/timeout for --preserve-status). Each check prints one line
#   CHECK <PASS|FAIL> <name> [detail]
# which the host runner (tools/vm-tests) counts. DATA lines carry JSON for
# host-side assertions.

check() { # name, then a command; PASS if it succeeds
    name=$1; shift
    if "$@" >/tmp/check.out 2>&1; then
        echo "CHECK PASS $name"
    else
        echo "CHECK FAIL $name: $(tail -n 3 /tmp/check.out | tr '\n' ' ')"
    fi
}

pass() { echo "CHECK PASS $1"; }
fail() { echo "CHECK FAIL $1: $2"; }

expect_eq() { # name, actual, expected
    if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got '$2', want '$3'"; fi
}

sched_state() { cat /sys/kernel/sched_ext/state 2>/dev/null; }

# wait_state STATE SECS: poll until /sys/kernel/sched_ext/state reads STATE.
wait_state() {
    i=0
    while [ "$(sched_state)" != "$1" ] && [ $i -lt $(( $2 * 10 )) ]; do
        sleep 0.1; i=$((i + 1))
    done
    [ "$(sched_state)" = "$1" ]
}

# Kernel log lines that mean a scheduler was ejected for misbehaving.
kernel_errors() {
    dmesg | grep -iE 'runnable task stall|failed to run for|scx_bpf_error|sched_ext:.*(error|disabled).*(stall|BPF)|BUG:|Oops' || true
}

# no_kernel_errors NAME: PASS if the kernel logged no ejection or oops.
no_kernel_errors() {
    errs=$(kernel_errors)
    if [ -z "$errs" ]; then pass "$1"; else fail "$1" "$errs"; fi
}
