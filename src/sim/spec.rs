//! What to simulate: the workload and its parameters, the machine, the policy, the model's
//! knobs.  Plain serde data, so a test or the CLI builds a [`SimSpec`] and hands it to
//! [`super::run_workload`].

use serde::{Deserialize, Serialize};

use crate::policy::{Config, Shape};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HackbenchMode {
    Pipe,
    Socket,
}

/// The largest time parameter, ns (10 s): every time is a u64 of nanoseconds, and the
/// model adds and multiplies a few of them.
pub const MAX_PARAM_NS: u64 = 10_000_000_000;

/// The largest count parameter (rings, pairs, groups, loops...).
pub const MAX_COUNT: u64 = 1 << 16;

/// The most tasks a simulation may have: every event walks some of them.  Each also costs
/// memory, which `world::footprint` counts with the rest of a run's against the heap it
/// runs on (the fixed 64 MiB arena holds fewer than this many).
pub const MAX_TASKS: u64 = 1 << 16;

/// The workload table: each workload's doc, its `--workload` name (serde's tag too, so it
/// must be the variant's kebab-case name) and its parameters, each with its doc, type,
/// default and the parser that checks a `--param` value.  Generates the [`Workload`] enum,
/// [`WORKLOAD_NAMES`], `by_name`, `name`, `params` and `set_param`.
macro_rules! workloads {
    ($(
        $(#[$vdoc:meta])*
        $variant:ident = $name:literal {
            $( $(#[$fdoc:meta])* $field:ident: $ty:ty = $default:expr, $parse:ident; )*
        }
    )*) => {
        $(
            $(#[$vdoc])*
            #[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
            pub struct $variant { $( $(#[$fdoc])* pub $field: $ty, )* }
        )*

        /// The synthetic workloads, each with its parameters.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "name", rename_all = "kebab-case")]
        pub enum Workload {
            $( $(#[$vdoc])* $variant($variant), )*
        }

        /// Workload names for `--workload`.
        pub const WORKLOAD_NAMES: &[&str] = &[ $( $name, )* ];

        impl Workload {
            /// The workload with its default parameters.
            pub fn by_name(name: &str) -> Option<Workload> {
                match name {
                    $( $name => Some(Workload::$variant($variant { $( $field: $default, )* })), )*
                    _ => None,
                }
            }

            pub fn name(&self) -> &'static str {
                match self { $( Workload::$variant(_) => $name, )* }
            }

            /// `(key, current value)` of every parameter, for `--param` and help.
            pub fn params(&self) -> Vec<(&'static str, String)> {
                match self {
                    $( Workload::$variant(p) => {
                        vec![ $( (stringify!($field), ParamValue::show(&p.$field)), )* ]
                    } )*
                }
            }

            /// Sets one workload parameter; `Ok(false)` when `key` is not one of this
            /// workload's.
            pub fn set_param(&mut self, key: &str, v: &str) -> Result<bool, String> {
                match self {
                    $( Workload::$variant(p) => match key {
                        $( stringify!($field) => p.$field = param::$parse(key, v)?, )*
                        _ => return Ok(false),
                    }, )*
                }
                Ok(true)
            }
        }
    };
}

workloads! {
    /// lmbench `lat_ctx -P R K`: R independent rings of K processes passing a token
    /// through pipes.  Every hand-off is a sync wake-up from task context (pipe_write ->
    /// wake_up_interruptible_sync_poll) followed by the writer blocking in read.
    PipeRings = "pipe-rings" {
        /// Parallel rings; 0 = one per CPU (`-P $(nproc)`).
        rings: usize = 0, count;
        /// Processes per ring (lat_ctx's process count).
        ring_size: usize = 2, ring_size;
        /// Work per hop before passing the token, ns.
        work_ns: u64 = 2_000, pos_ns;
        /// Run time after passing the token (return from write, call read), ns.
        tail_ns: u64 = 1_000, ns;
    }
    /// hackbench: `groups` groups of `fds` senders and `fds` receivers; every sender
    /// writes `loops` messages to every receiver of its group.  Pipes and unix sockets both
    /// wake readers (and writers blocked on a full buffer) with sync wake-ups; sockets cost
    /// more per message.
    Hackbench = "hackbench" {
        groups: usize = 2, pos_count;
        fds: usize = 8, pos_count;
        loops: usize = 20, pos_count;
        /// `pipe` or `socket`.
        mode: HackbenchMode = HackbenchMode::Pipe, hackbench_mode;
        /// Messages a receiver's buffer holds before its writers block.
        capacity: u32 = 16, pos_count;
    }
    /// Barry Song's qperf case (seed 1): `flows` request/response flows whose server task
    /// is woken by NET_RX softirq (sync, softirq context) on an IRQ CPU of the last NUMA
    /// node, where a CPU hog runs on every CPU (`taskset -c <node> stress -c <cpus>`).  The
    /// server replies over the network and the next request arrives `rtt_ns` later.
    SoftirqRr = "softirq-rr" {
        flows: usize = 1, pos_count;
        work_ns: u64 = 5_000, pos_ns;
        rtt_ns: u64 = 20_000, pos_ns;
        /// Hog every CPU of the IRQ node (Barry's setup); false = an unloaded node.
        hogs: bool = true, flag;
    }
    /// tbench-like client/server pairs over loopback TCP: the client sends a request and
    /// waits for the reply, the server waits for requests.  Loopback delivery runs the
    /// receive path in softirq context on the sender's CPU (in_task() is false), so by
    /// default the wake-ups are sync wake-ups from softirq context with the sender as
    /// `current`; `task_context` makes them plain task-context wake-ups.
    TbenchLike = "tbench-like" {
        /// Pairs; 0 = one per two CPUs.
        pairs: usize = 0, count;
        client_ns: u64 = 6_000, pos_ns;
        server_ns: u64 = 8_000, pos_ns;
        /// Run time after sending (return from sendmsg, call recvmsg), ns.
        tail_ns: u64 = 2_000, ns;
        task_context: bool = false, flag;
    }
    /// Rik van Riel's case (seed 2), memcache-like: `pairs` client/server threads doing
    /// bursts of back-to-back requests (the client answers each reply within `think_ns`,
    /// so the server's next request often arrives while it is still in schedule() and
    /// goes to its CPU's wakelist: ttwu_pending), with `batch` CPU-bound tasks keeping
    /// work queued on other CPUs for a newly-idle CPU to pull.
    NewidleBurst = "newidle-burst" {
        /// Pairs; 0 = one per CPU.
        pairs: usize = 0, count;
        serve_ns: u64 = 6_000, pos_ns;
        think_ns: u64 = 1_000, pos_ns;
        /// Requests per burst, then the client sleeps `pause_ns`.
        burst: u32 = 16, pos_count;
        pause_ns: u64 = 200_000, pos_ns;
        /// CPU-bound tasks (0 = one per CPU); each runs `batch_run_ns`, sleeps
        /// `batch_sleep_ns`.
        batch: usize = 0, count;
        batch_run_ns: u64 = 400_000, pos_ns;
        batch_sleep_ns: u64 = 100_000, pos_ns;
    }
}

/// A parameter's value as `params()` shows it and `set_param` reads it back.
trait ParamValue {
    fn show(&self) -> String;
}

macro_rules! shown_by_to_string {
    ($($t:ty),*) => { $( impl ParamValue for $t { fn show(&self) -> String { self.to_string() } } )* };
}
shown_by_to_string!(usize, u64, u32, bool);

impl ParamValue for HackbenchMode {
    fn show(&self) -> String {
        match self {
            HackbenchMode::Pipe => "pipe".into(),
            HackbenchMode::Socket => "socket".into(),
        }
    }
}

/// The parsers a parameter's declaration names: each checks a `--param KEY=V` value and
/// says in one line what it expected.
mod param {
    use super::{HackbenchMode, MAX_COUNT, MAX_PARAM_NS};

    fn num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, String> {
        v.trim()
            .parse()
            .map_err(|_| format!("--param {key}={v}: expected a whole number"))
    }

    fn pos<T: std::str::FromStr + PartialOrd + Default>(key: &str, v: &str) -> Result<T, String> {
        let n: T = num(key, v)?;
        if n <= T::default() {
            return Err(format!("--param {key}={v}: must be at least 1"));
        }
        Ok(n)
    }

    // Counts and times are bounded (see MAX_COUNT and MAX_PARAM_NS): the world
    // allocates per task and adds and multiplies times in u64 nanoseconds.
    pub fn count<T: std::str::FromStr + TryInto<u64> + Copy>(
        key: &str,
        v: &str,
    ) -> Result<T, String> {
        let n: T = num(key, v)?;
        match n.try_into() {
            Ok(x) if x <= MAX_COUNT => Ok(n),
            _ => Err(format!("--param {key}={v}: at most {MAX_COUNT}")),
        }
    }

    pub fn pos_count<T: std::str::FromStr + TryInto<u64> + Copy + PartialOrd + Default>(
        key: &str,
        v: &str,
    ) -> Result<T, String> {
        let n: T = pos(key, v)?;
        count::<T>(key, v)?;
        Ok(n)
    }

    pub fn ns(key: &str, v: &str) -> Result<u64, String> {
        let n: u64 = num(key, v)?;
        if n > MAX_PARAM_NS {
            return Err(format!("--param {key}={v}: at most {MAX_PARAM_NS} (10 s)"));
        }
        Ok(n)
    }

    pub fn pos_ns(key: &str, v: &str) -> Result<u64, String> {
        let n = ns(key, v)?;
        if n == 0 {
            return Err(format!("--param {key}={v}: must be at least 1"));
        }
        Ok(n)
    }

    pub fn flag(key: &str, v: &str) -> Result<bool, String> {
        match v.trim() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err(format!("--param {key}={v}: expected true or false")),
        }
    }

    /// A ring passes its token from one process to the next: it needs two.
    pub fn ring_size(key: &str, v: &str) -> Result<usize, String> {
        let n: usize = count(key, v)?;
        if n < 2 {
            return Err(format!(
                "--param {key}={v}: a ring needs at least 2 processes"
            ));
        }
        Ok(n)
    }

    pub fn hackbench_mode(key: &str, v: &str) -> Result<HackbenchMode, String> {
        match v.trim() {
            "pipe" => Ok(HackbenchMode::Pipe),
            "socket" => Ok(HackbenchMode::Socket),
            _ => Err(format!("--param {key}={v}: expected pipe or socket")),
        }
    }
}

impl Workload {
    /// The machine its authors ran it on, when that is cheap to simulate.
    pub fn default_shape(&self) -> Shape {
        let s = |nodes, llcs_per_node, cores_per_llc, threads| Shape {
            nodes,
            llcs_per_node,
            cores_per_llc,
            threads,
        };
        match self {
            // Barry Song: 2 NUMA nodes, CPUs 0-31 and 32-63.
            Workload::SoftirqRr(_) => s(2, 1, 32, 1),
            _ => s(2, 1, 2, 2),
        }
    }
}

/// The model's own knobs (see the `sim` module documentation for what each stands for).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelParams {
    /// Round-robin time slice of a CPU's FIFO runqueue, ns (EEVDF's base slice, 0.75 ms,
    /// which also bounds the remembered lag: max(2·slice, 1 ms)).  There is no wake-up
    /// preemption: a woken task waits for the running one's slice or burst to end.
    pub slice_ns: u64,
    /// Delay of a wake-up queued on the target's wakelist (remote LLC, idle target, or a
    /// wakee still in schedule() on its CPU): the target shows `ttwu_pending` meanwhile.
    pub ipi_ns: u64,
    /// Time a CPU spends in schedule() after its last task blocked before the newly-idle
    /// balance looks for work; a wakee woken in that window is queued back to it.
    pub switch_ns: u64,
    /// Periodic (tick) balance: every tick, an idle CPU pulls the longest-waiting task of
    /// an overloaded CPU, nearest domain first.  0 disables it.
    pub tick_ns: u64,
    /// Service times vary uniformly by ± this percentage.
    pub jitter_pct: u64,
    /// Background noise: per-CPU pinned housekeeping busy this percentage of the time
    /// (0 = a perfectly quiet machine), in bursts of `noise_ns`.  Not counted in the
    /// statistics.
    pub noise_pct: u64,
    pub noise_ns: u64,
}

impl Default for ModelParams {
    fn default() -> Self {
        ModelParams {
            slice_ns: 750_000,
            ipi_ns: 2_000,
            switch_ns: 3_000,
            tick_ns: 1_000_000,
            jitter_pct: 20,
            noise_pct: 2,
            noise_ns: 30_000,
        }
    }
}

/// Model parameter keys for `--param`.
pub const MODEL_PARAMS: &[&str] = &[
    "slice_ns",
    "ipi_ns",
    "switch_ns",
    "tick_ns",
    "jitter_pct",
    "noise_pct",
    "noise_ns",
];

impl ModelParams {
    /// Sets one model parameter; `Ok(false)` when `key` is not one.
    pub fn set_param(&mut self, key: &str, v: &str) -> Result<bool, String> {
        let n = || -> Result<u64, String> {
            let n: u64 = v
                .trim()
                .parse()
                .map_err(|_| format!("--param {key}={v}: expected a whole number"))?;
            if key.ends_with("_ns") && n > MAX_PARAM_NS {
                return Err(format!("--param {key}={v}: at most {MAX_PARAM_NS} (10 s)"));
            }
            Ok(n)
        };
        match key {
            "slice_ns" => {
                self.slice_ns = n()?;
                if self.slice_ns < 1_000 {
                    return Err(format!(
                        "--param {key}={v}: a slice shorter than 1 us makes no sense"
                    ));
                }
            }
            "ipi_ns" => self.ipi_ns = n()?,
            "switch_ns" => self.switch_ns = n()?,
            "tick_ns" => {
                self.tick_ns = n()?;
                if self.tick_ns != 0 && self.tick_ns < 10_000 {
                    return Err(format!("--param {key}={v}: use 0 (off) or at least 10000"));
                }
            }
            "jitter_pct" => {
                self.jitter_pct = n()?;
                if self.jitter_pct > 100 {
                    return Err(format!("--param {key}={v}: at most 100"));
                }
            }
            "noise_pct" => {
                self.noise_pct = n()?;
                if self.noise_pct > 50 {
                    return Err(format!("--param {key}={v}: at most 50"));
                }
            }
            "noise_ns" => {
                self.noise_ns = n()?;
                if self.noise_ns == 0 {
                    return Err(format!("--param {key}={v}: must be at least 1"));
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// One simulation run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimSpec {
    /// Column label in comparisons.
    pub label: String,
    pub workload: Workload,
    pub shape: Shape,
    pub config: Config,
    pub seed: u64,
    /// Simulated time to run, ns.
    pub duration_ns: u64,
    /// Stop after this many events as well (0 = no limit).
    pub max_events: u64,
    pub model: ModelParams,
}

impl SimSpec {
    /// `workload` with its defaults on its default machine, mainline policy, seed 1,
    /// 50 ms of simulated time.
    pub fn new(workload: Workload) -> SimSpec {
        SimSpec {
            label: String::from("mainline"),
            shape: workload.default_shape(),
            workload,
            config: Config::default(),
            seed: 1,
            duration_ns: 50_000_000,
            max_events: 0,
            model: ModelParams::default(),
        }
    }

    /// Tasks the workload creates on `nr_cpus` CPUs (without the model's per-CPU noise
    /// tasks), saturating.
    pub fn nr_tasks(&self, nr_cpus: u64) -> u64 {
        let or_cpus = |n: usize, per: u64| {
            if n == 0 {
                (nr_cpus / per).max(1)
            } else {
                n as u64
            }
        };
        match &self.workload {
            Workload::PipeRings(w) => or_cpus(w.rings, 1).saturating_mul(w.ring_size as u64),
            Workload::Hackbench(w) => (w.groups as u64)
                .saturating_mul(w.fds as u64)
                .saturating_mul(2),
            Workload::SoftirqRr(w) => (w.flows as u64).saturating_add(nr_cpus),
            Workload::TbenchLike(w) => or_cpus(w.pairs, 2).saturating_mul(2),
            Workload::NewidleBurst(w) => or_cpus(w.pairs, 1)
                .saturating_mul(2)
                .saturating_add(or_cpus(w.batch, 1)),
        }
    }

    /// Refuses a simulation too large to hold (see [`MAX_TASKS`]).
    pub fn check_size(&self) -> Result<(), String> {
        let cpus = [
            self.shape.nodes,
            self.shape.llcs_per_node,
            self.shape.cores_per_llc,
            self.shape.threads,
        ]
        .iter()
        .fold(1u64, |a, &b| a.saturating_mul(b as u64));
        if cpus > crate::policy::MAX_CPUS as u64 {
            return Err(format!(
                "topology has {cpus} CPUs; the policy supports at most {}",
                crate::policy::MAX_CPUS
            ));
        }
        let n = self.nr_tasks(cpus);
        if n > MAX_TASKS {
            return Err(format!(
                "{}: {n} tasks; a simulation may have at most {MAX_TASKS}",
                self.workload.name()
            ));
        }
        Ok(())
    }

    /// Applies `key=value` to the workload or the model; errors list the known keys.
    pub fn set_param(&mut self, kv: &str) -> Result<(), String> {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--param: expected KEY=VALUE, got '{kv}'"))?;
        let k = k.trim().replace('-', "_");
        if self.workload.set_param(&k, v)? || self.model.set_param(&k, v)? {
            return Ok(());
        }
        let mut known: Vec<&str> = self.workload.params().iter().map(|(k, _)| *k).collect();
        known.extend(MODEL_PARAMS);
        Err(format!(
            "--param: unknown key '{k}' for {}; known: {}",
            self.workload.name(),
            known.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workload serialises flat, its `--workload` name under "name" beside its
    /// parameters, and reads back the same.
    #[test]
    fn workload_json_is_flat_and_round_trips() {
        for name in WORKLOAD_NAMES {
            let w = Workload::by_name(name).expect("a listed workload");
            let v = serde_json::to_value(&w).expect("serialises");
            let obj = v.as_object().expect("a JSON object");
            assert_eq!(obj["name"], *name);
            assert_eq!(obj.len(), w.params().len() + 1, "{v}");
            for (key, _) in w.params() {
                assert!(obj.contains_key(key), "{name}: {key} missing in {v}");
            }
            assert_eq!(
                serde_json::from_value::<Workload>(v).expect("reads back"),
                w
            );
        }
    }
}
