//! Writes a valid `explain --trace` file of about MEGABYTES of synthetic decisions
//! (scx_wakelab::explain::synthetic), to measure how replay scales with the trace's size
//! (tools/bench/large-inputs, docs/benchmarks/large-inputs.md).
//!
//! usage: synthetic_trace OUT MEGABYTES [NODESxLLCSxCORESxTHREADS]

use std::io::{BufWriter, Write};

use scx_wakelab::explain::synthetic::SyntheticTrace;
use scx_wakelab::policy::{Config, Topology};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let usage = "usage: synthetic_trace OUT MEGABYTES [NODESxLLCSxCORESxTHREADS]";
    let out = args.get(1).ok_or(usage)?;
    let megabytes: u64 = args
        .get(2)
        .ok_or(usage)?
        .parse()
        .map_err(|e| format!("MEGABYTES: {e}"))?;
    let shape: Vec<usize> = args
        .get(3)
        .map_or("2x1x4x2", String::as_str)
        .split('x')
        .map(|n| n.parse().map_err(|e| format!("shape: {e}")))
        .collect::<Result<_, _>>()?;
    let [nodes, llcs, cores, threads] = shape[..] else {
        return Err("shape: expected NODESxLLCSxCORESxTHREADS".into());
    };
    let topo = Topology::from_shape(nodes, llcs, cores, threads).map_err(|e| e.to_string())?;
    let cfg = Config::from_preset("mainline").map_err(|e| e.to_string())?;
    let trace = SyntheticTrace::new(topo, cfg).map_err(|e| e.to_string())?;
    let file = std::fs::File::create(out).map_err(|e| format!("{out}: {e}"))?;
    let mut w = BufWriter::new(file);
    let (mut written, mut records) = (0u64, 0u64);
    for rec in trace {
        if written >= megabytes << 20 {
            break;
        }
        let line = rec.to_json_line();
        writeln!(w, "{line}").map_err(|e| format!("{out}: {e}"))?;
        written += line.len() as u64 + 1;
        records += 1;
    }
    w.flush().map_err(|e| format!("{out}: {e}"))?;
    println!("{out}: {records} records, {written} bytes");
    Ok(())
}
