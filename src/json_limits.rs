//! Limits on the shape of a JSON document, checked on its text before serde reads it.
//!
//! A scenario file or a trace line (at most 2 MiB, `explain::MAX_INPUT_BYTES`) or an
//! answer on the scheduler's socket (at most 1 MiB) can hold a million values, and what
//! serde makes of them can be many times their text: a flag value of an untagged type is
//! buffered whole as a tree of 32-byte nodes before its type is chosen, a CPU state takes
//! 80 bytes, a pull candidate 160, a string at least a 64-byte block of the fixed heap.
//! Where the offline commands run on scx_rustland_core's fixed 64 MiB heap (see
//! [`crate::heap`]), such a document aborted the process in the middle of parsing.  So the
//! text is scanned first, allocating nothing but a stack of [`MAX_DEPTH`] frames, and a
//! document over any limit is refused with one line that names where, before serde has
//! allocated anything.
//!
//! The limits are sized so that one document parses within [`PARSE_BUDGET`], a quarter of
//! the fixed heap; the costs per item are measured in that heap's blocks by the tests
//! below (`heap_tests`), whose table is in docs/benchmarks/large-inputs.md.  The largest
//! document we write ourselves, a trace record of a 1024-CPU machine, has about 17500
//! values, at most 1024 elements per array and a dozen members per object, and is 4 levels
//! deep.

use crate::heap;

/// What one parsed document may take of the fixed heap, in its blocks: a quarter of it,
/// as much as the largest block anything may plan for there
/// ([`heap::FIXED_HEAP_LARGEST_BLOCK`]), so that the document's text (read whole, in a
/// block of up to 4 MiB) and the rest of the command stay within the half of the heap
/// that may be planned for ([`heap::FIXED_HEAP_BUDGET`]).
pub const PARSE_BUDGET: u64 = heap::FIXED_HEAP_LARGEST_BLOCK;

/// A bound on what one value costs, in the fixed heap's blocks, whatever it parses into.
/// The costliest measured is an entry of the policy's `set` map, about 220 bytes: its key
/// (a 64-byte block at least), its value (buffered whole before its type is chosen) and
/// its share of the map's nodes.  A CPU state in a list is about 190, a pull candidate 170
/// for each of its three values at least, an escaped string 95, a number in a buffered
/// flag value 36.
pub const MAX_VALUE_COST: u64 = 256;

/// Values (objects, arrays, strings, numbers, literals) in one document:
/// [`PARSE_BUDGET`] / [`MAX_VALUE_COST`], so that any mix of them fits.  Nearly four times
/// the largest document we write ourselves.
pub const MAX_VALUES: usize = (PARSE_BUDGET / MAX_VALUE_COST) as usize;

/// Elements of one array.  The costliest element, a pull candidate (160 bytes, in blocks
/// of up to twice that while the vector grows, and copied once more when the scenario is
/// resolved), takes 8 MiB at this length, half of [`PARSE_BUDGET`]; 16 times the most CPUs
/// a topology may have, the length of the longest array we write ourselves.
pub const MAX_ARRAY_LEN: usize = 16384;

/// Members of one object.  The costliest member, an entry of the policy's `set` map (see
/// [`MAX_VALUE_COST`]), takes under 2 MiB at this size; our structs have a dozen members,
/// our maps one per CPU at most, and the overrides of a CPU snapshot have their own, lower
/// limit (`policy::MAX_OVERRIDES`).
pub const MAX_OBJECT_MEMBERS: usize = 8192;

/// Arrays and objects inside one another.  Depth costs the heap little (a buffered level
/// is one 128-byte block), but the parser recurses once per level and an error names the
/// path through all of them; our documents are 4 levels deep.
pub const MAX_DEPTH: usize = 32;

/// An open array or object, and where in it the scan is.
struct Frame {
    array: bool,
    /// Elements (arrays) or members (objects) seen so far.
    count: usize,
    /// Objects: the byte range of the key whose value is being read.
    key: Option<(usize, usize)>,
    /// Objects: between `{` or `,` and the next key.
    expecting_key: bool,
}

/// Where a limit was passed, and how the line says it.
enum Over {
    Depth,
    Values,
    ArrayLen,
    ObjectMembers,
}

/// Refuses `text` if it nests deeper than [`MAX_DEPTH`], has more than [`MAX_VALUES`]
/// values, an array of more than [`MAX_ARRAY_LEN`] elements or an object of more than
/// [`MAX_OBJECT_MEMBERS`] members.  The error is one line naming the place: `cpus: an
/// array of more than 16384 elements (line 1, column 70)`.  Text that is not JSON passes
/// unless it trips a limit: saying what is wrong with it is serde's business.
pub fn check(text: &str) -> Result<(), String> {
    scan(text).map(|_| ())
}

/// [`check`]'s scan; the number of values.
fn scan(text: &str) -> Result<usize, String> {
    let b = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::with_capacity(MAX_DEPTH);
    let mut values = 0usize;
    let mut i = 0usize;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\n' | b'\r' | b':' => i += 1,
            b',' => {
                if let Some(f) = stack.last_mut()
                    && !f.array
                {
                    f.key = None;
                    f.expecting_key = true;
                }
                i += 1;
            }
            b']' | b'}' => {
                stack.pop();
                i += 1;
            }
            b'"' => {
                let end = string_end(b, i);
                match stack.last_mut() {
                    Some(f) if !f.array && f.expecting_key => {
                        f.count += 1;
                        if f.count > MAX_OBJECT_MEMBERS {
                            return Err(refusal(
                                text,
                                &stack,
                                stack.len() - 1,
                                i,
                                Over::ObjectMembers,
                            ));
                        }
                        f.key = Some((i + 1, end));
                        f.expecting_key = false;
                    }
                    _ => a_value(text, &mut stack, &mut values, i)?,
                }
                i = end + 1;
            }
            open @ (b'[' | b'{') => {
                a_value(text, &mut stack, &mut values, i)?;
                if stack.len() == MAX_DEPTH {
                    return Err(refusal(text, &stack, stack.len(), i, Over::Depth));
                }
                stack.push(Frame {
                    array: open == b'[',
                    count: 0,
                    key: None,
                    expecting_key: open == b'{',
                });
                i += 1;
            }
            _ => {
                // A number, a literal or garbage: one value, up to the next delimiter.
                a_value(text, &mut stack, &mut values, i)?;
                while i < b.len()
                    && !matches!(
                        b[i],
                        b' ' | b'\t'
                            | b'\n'
                            | b'\r'
                            | b','
                            | b':'
                            | b']'
                            | b'}'
                            | b'['
                            | b'{'
                            | b'"'
                    )
                {
                    i += 1;
                }
            }
        }
    }
    Ok(values)
}

/// A value starts at `at`: count it in the document and in the array it is an element of.
fn a_value(text: &str, stack: &mut [Frame], values: &mut usize, at: usize) -> Result<(), String> {
    *values += 1;
    let in_array = stack.last_mut().filter(|f| f.array).map(|f| {
        f.count += 1;
        f.count
    });
    if *values > MAX_VALUES {
        return Err(refusal(text, stack, stack.len(), at, Over::Values));
    }
    if in_array.is_some_and(|n| n > MAX_ARRAY_LEN) {
        return Err(refusal(text, stack, stack.len() - 1, at, Over::ArrayLen));
    }
    Ok(())
}

/// The index of the quote closing the string that opens at `open`, or the end of `b`.
fn string_end(b: &[u8], open: usize) -> usize {
    let mut j = open + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return j,
            _ => j += 1,
        }
    }
    b.len()
}

/// The line refusing the document: the path through the first `depth` frames (the place
/// of the array or object over its limit, or of the value over the others), the limit,
/// and the position of byte `at`.
fn refusal(text: &str, stack: &[Frame], depth: usize, at: usize, over: Over) -> String {
    let mut path = String::new();
    for f in &stack[..depth] {
        match (f.array, f.key) {
            (true, _) => path.push_str(&format!("[{}]", f.count.saturating_sub(1))),
            (false, Some((s, e))) => {
                let k = &text[s..e.min(text.len())];
                let plain = !k.is_empty()
                    && !k.as_bytes()[0].is_ascii_digit()
                    && k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
                if !path.is_empty() {
                    path.push('.');
                }
                if plain {
                    path.push_str(k);
                } else {
                    path.push_str(&format!("{k:?}"));
                }
            }
            (false, None) => {}
        }
    }
    if path.is_empty() {
        path = "top level".into();
    }
    let what = match over {
        Over::Depth => format!("nested deeper than {MAX_DEPTH} arrays and objects"),
        Over::Values => format!("more than {MAX_VALUES} values in the document"),
        Over::ArrayLen => format!("an array of more than {MAX_ARRAY_LEN} elements"),
        Over::ObjectMembers => format!("an object of more than {MAX_OBJECT_MEMBERS} members"),
    };
    let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
    let line = 1 + text[..at].bytes().filter(|&c| c == b'\n').count();
    format!(
        "{path}: {what} (line {line}, column {}; a limit that keeps what one document \
         parses into within {} MiB)",
        at - line_start + 1,
        PARSE_BUDGET >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array_of(n: usize, item: &str) -> String {
        format!("[{}]", vec![item; n].join(","))
    }

    #[test]
    fn limits_are_accepted_and_one_past_refused() {
        // Depth: MAX_DEPTH arrays inside one another, and one more.
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        check(&deep(MAX_DEPTH)).unwrap();
        let e = check(&deep(MAX_DEPTH + 1)).unwrap_err();
        assert!(e.contains("nested deeper than 32"), "{e}");
        assert!(e.starts_with("[0][0]"), "{e}");
        // Objects count as levels too.
        let deep_obj = |n: usize| format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n));
        check(&deep_obj(MAX_DEPTH)).unwrap();
        let e = check(&deep_obj(MAX_DEPTH + 1)).unwrap_err();
        assert!(e.starts_with("a.a.a."), "{e}");

        // One array.
        check(&format!(r#"{{"cpus": {}}}"#, array_of(MAX_ARRAY_LEN, "0"))).unwrap();
        let e = check(&format!(
            r#"{{"cpus": {}}}"#,
            array_of(MAX_ARRAY_LEN + 1, "0")
        ))
        .unwrap_err();
        assert!(
            e.starts_with("cpus: an array of more than 16384 elements (line 1, column"),
            "{e}"
        );

        // One object.
        let obj = |n: usize| {
            let members: Vec<String> = (0..n).map(|i| format!(r#""k{i}":0"#)).collect();
            format!(r#"{{"policy": {{"set": {{{}}}}}}}"#, members.join(","))
        };
        check(&obj(MAX_OBJECT_MEMBERS)).unwrap();
        let e = check(&obj(MAX_OBJECT_MEMBERS + 1)).unwrap_err();
        assert!(
            e.starts_with("policy.set: an object of more than 8192 members"),
            "{e}"
        );

        // The whole document: an array of four arrays, each within its own limit,
        // MAX_VALUES values in all (the arrays are values too), then one more.
        let quarter = MAX_VALUES / 4;
        let doc = |last: usize| {
            let arrays = [quarter, quarter, quarter, last].map(|n| array_of(n, "1"));
            format!("[{}]", arrays.join(",\n"))
        };
        check(&doc(quarter - 5)).unwrap();
        let e = check(&doc(quarter - 4)).unwrap_err();
        assert!(
            e.starts_with("[3][16379]: more than 65536 values in the document (line 4, column"),
            "{e}"
        );
    }

    #[test]
    fn strings_keys_and_garbage_are_scanned_as_json_is() {
        // Brackets and quotes inside strings are text, escapes included.
        check(&format!(r#"{{"a": "{}", "b\"[": 1}}"#, "[".repeat(1000))).unwrap();
        // A path with a key that is not an identifier is quoted, escapes and all.
        let many: Vec<&str> = vec!["0"; MAX_ARRAY_LEN + 1];
        let e = check(&format!(
            r#"{{"cpus": {{"overrides": {{"0-3": [{}]}}}}}}"#,
            many.join(",")
        ))
        .unwrap_err();
        assert!(e.starts_with(r#"cpus.overrides."0-3": an array"#), "{e}");
        // Text that is not JSON is left to serde, unless it trips a limit.
        for junk in ["", "}}]]", "nul\0l", "\"unterminated", "{\"a\" 1 2 3"] {
            check(junk).unwrap();
        }
        let e = check(&"[".repeat(100_000)).unwrap_err();
        assert!(e.contains("nested deeper"), "{e}");
        // The line and column of the refused byte, however far in.
        let text = format!(
            "{{\n  \"x\": [\n{}\n]}}",
            vec!["1"; MAX_ARRAY_LEN + 1].join(",\n")
        );
        let e = check(&text).unwrap_err();
        assert!(
            e.contains(&format!("(line {}, column 1;", MAX_ARRAY_LEN + 3)),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }
}

/// What the limits let a document take of the fixed heap, measured in its blocks
/// (`policy::tests_alloc`): the documents below are the costliest shapes at the limits.
#[cfg(test)]
#[path = "../tests/common/limit_docs.rs"]
mod limit_docs;

#[cfg(test)]
mod heap_tests {
    use super::limit_docs::{WAKE, list, newidle_candidates, with};
    use super::*;
    use crate::explain::{PolicyOverride, Scenario, parse_json_object};
    use crate::policy::TraceRecord;
    use crate::policy::tests_alloc::peak_fixed_heap_bytes;
    use std::path::Path;

    const RECORD: &str = r#"{"topology": {"shape": "1x1x4x1"}, "policy": {"preset": "mainline"},
        "cpus": ["busy", "busy", "idle", "busy"], "task": {"pid": 7, "prev_cpu": 0},
        "wake": {"waker_cpu": 1, "sync": true}, "recorded_cpu": 0}"#;

    /// Arrays of `item` (`values_each` values apiece) filling `values` values, each array
    /// within MAX_ARRAY_LEN.
    fn filled(values: usize, item: &str, values_each: usize) -> String {
        let per_array = MAX_ARRAY_LEN.min((MAX_VALUES - 1) / values_each);
        let mut left = values / values_each;
        let mut arrays = Vec::new();
        while left > 0 && arrays.len() < MAX_ARRAY_LEN {
            let n = left.min(per_array);
            arrays.push(list(n, item));
            left -= n;
        }
        format!("[{}]", arrays.join(","))
    }

    /// The values of `text` as the scan counts them.
    fn values_of(text: &str) -> usize {
        scan(text).unwrap()
    }

    /// The costliest documents the limits let through, and the most each took.
    fn documents() -> Vec<(&'static str, bool, String)> {
        // Room for the rest of the document, then the flag value fills the limit.
        let flag =
            |item: &str, each: usize| with(WAKE, "true", &filled(MAX_VALUES - 40, item, each));
        let members = |n: usize, key: &dyn Fn(usize) -> String, value: &str| {
            let m: Vec<String> = (0..n).map(|i| format!("{}:{value}", key(i))).collect();
            format!("{{{}}}", m.join(","))
        };
        // `base` with `insert` placed before `anchor`, one of its members.
        let before = |base: &str, anchor: &str, insert: String| {
            with(base, anchor, &format!("{insert}, {anchor}"))
        };
        let objects_of = |n: usize| members(n, &|i| format!("\"k{i}\""), "0");
        let overrides = members(
            crate::policy::MAX_OVERRIDES,
            &|i| format!("\"{}\"", i % 8),
            "{\"nr_running\": 2}",
        );
        vec![
            ("flag value: one-element arrays", false, flag("[0]", 2)),
            ("flag value: escaped strings", false, flag(r#""\n""#, 1)),
            ("flag value: numbers", false, flag("0", 1)),
            (
                "flag value: objects of 7 members",
                false,
                flag(r#"{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0}"#, 8),
            ),
            (
                "flag value: one object of escaped keys",
                false,
                with(
                    WAKE,
                    "true",
                    &members(
                        MAX_OBJECT_MEMBERS,
                        &|i| format!("\"\\n{i}\""),
                        "[0,0,0,0,0,0]",
                    ),
                ),
            ),
            (
                "policy.set: keys",
                false,
                with(
                    WAKE,
                    r#"{"wa_bias": true}"#,
                    &objects_of(MAX_OBJECT_MEMBERS),
                ),
            ),
            (
                "cpus: a list of empty states",
                false,
                with(
                    WAKE,
                    r#"{"default": "busy", "overrides": {"5": "idle"}}"#,
                    &list(MAX_ARRAY_LEN, "{}"),
                ),
            ),
            (
                "cpus.overrides: the most overrides",
                false,
                with(WAKE, r#"{"5": "idle"}"#, &overrides),
            ),
            (
                "newidle.candidates",
                false,
                newidle_candidates(MAX_ARRAY_LEN, r#"{"pid":1,"src_cpu":1}"#),
            ),
            (
                "expect.rules",
                false,
                before(
                    WAKE,
                    r#""task""#,
                    format!(
                        r#""expect": {{"rules": {}}}"#,
                        list(MAX_ARRAY_LEN, r#""\u0041""#)
                    ),
                ),
            ),
            (
                "trace: recorded_chain",
                true,
                before(
                    RECORD,
                    r#""recorded_cpu""#,
                    format!(
                        r#""recorded_chain": {}"#,
                        list(MAX_ARRAY_LEN, r#""\u0041""#)
                    ),
                ),
            ),
            (
                "trace: llc_state and changed_cpus",
                true,
                before(
                    RECORD,
                    r#""recorded_cpu""#,
                    format!(
                        r#""llc_state": {}, "changed_cpus": {}"#,
                        list(MAX_ARRAY_LEN, r#"{"llc":0}"#),
                        list(MAX_ARRAY_LEN, "0")
                    ),
                ),
            ),
            ("trace: a record of 1024 CPUs", true, record_of_1024_cpus()),
        ]
    }

    /// A trace record as the agent writes one on the largest topology.
    fn record_of_1024_cpus() -> String {
        let topo = crate::policy::Topology::from_shape(2, 4, 64, 2).unwrap();
        let cfg = crate::policy::Config::default();
        crate::explain::synthetic::SyntheticTrace::new(topo, cfg)
            .unwrap()
            .next()
            .unwrap()
            .to_json_line()
    }

    /// Parses (and, a scenario, resolves) `text` as `explain` would; the peak in blocks.
    fn parse_peak(text: &str, trace: bool) -> u64 {
        let ((), peak) = peak_fixed_heap_bytes(|| {
            if trace {
                let _ = parse_json_object::<TraceRecord>(text);
            } else if let Ok(s) = parse_json_object::<Scenario>(text) {
                let _ = s.resolve(Path::new("."), &PolicyOverride::default());
            }
        });
        peak
    }

    #[test]
    fn a_document_at_the_limits_fits_the_parse_budget() {
        let mut table = String::new();
        for (what, trace, text) in documents() {
            check(&text).unwrap_or_else(|e| panic!("{what}: {e}"));
            let values = values_of(&text);
            let peak = parse_peak(&text, trace);
            table.push_str(&format!(
                "| {what} | {} | {values} | {:.1} | {} |\n",
                text.len() >> 10,
                peak as f64 / (1 << 20) as f64,
                peak / values as u64
            ));
            assert!(
                peak <= PARSE_BUDGET,
                "{what}: {peak} bytes of the fixed heap, over {PARSE_BUDGET}"
            );
            assert!(
                peak / values as u64 <= MAX_VALUE_COST,
                "{what}: {} bytes per value, over {MAX_VALUE_COST}",
                peak / values as u64
            );
        }
        // docs/benchmarks/large-inputs.md: cargo test --lib heap_tests -- --nocapture
        eprintln!(
            "| document | KiB | values | peak MiB | bytes per value |\n|---|---|---|---|---|\n{table}"
        );
    }

    #[test]
    fn the_largest_record_we_write_is_well_within_the_limits() {
        let text = record_of_1024_cpus();
        assert!(values_of(&text) * 2 < MAX_VALUES, "{}", values_of(&text));
        check(&text).unwrap();
    }
}
