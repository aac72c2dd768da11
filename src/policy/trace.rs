//! The inputs of one placement decision written as JSON, and the decision-trace record
//! built from them: what every layer that writes or reads a decision shares.  The live
//! agent writes a [`TraceRecord`] per decision (`--trace`), the kernel oracle one per
//! decision of the recorded kernel, and `explain` replays them; its scenario files are
//! made of the same inputs ([`TopologyInput`], [`CpuStates`], [`WakeInput`],
//! [`LlcStateInput`]).
//!
//! - [`TopologyInput`]: exactly one of `shape` (`"NxLxCxT"` or `{"nodes", "llcs_per_node",
//!   "cores_per_llc", "threads"}`), `cpus` (per-CPU `{"core", "llc", "node"}`, index = CPU
//!   id) or `sysfs` (a sysfs tree, read by whoever builds the topology: this layer does no
//!   I/O, see [`TopologyInput::build`]); plus `offline` (a CPU list) and
//!   `numa_wake_affine` (default true).
//! - [`CpuStates`]: the per-CPU snapshot, either a list (one state per CPU, all of them) or
//!   `{"default": STATE, "overrides": {"CPULIST": STATE, ...}}` (overrides apply in file
//!   order onto the default; later ones win).  A STATE is `"idle"`, `"busy"`, `"busy:N"`
//!   or an object with any `CpuSnapshot` field and an optional `"base"` shorthand.  List
//!   entries and the default start from an empty, non-idle CPU; overrides start from the
//!   default.  Omitted: every CPU idle.
//! - [`WakeInput`]: `sync` and `kind` (ttwu/fork/exec), or raw `wake_flags`; `waker`
//!   defaults to a task-context waker with load 1024 and no wakee flips.  The wakee is the
//!   policy's `TaskState` verbatim (serde defaults: load 0, every CPU allowed).
//! - [`LlcStateInput`]: per-LLC engine state (`has_idle_cores`, `avg_scan_cost_ns`, and
//!   SIS_UTIL's stored `nr_idle_scan`) by dense LLC index.
//!
//! A [`TraceRecord`] is these inputs, fully explicit (every CPU written out, the policy as
//! a preset plus overrides, see [`policy_spec_of`]), plus the decision that was recorded.
//! Errors are one line naming the field; turning serde's errors into such a line is the
//! reader's business.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use super::{
    Config, CpuDesc, CpuSet, CpuSnapshot, Decision, FlagValue, LlcState, MAX_CPUS, PRESETS,
    PolicySpec, Shape, TaskState, Topology, TopologySpec, WAKE_EXEC, WAKE_FORK, WAKE_SYNC,
    WAKE_TTWU, WakeCtx, WakerContext,
};

// ------------------------------------------------------------------------------------------
// Topology
// ------------------------------------------------------------------------------------------

/// `"NxLxCxT"` (nodes x LLCs per node x cores per LLC x threads per core), e.g. `2x1x32x1`.
pub fn parse_shape(s: &str) -> Result<Shape, String> {
    let parts: Vec<&str> = s.trim().split(['x', 'X']).collect();
    if parts.len() != 4 {
        return Err(format!(
            "'{s}' is not NODESxLLCSxCORESxTHREADS (e.g. 2x1x2x2)"
        ));
    }
    let mut v = [0usize; 4];
    for (slot, p) in v.iter_mut().zip(&parts) {
        *slot = p
            .trim()
            .parse()
            .map_err(|_| format!("'{s}': '{p}' is not a whole number"))?;
    }
    Ok(Shape {
        nodes: v[0],
        llcs_per_node: v[1],
        cores_per_llc: v[2],
        threads: v[3],
    })
}

fn de_opt_shape<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Shape>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Shape>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(
                "a shape like \"2x1x2x2\" or {\"nodes\", \"llcs_per_node\", \"cores_per_llc\", \
                 \"threads\"}",
            )
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
            parse_shape(s).map(Some).map_err(E::custom)
        }
        fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Self::Value, A::Error> {
            Shape::deserialize(de::value::MapAccessDeserializer::new(m)).map(Some)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    d.deserialize_any(V)
}

fn default_true() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// How a scenario or a trace record names its machine; see the module documentation.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyInput {
    #[serde(
        default,
        deserialize_with = "de_opt_shape",
        skip_serializing_if = "Option::is_none"
    )]
    pub shape: Option<Shape>,
    pub cpus: Option<Vec<CpuDesc>>,
    /// A sysfs tree (the `sys` directory or the directory holding it); relative paths are
    /// relative to the scenario file.
    pub sysfs: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "CpuSet::is_empty")]
    pub offline: CpuSet,
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub numa_wake_affine: bool,
}

impl TopologyInput {
    /// The policy topology `topo` written out CPU by CPU (trace records).
    pub fn from_topology(topo: &Topology) -> Self {
        TopologyInput {
            shape: None,
            cpus: Some(topo.cpu_descs().to_vec()),
            sysfs: None,
            offline: CpuSet::new(),
            numa_wake_affine: topo.numa_wake_affine(),
        }
    }

    /// Builds the topology.  A `sysfs` tree is read by `read_sysfs`, given the path as
    /// written: reading files is the caller's business (explain's, which also knows what a
    /// relative path is relative to); this layer does no I/O.
    pub fn build(
        &self,
        read_sysfs: impl FnOnce(&Path) -> Result<Topology, String>,
    ) -> Result<Topology, String> {
        let given = [
            self.shape.is_some(),
            self.cpus.is_some(),
            self.sysfs.is_some(),
        ]
        .iter()
        .filter(|&&b| b)
        .count();
        if given != 1 {
            return Err("topology: give exactly one of shape, cpus or sysfs".into());
        }
        let mut topo = if let Some(dir) = &self.sysfs {
            read_sysfs(dir).map_err(|e| format!("topology.sysfs: {e}"))?
        } else {
            TopologySpec {
                shape: self.shape,
                cpus: self.cpus.clone(),
                offline: CpuSet::new(),
                numa_wake_affine: true,
            }
            .build()
            .map_err(|e| format!("topology: {e}"))?
        };
        for c in self.offline.iter() {
            if c >= topo.nr_cpus() {
                return Err(format!(
                    "topology.offline: CPU {c} is outside the topology ({} CPUs)",
                    topo.nr_cpus()
                ));
            }
            topo.set_online(c, false)
                .map_err(|e| format!("topology.offline: {e}"))?;
        }
        topo.set_numa_wake_affine(self.numa_wake_affine);
        Ok(topo)
    }
}

// ------------------------------------------------------------------------------------------
// Per-CPU state
// ------------------------------------------------------------------------------------------

/// `"idle"`, `"busy"` or `"busy:N"`: a starting point for a CPU state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuBase {
    Idle,
    Busy(u32),
}

impl CpuBase {
    fn parse(s: &str) -> Result<CpuBase, String> {
        match s.trim() {
            "idle" => Ok(CpuBase::Idle),
            "busy" => Ok(CpuBase::Busy(1)),
            other => match other.strip_prefix("busy:").map(|n| n.trim().parse::<u32>()) {
                Some(Ok(n)) if n >= 1 => Ok(CpuBase::Busy(n)),
                _ => Err(format!(
                    "'{s}' is not a CPU state: use \"idle\", \"busy\", \"busy:N\" or an object"
                )),
            },
        }
    }

    fn snapshot(self) -> CpuSnapshot {
        match self {
            CpuBase::Idle => CpuSnapshot::idle(),
            CpuBase::Busy(n) => CpuSnapshot::busy(n),
        }
    }
}

impl Serialize for CpuBase {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CpuBase::Idle => s.serialize_str("idle"),
            CpuBase::Busy(1) => s.serialize_str("busy"),
            CpuBase::Busy(n) => s.serialize_str(&format!("busy:{n}")),
        }
    }
}

impl<'de> Deserialize<'de> for CpuBase {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        CpuBase::parse(&s).map_err(de::Error::custom)
    }
}

/// Declares [`CpuState`] from the `CpuSnapshot` fields a scenario may set, with the
/// conversions both ways, so that one list says which fields a state writes out
/// (`from_snapshot`), reads back and applies (`apply`).
macro_rules! cpu_state {
    ($($field:ident: $ty:ty),* $(,)?) => {
        /// One CPU's state in a scenario: a shorthand and/or any `CpuSnapshot` fields.
        #[serde_with::skip_serializing_none]
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct CpuState {
            pub base: Option<CpuBase>,
            $(
                pub $field: Option<$ty>,
            )*
        }

        impl CpuState {
            /// Every field of `s`, so that applying it to anything gives `s` back.
            pub fn from_snapshot(s: &CpuSnapshot) -> Self {
                CpuState {
                    base: None,
                    $( $field: Some(s.$field), )*
                }
            }

            /// This state over `under` (the base shorthand, if any, replaces `under` first).
            pub fn apply(&self, under: CpuSnapshot) -> CpuSnapshot {
                let mut s = self.base.map_or(under, CpuBase::snapshot);
                $( if let Some(v) = self.$field { s.$field = v; } )*
                s
            }
        }
    };
}

cpu_state! {
    idle: bool,
    nr_running: u32,
    nr_delayed: u32,
    ttwu_pending: bool,
    wakeup_in_flight: bool,
    sched_idle_only: bool,
    load: u64,
    util: u32,
    util_est: u32,
    runnable: u32,
    capacity: u32,
    avg_idle_ns: u64,
    idle_exit_ns: u64,
    idle_stamp_ns: u64,
}

impl CpuState {
    pub fn from_base(b: CpuBase) -> Self {
        CpuState {
            base: Some(b),
            ..Default::default()
        }
    }
}

/// Accepts the shorthand string as well as the object.
fn de_cpu_state<'de, D: Deserializer<'de>>(d: D) -> Result<CpuState, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = CpuState;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(
                "a CPU state: \"idle\", \"busy\", \"busy:N\" or an object of snapshot fields",
            )
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<CpuState, E> {
            CpuBase::parse(s)
                .map(CpuState::from_base)
                .map_err(E::custom)
        }
        fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<CpuState, A::Error> {
            CpuState::deserialize(de::value::MapAccessDeserializer::new(m))
        }
    }
    d.deserialize_any(V)
}

/// A `CpuState` that may be written as a shorthand string.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuStateValue(pub CpuState);

impl Serialize for CpuStateValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let st = &self.0;
        if let Some(b) = st.base
            && st == &CpuState::from_base(b)
        {
            return b.serialize(s);
        }
        st.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CpuStateValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de_cpu_state(d).map(CpuStateValue)
    }
}

/// The most overrides a `{"default", "overrides"}` snapshot may have: one per CPU of the
/// largest topology and three times as many ranges.  Each holds its key (in the scheduler
/// binary's fixed heap a block of 64 bytes at least) and a state of about 100 bytes, in a
/// vector that doubles as it grows and holds both blocks while it does, and is then
/// applied to every CPU it names (up to `MAX_CPUS`): 4096 of them take about 2 MiB and
/// four million copies of a CPU's state, where the hundreds of thousands a 2 MiB scenario
/// can hold once exhausted that heap.
pub const MAX_OVERRIDES: usize = 4 * MAX_CPUS;

/// `{"default": STATE, "overrides": {"CPULIST": STATE}}`; overrides keep their file order,
/// at most [`MAX_OVERRIDES`] of them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuStateMap {
    #[serde(default = "idle_state")]
    pub default: CpuStateValue,
    #[serde(default, with = "ordered_map")]
    pub overrides: Vec<(String, CpuStateValue)>,
}

fn idle_state() -> CpuStateValue {
    CpuStateValue(CpuState::from_base(CpuBase::Idle))
}

mod ordered_map {
    use super::*;

    pub fn serialize<S: Serializer>(
        v: &[(String, CpuStateValue)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(v.len()))?;
        for (k, st) in v {
            m.serialize_entry(k, st)?;
        }
        m.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(String, CpuStateValue)>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<(String, CpuStateValue)>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object from CPU lists (\"3\", \"0-7,16\") to CPU states")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    if v.len() == MAX_OVERRIDES {
                        return Err(de::Error::custom(format!(
                            "more than {MAX_OVERRIDES} CPU overrides (name CPUs by ranges, \
                             \"0-31\", rather than one by one)"
                        )));
                    }
                    let st = m.next_value::<CpuStateValue>()?;
                    v.push((k, st));
                }
                Ok(v)
            }
        }
        d.deserialize_map(V)
    }
}

/// The per-CPU snapshot of a scenario: a list or a default with overrides.
#[derive(Clone, Debug, PartialEq)]
pub enum CpuStates {
    List(Vec<CpuStateValue>),
    Map(CpuStateMap),
}

impl Default for CpuStates {
    fn default() -> Self {
        CpuStates::Map(CpuStateMap {
            default: idle_state(),
            overrides: Vec::new(),
        })
    }
}

impl Serialize for CpuStates {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CpuStates::List(v) => v.serialize(s),
            CpuStates::Map(m) => m.serialize(s),
        }
    }
}

super::deserialize_by_visitor!(
    CpuStates,
    "a list of CPU states or {\"default\": ..., \"overrides\": {...}}",
    deserialize_any,
    {
        fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<CpuStates, A::Error> {
            Vec::<CpuStateValue>::deserialize(de::value::SeqAccessDeserializer::new(a))
                .map(CpuStates::List)
        }
        fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<CpuStates, A::Error> {
            CpuStateMap::deserialize(de::value::MapAccessDeserializer::new(m)).map(CpuStates::Map)
        }
    }
);

impl CpuStates {
    /// Every CPU written out (trace records).
    pub fn from_snapshots(snaps: &[CpuSnapshot]) -> Self {
        CpuStates::List(
            snaps
                .iter()
                .map(|s| CpuStateValue(CpuState::from_snapshot(s)))
                .collect(),
        )
    }

    /// The snapshot of `nr_cpus` CPUs.  Errors name the field.
    pub fn resolve(&self, nr_cpus: usize) -> Result<Vec<CpuSnapshot>, String> {
        match self {
            CpuStates::List(v) => {
                if v.len() != nr_cpus {
                    return Err(format!(
                        "cpus: {} entries for a topology of {nr_cpus} CPUs (give one per CPU, or \
                         use {{\"default\": ..., \"overrides\": ...}})",
                        v.len()
                    ));
                }
                Ok(v.iter()
                    .map(|s| s.0.apply(CpuSnapshot::default()))
                    .collect())
            }
            CpuStates::Map(m) => {
                let default = m.default.0.apply(CpuSnapshot::default());
                let mut snaps = vec![default; nr_cpus];
                for (key, st) in &m.overrides {
                    let set = CpuSet::parse_cpulist(key)
                        .map_err(|e| format!("cpus.overrides.{key:?}: not a CPU list: {e}"))?;
                    if set.is_empty() {
                        return Err(format!("cpus.overrides.{key:?}: names no CPU"));
                    }
                    for c in set.iter() {
                        if c >= nr_cpus {
                            return Err(format!(
                                "cpus.overrides.{key:?}: CPU {c} is outside the topology ({nr_cpus} \
                                 CPUs)"
                            ));
                        }
                        snaps[c] = st.0.apply(snaps[c]);
                    }
                }
                Ok(snaps)
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// Wake-up, LLC state, the trace record
// ------------------------------------------------------------------------------------------

/// What kind of placement `wake` describes when `wake_flags` is not given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WakeKind {
    /// try_to_wake_up (`WF_TTWU`).
    #[default]
    Ttwu,
    /// A new task (`WF_FORK`).
    Fork,
    /// exec balancing (`WF_EXEC`).
    Exec,
}

/// The wake-up context of a scenario.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WakeInput {
    #[serde(default)]
    pub kind: WakeKind,
    /// `WF_SYNC`.
    #[serde(default)]
    pub sync: bool,
    /// Raw `WAKE_*` bits, instead of `kind` and `sync` (trace records use this).
    pub wake_flags: Option<u32>,
    pub waker_cpu: usize,
    #[serde(default)]
    pub waker_context: WakerContext,
    #[serde(default)]
    pub waker_exiting: bool,
    /// `current` on the waker's CPU.
    pub waker: Option<TaskState>,
    #[serde(default)]
    pub now_ns: u64,
}

impl WakeInput {
    /// The engine's `WakeCtx` written out exactly (trace records).
    pub fn from_ctx(w: &WakeCtx) -> Self {
        WakeInput {
            kind: WakeKind::Ttwu,
            sync: false,
            wake_flags: Some(w.wake_flags),
            waker_cpu: w.waker_cpu,
            waker_context: w.waker_context,
            waker_exiting: w.waker_exiting,
            waker: Some(w.waker),
            now_ns: w.now_ns,
        }
    }

    /// The engine's `WakeCtx`, with every CPU it names checked against a topology of
    /// `nr_cpus` CPUs.  Errors name the field.
    pub fn to_ctx(&self, nr_cpus: usize) -> Result<WakeCtx, String> {
        let flags = match self.wake_flags {
            Some(f) => {
                if self.sync || self.kind != WakeKind::Ttwu {
                    return Err("wake: give wake_flags or kind/sync, not both".into());
                }
                f
            }
            None => {
                let k = match self.kind {
                    WakeKind::Ttwu => WAKE_TTWU,
                    WakeKind::Fork => WAKE_FORK,
                    WakeKind::Exec => WAKE_EXEC,
                };
                k | if self.sync { WAKE_SYNC } else { 0 }
            }
        };
        check_cpu("wake.waker_cpu", self.waker_cpu, nr_cpus)?;
        let waker = match self.waker {
            Some(w) => {
                check_task("wake.waker", &w, nr_cpus)?;
                w
            }
            None => TaskState::new(DEFAULT_WAKER_PID, self.waker_cpu, nr_cpus),
        };
        Ok(WakeCtx {
            wake_flags: flags,
            waker_cpu: self.waker_cpu,
            waker_context: self.waker_context,
            waker_exiting: self.waker_exiting,
            waker,
            now_ns: self.now_ns,
        })
    }
}

/// The pid of the waker a scenario leaves out.
pub const DEFAULT_WAKER_PID: u32 = u32::MAX - 1;

/// Per-LLC engine state, by dense LLC index (`Topology::llc_index`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlcStateInput {
    pub llc: usize,
    pub has_idle_cores: Option<bool>,
    pub avg_scan_cost_ns: Option<u64>,
    /// SIS_UTIL's scan depth as the kernel stored it; absent = derived from `util`.
    pub nr_idle_scan: Option<u64>,
}

/// One line of a decision trace (JSON lines): the complete inputs of one `select_cpu`
/// call and what the live run decided.  Written by the live agent, replayed by
/// `explain --trace`.
///
/// Everything the decision depends on is inside the record: the topology, the policy, the
/// per-CPU snapshot, the wakee's and the waker's state *before* the call (the engine
/// updates `recent_used_cpu` and the wakee flips in place), and the per-LLC engine state
/// (`has_idle_cores`, SIS_PROP's `avg_scan_cost_ns`).  A record without `llc_state` is
/// replayed with hints taken from its snapshot, which may differ from what the live
/// engine had (a known limit of such records, not of replay).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceRecord {
    /// Writer's sequence number (informational).
    pub seq: Option<u64>,
    pub topology: TopologyInput,
    #[serde(default)]
    pub policy: PolicySpec,
    pub cpus: CpuStates,
    pub llc_state: Option<Vec<LlcStateInput>>,
    pub task: TaskState,
    pub wake: WakeInput,
    /// The CPU the live run chose.
    pub recorded_cpu: usize,
    /// The live run's rule chain (rule names); empty = not recorded, not compared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded_chain: Vec<String>,
    /// The kernel oracle's: CPUs whose runqueue changed while the recorded kernel decided,
    /// so that it may have read other state than `cpus` (absent = not measured).
    pub changed_cpus: Option<Vec<usize>>,
    /// The kernel oracle's: the state estimator's values (bpf/pelt.bpf.h) beside the
    /// kernel's, which `cpus` and `task` hold (absent = not estimated).
    pub estimated: Option<Estimated>,
}

/// What the state estimator (bpf/pelt.bpf.h), fed the recorded kernel's own events, held
/// when the kernel decided: the load and util averages the live agent decides on.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Estimated {
    /// Each CPU's `load_avg`, by CPU.
    pub cpu_load: Vec<u64>,
    /// Each CPU's `util_avg`, by CPU.
    pub cpu_util: Vec<u32>,
    /// The wakee's `load_avg` and `util_avg`; absent for a task the estimator has not seen
    /// queued since recording began (the live one would start from the kernel's, `task`).
    pub task_load: Option<u64>,
    pub task_util: Option<u32>,
    /// The waker's (`current`'s) `load_avg`, which a sync wake-up weighs; absent as above.
    pub waker_load: Option<u64>,
    /// The kernel's own `se.avg.load_avg` of the wakee, which `task_load` estimates: the
    /// record's `task.load` is `task_h_load()`'s, scaled by its CPU's `h_load`.  Absent in
    /// records made before the scaling (there `task.load` is this).
    pub kernel_task_load: Option<u64>,
}

impl TraceRecord {
    /// A record of one decision.  `task` and `wake` are the inputs as they were *before*
    /// `Engine::select_cpu` (copy them before the call); `llc` is `Engine::llc_states()`
    /// before the call too.
    pub fn new(
        topo: &Topology,
        cfg: &Config,
        llc: &[LlcState],
        cpus: &[CpuSnapshot],
        task: &TaskState,
        wake: &WakeCtx,
        decision: &Decision,
    ) -> TraceRecord {
        TraceRecord {
            seq: None,
            topology: TopologyInput::from_topology(topo),
            policy: policy_spec_of(cfg),
            cpus: CpuStates::from_snapshots(cpus),
            llc_state: Some(
                llc.iter()
                    .enumerate()
                    .map(|(i, s)| LlcStateInput {
                        llc: i,
                        has_idle_cores: Some(s.has_idle_cores),
                        avg_scan_cost_ns: Some(s.avg_scan_cost_ns),
                        nr_idle_scan: s.nr_idle_scan,
                    })
                    .collect(),
            ),
            task: *task,
            wake: WakeInput::from_ctx(wake),
            recorded_cpu: decision.cpu,
            changed_cpus: None,
            estimated: None,
            recorded_chain: decision
                .chain
                .names()
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }

    /// One JSON line (no trailing newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("trace records serialise")
    }
}

/// `cfg` as the preset it differs least from, plus the differing flags.
pub fn policy_spec_of(cfg: &Config) -> PolicySpec {
    // Newest first, so an exact match names the most recent alias ("mainline").
    let best = PRESETS
        .iter()
        .rev()
        .map(|p| (p.name, cfg.diff_from(&p.config())))
        .min_by_key(|(_, d)| d.len())
        .expect("at least one preset");
    PolicySpec {
        preset: best.0.to_string(),
        set: best
            .1
            .iter()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), FlagValue::Str(v.to_string())))
            .collect(),
    }
}

// ------------------------------------------------------------------------------------------
// Checks shared with scenario resolution
// ------------------------------------------------------------------------------------------

/// `cpu` is inside a topology of `nr_cpus` CPUs; the error names `field`.
pub fn check_cpu(field: &str, cpu: usize, nr_cpus: usize) -> Result<(), String> {
    if cpu >= nr_cpus {
        return Err(format!(
            "{field}: CPU {cpu} is outside the topology (CPUs 0-{})",
            nr_cpus - 1
        ));
    }
    Ok(())
}

/// Every CPU `t` names (prev, recent, allowed) is inside a topology of `nr_cpus` CPUs.
pub fn check_task(field: &str, t: &TaskState, nr_cpus: usize) -> Result<(), String> {
    check_cpu(&format!("{field}.prev_cpu"), t.prev_cpu, nr_cpus)?;
    if let Some(r) = t.recent_used_cpu {
        check_cpu(&format!("{field}.recent_used_cpu"), r, nr_cpus)?;
    }
    if let Some(c) = t.allowed.iter().find(|&c| c >= nr_cpus) {
        return Err(format!(
            "{field}.allowed: CPU {c} is outside the topology (CPUs 0-{})",
            nr_cpus - 1
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse() {
        assert_eq!(
            parse_shape("2x1x32x1").unwrap(),
            Shape {
                nodes: 2,
                llcs_per_node: 1,
                cores_per_llc: 32,
                threads: 1
            }
        );
        assert!(parse_shape("2x1x32").is_err());
        assert!(parse_shape("2xax32x1").unwrap_err().contains("'a'"));
    }

    /// Every field survives: the literal names them all (a new `CpuSnapshot` field does not
    /// compile here until it is given a value), none of them at its default, and a
    /// resolved state that dropped one would give the base's value back instead.
    #[test]
    fn every_snapshot_field_round_trips() {
        let s = CpuSnapshot {
            idle: true,
            nr_running: 3,
            nr_delayed: 2,
            ttwu_pending: true,
            wakeup_in_flight: true,
            sched_idle_only: true,
            load: 2048,
            util: 300,
            util_est: 310,
            runnable: 320,
            capacity: 900,
            avg_idle_ns: 123_456,
            idle_exit_ns: 7_000_000,
            idle_stamp_ns: 6_000_000,
        };
        let st = CpuStates::from_snapshots(&[s]);
        let back: CpuStates = serde_json::from_str(&serde_json::to_string(&st).unwrap()).unwrap();
        assert_eq!(back.resolve(1).unwrap(), vec![s]);
        assert_eq!(CpuState::from_snapshot(&s).apply(CpuSnapshot::ZERO), s);
    }

    #[test]
    fn snapshot_round_trip() {
        let s = CpuSnapshot {
            ttwu_pending: true,
            nr_delayed: 1,
            ..CpuSnapshot::busy(2)
        };
        let st = CpuStates::from_snapshots(&[s, CpuSnapshot::idle()]);
        let j = serde_json::to_string(&st).unwrap();
        let back: CpuStates = serde_json::from_str(&j).unwrap();
        assert_eq!(back.resolve(2).unwrap(), vec![s, CpuSnapshot::idle()]);
    }

    #[test]
    fn overrides_are_counted_as_they_are_read() {
        let map = |n: usize| {
            let members = vec![r#""0-1": "busy""#; n].join(",");
            format!(r#"{{"default": "idle", "overrides": {{{members}}}}}"#)
        };
        let st: CpuStates = serde_json::from_str(&map(MAX_OVERRIDES)).unwrap();
        assert_eq!(st.resolve(2).unwrap()[1].nr_running, 1);
        let e = serde_json::from_str::<CpuStates>(&map(MAX_OVERRIDES + 1))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("more than 4096 CPU overrides"), "{e}");
    }

    #[test]
    fn policy_spec_of_picks_the_nearest_preset() {
        let c = Config::from_preset_with("v6.12", &["sync_excludes_delayed=true"]).unwrap();
        let p = policy_spec_of(&c);
        assert!(p.set.is_empty(), "{p:?}");
        assert_eq!(p.to_config().unwrap(), c);
        let c = Config::from_preset_with("v5.10", &["recent_used=search-target"]).unwrap();
        let p = policy_spec_of(&c);
        assert_eq!((p.preset.as_str(), p.set.len()), ("v5.10", 1));
        assert_eq!(p.to_config().unwrap(), c);
    }

    #[test]
    fn a_sysfs_topology_is_read_by_the_caller() {
        let t: TopologyInput =
            serde_json::from_str(r#"{"sysfs": "trees/a", "offline": "1"}"#).unwrap();
        let mut asked = None;
        let topo = t
            .build(|dir| {
                asked = Some(dir.to_path_buf());
                Ok(Topology::from_shape(1, 1, 2, 1).unwrap())
            })
            .unwrap();
        assert_eq!(asked.as_deref(), Some(Path::new("trees/a")));
        assert!(topo.is_online(0) && !topo.is_online(1));
        let e = t.build(|_| Err("no tree".into())).unwrap_err();
        assert_eq!(e, "topology.sysfs: no tree");
        // Without sysfs the reader is never called.
        let t: TopologyInput = serde_json::from_str(r#"{"shape": "1x1x2x2"}"#).unwrap();
        let topo = t.build(|_| unreachable!("no sysfs tree")).unwrap();
        assert_eq!(topo.nr_cpus(), 4);
    }
}
