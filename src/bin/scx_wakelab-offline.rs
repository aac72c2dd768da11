//! `explain`, `sim`, `oracle compare` and `oracle newidle` without the scheduler: the same
//! commands as `scx_wakelab`'s, in a binary that does not link scx_rustland_core and so
//! runs on the system allocator instead of its fixed, locked 64 MiB heap (which a 256-CPU
//! `sim` outgrows). `scx_wakelab` hands these commands to this binary when it is installed
//! beside it (src/offline.rs); users need not call it by name.
//! `oracle record` loads BPF and is refused here (scx_wakelab runs it).

use clap::Parser;
use scx_wakelab::exit;

#[derive(Debug, Parser)]
#[command(name = "scx_wakelab", version, about = "scx_wakelab's offline commands (explain, sim, oracle compare and newidle) on the system allocator",
          after_help = exit::EXIT_CODES)]
struct Offline {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    // As in scx_wakelab: no doc comments, which would replace the long help.
    Explain(scx_wakelab::explain::ExplainArgs),
    Sim(scx_wakelab::sim::SimArgs),
    Oracle(scx_wakelab::oracle::OracleArgs),
}

fn main() -> std::process::ExitCode {
    exit::install_panic_hook();
    let cli = match exit::parse_args::<Offline>() {
        Ok(c) => c,
        Err(code) => return code,
    };
    // Their only inputs are the command line and the files it names.
    match cli.command {
        Command::Explain(a) => exit::exit_with(scx_wakelab::explain::run(a), exit::BAD_INPUT),
        Command::Sim(a) => exit::exit_with(scx_wakelab::sim::run(a), exit::BAD_INPUT),
        Command::Oracle(a) => exit::exit_with(scx_wakelab::oracle::run(a), exit::BAD_INPUT),
    }
}
