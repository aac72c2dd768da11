//! `scx_wakelab stats` is an scx_stats client: against a plain scx_stats
//! server (no scheduler, no sched_ext) it prints `--json` in the shape the
//! lab's and the VM tests' scripts parse, the text block, and `--monitor`'s
//! intervals.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use scx_stats::{StatsServer, StatsServerData};
use serde_json::json;

fn server(path: &std::path::Path, decisions: Arc<Mutex<u64>>) -> StatsServer<(), ()> {
    let data = StatsServerData::<(), ()>::new()
        .add_stats(
            "top",
            Box::new(move |_, _| {
                let n = *decisions.lock().unwrap();
                *decisions.lock().unwrap() += 10;
                Ok(json!({
                    "nr_decisions": n,
                    "nr_queued_to_agent": 4,
                    "hop_hist": [[0, 1], []],
                    "policy": {"nr_wakeups": 3, "nr_wakeups_affine": 2},
                }))
            }),
        )
        .add_stats(
            "config",
            Box::new(|_, _| Ok(json!({"wa_idle": true, "recent_used": "prev"}))),
        );
    StatsServer::new(data).set_path(path).launch().unwrap()
}

fn stats(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_scx_wakelab"));
    c.arg("stats").args(args).env("RUST_BACKTRACE", "0");
    c
}

#[test]
fn stats_json_text_and_monitor_through_scx_stats() {
    let path = std::env::temp_dir().join(format!("wakelab-cli-stats-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let decisions = Arc::new(Mutex::new(100));
    let srv = server(&path, decisions);
    let p = path.to_str().unwrap();

    let out = stats(&["--json", "--socket", p]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"config\":{\"recent_used\":\"prev\",\"wa_idle\":true},\"metrics\":{\"hop_hist\":[[0,1],[]],\
         \"nr_decisions\":100,\"nr_queued_to_agent\":4,\"policy\":{\"nr_wakeups\":3,\"nr_wakeups_affine\":2}}}\n"
    );

    let out = stats(&["--socket", p]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.starts_with("decisions     110"), "{text}");
    assert!(text.contains("nr_wakeups 3"), "{text}");
    assert!(text.contains("bpf: queued 4"), "{text}");

    // --monitor: each interval's difference (the server adds 10 per request).
    let mut child = stats(&["--json", "--monitor", "0.2", "--socket", p])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..2 {
        let line = lines.next().unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["metrics"]["nr_decisions"], 10, "{line}");
        assert_eq!(v["metrics"]["nr_queued_to_agent"], 0, "{line}");
        assert_eq!(v["interval_s"], 0.2, "{line}");
        assert_eq!(v["config"]["wa_idle"], true, "{line}");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    drop(srv);
    let _ = std::fs::remove_file(&path);
}
