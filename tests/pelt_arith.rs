//! The state estimator's arithmetic (bpf/pelt.bpf.h), built for the host with clang-19 (the
//! compiler the BPF build needs anyway) and driven through scenarios whose outcome the
//! kernel's PELT fixes: its decay table, its saturation, its half-life, that an average
//! does not depend on how often it is updated, and that a task moving between CPUs takes
//! its load with it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The C driver: each scenario prints `name value` lines.
const DRIVER: &str = r#"
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;
typedef int64_t s64;
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#define PELT_ARITHMETIC_ONLY
#include "pelt.bpf.h"

#define MS 1000000ULL

static void run(struct pelt_task *t, u64 from, u64 to, u64 step)
{
	for (u64 now = from + step; now <= to; now += step)
		pelt_task_update(t, now);
}

int main(void)
{
	struct pelt_task t = { .cpu = -1, .queued = 1, .running = 1, .weight = 1024 };
	struct pelt_task u = t, v = t;
	struct pelt_cpu a = { 0 }, b = { 0 };

	for (int n = 0; n < PELT_PERIOD; n++)
		printf("y_inv%d %u\n", n, pelt_y_inv[n]);
	printf("decay_half %llu\n", (unsigned long long)pelt_decay(1ULL << 40, PELT_PERIOD));
	printf("decay_big %llu\n", (unsigned long long)pelt_decay(~0ULL >> 1, 1));

	/* Queued and running for 2 s, updated every ms: saturated. */
	run(&t, 0, 2000 * MS, MS);
	printf("sat_load %llu\nsat_util %llu\n", (unsigned long long)t.avg.load_avg,
	       (unsigned long long)t.avg.util_avg);
	/* Asleep for one half-life (32 periods of 1024 us): half of it is left. */
	t.queued = t.running = 0;
	pelt_task_update(&t, 2000 * MS + 32 * 1024 * 1024ULL);
	printf("half_load %llu\nhalf_util %llu\n", (unsigned long long)t.avg.load_avg,
	       (unsigned long long)t.avg.util_avg);

	/* From nothing, running for one half-life: about half of the saturated value. */
	u.avg.last_update_time = 0;
	run(&u, 0, 32 * 1024 * 1024ULL, 1024 * 1024ULL);
	printf("rise_util %llu\n", (unsigned long long)u.avg.util_avg);

	/* The same 300 ms of 1-in-3 running, updated every 10 us and at each edge only. */
	u = v;
	for (u64 now = 0; now < 300 * MS; now += 10000) {
		u.running = u.queued = (now / MS) % 3 == 0;
		pelt_task_update(&u, now + 10000);
	}
	for (u64 ms = 0; ms < 300; ms++) {
		v.running = v.queued = ms % 3 == 0;
		pelt_task_update(&v, (ms + 1) * MS);
	}
	printf("fine_load %llu\ncoarse_load %llu\n", (unsigned long long)u.avg.load_avg,
	       (unsigned long long)v.avg.load_avg);

	/* A task with load L moves from CPU a to CPU b: b has it at once, a at its next update. */
	a.avg.last_update_time = b.avg.last_update_time = 500 * MS;
	t.avg.load_avg = 600;
	t.avg.util_avg = 300;
	t.avg.last_update_time = 500 * MS;
	t.cpu = -1;
	pelt_task_attach(&a, 0, &t);
	printf("a_after_attach %llu\n", (unsigned long long)a.avg.load_avg);
	pelt_task_remove(&a, &t);
	pelt_task_attach(&b, 1, &t);
	printf("b_after_move %llu\na_before_update %llu\n", (unsigned long long)b.avg.load_avg,
	       (unsigned long long)a.avg.load_avg);
	pelt_cpu_update(&a, 500 * MS + 2000);
	printf("a_after_update %llu\ncpu_of_task %d\n", (unsigned long long)a.avg.load_avg, t.cpu);
	/* Balancing takes a queued task off b at once. */
	pelt_task_detach(&b, &t);
	printf("b_after_detach %llu\n", (unsigned long long)b.avg.load_avg);
	return 0;
}
"#;

fn build_and_run() -> Vec<(String, u64)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir: PathBuf = std::env::temp_dir().join(format!("wakelab-pelt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("driver.c");
    let exe = dir.join("driver");
    std::fs::write(&src, DRIVER).unwrap();
    let out = Command::new("clang-19")
        .args(["-O2", "-Wall", "-Werror", "-I"])
        .arg(root.join("bpf"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("clang-19 runs (tools/install-deps installs it)");
    assert!(
        out.status.success(),
        "the driver does not build:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn the_estimator_follows_the_kernels_pelt() {
    let got = build_and_run();
    let val = |k: &str| -> u64 {
        got.iter()
            .find(|(n, _)| n == k)
            .unwrap_or_else(|| panic!("the driver printed no {k}"))
            .1
    };
    // The decay table: floor((2^32 - 1) * y^n), y^32 = 1/2.
    for n in 0..32 {
        let want = ((u32::MAX as f64) * 0.5f64.powf(n as f64 / 32.0)).floor() as u64;
        assert_eq!(val(&format!("y_inv{n}")), want, "y^{n}");
    }
    // y^32 halves (to the table's rounding: y^0 is 1 - 2^-32, as in the kernel); the
    // 128-bit product does not overflow.
    let half = val("decay_half");
    assert_eq!(half, (1 << 39) - (1 << 7), "2^40 decayed one half-life");
    let big = val("decay_big");
    let want = ((u64::MAX >> 1) as f64 * 0.5f64.powf(1.0 / 32.0)) as u64;
    assert!(
        big.abs_diff(want) < want / 1_000_000,
        "a 63-bit value decayed one period: {big} against {want}"
    );
    // Saturation: a task always queued and running reaches its weight and a whole CPU.
    let (sl, su) = (val("sat_load"), val("sat_util"));
    assert!((1000..=1024).contains(&sl), "saturated load_avg {sl}");
    assert!((1000..=1024).contains(&su), "saturated util_avg {su}");
    // One half-life asleep halves both.
    for (k, s) in [("half_load", sl), ("half_util", su)] {
        let h = val(k);
        assert!(h.abs_diff(s / 2) <= s / 50, "{k}: {h} from {s}");
    }
    // One half-life running from nothing: about half of saturation (the first period's
    // share makes it a little more).
    let r = val("rise_util");
    assert!(
        (480..=560).contains(&r),
        "util after one half-life from 0: {r}"
    );
    // An average does not depend on how often it is brought up to date.
    let (f, c) = (val("fine_load"), val("coarse_load"));
    assert!(f.abs_diff(c) <= 1024 / 50, "every 10 us {f}, every ms {c}");
    assert!((200..=500).contains(&f), "1-in-3 queued: {f}");
    // Moving: attached at once where it arrives, removed at the old CPU's next update.
    assert_eq!(val("a_after_attach"), 600);
    assert_eq!(val("b_after_move"), 600);
    assert_eq!(val("a_before_update"), 600);
    assert_eq!(val("a_after_update"), 0);
    assert_eq!(val("cpu_of_task"), 1);
    assert_eq!(val("b_after_detach"), 0);
}
