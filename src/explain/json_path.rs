//! Naming the field a serde_json error is about.
//!
//! serde_json reports where in the text a value failed to deserialize (line and column)
//! but not which field that was.  Rather than wrap every deserializer to track the path
//! (what the `serde_path_to_error` crate does), we re-read the text up to the error's
//! position with a tiny JSON tokenizer that keeps the stack of open objects and arrays and
//! the key or index currently being read.  That stack *is* the path: `task.prev_cpu`,
//! `cpus[3].load`, `cpus.overrides."32-63".nr_running`.  It works for every type, derived
//! or hand-written, because it only looks at the text.
//!
//! serde_json detects a bad value after reading it, and a missing field at the object's
//! closing brace, so the position names the bad value's key or the object that lacks the
//! field; both are what a user needs to see.

use std::fmt::Write as _;

enum Frame {
    Object {
        /// The key whose value is being read, once its string has been seen.
        key: Option<String>,
        /// True between `{`/`,` and the key string.
        expecting_key: bool,
    },
    Array {
        index: usize,
    },
}

/// The byte offset just after `line`:`column` (serde_json's 1-based position), clamped.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut start = 0usize;
    for _ in 1..line.max(1) {
        match text[start..].find('\n') {
            Some(i) => start += i + 1,
            None => return text.len(),
        }
    }
    (start + column).min(text.len())
}

/// The path of the value being read at `line`:`column`, or "" at the top level.
pub fn path_at(text: &str, line: usize, column: usize) -> String {
    let end = offset_of(text, line, column);
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0usize;
    while i < end {
        match bytes[i] {
            b'{' => stack.push(Frame::Object {
                key: None,
                expecting_key: true,
            }),
            b'[' => stack.push(Frame::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object { key, expecting_key }) => {
                    *key = None;
                    *expecting_key = true;
                }
                Some(Frame::Array { index }) => *index += 1,
                None => {}
            },
            b'"' => {
                // Read the string (escapes included) up to its closing quote or `end`.
                let mut j = i + 1;
                while j < bytes.len() && bytes[j] != b'"' {
                    if bytes[j] == b'\\' {
                        j += 1;
                    }
                    j += 1;
                }
                let close = j.min(bytes.len());
                let s = text[i + 1..close].to_string();
                if let Some(Frame::Object { key, expecting_key }) = stack.last_mut()
                    && *expecting_key
                {
                    *key = Some(s);
                    *expecting_key = false;
                }
                i = close;
            }
            _ => {}
        }
        i += 1;
    }
    let mut path = String::new();
    for f in &stack {
        match f {
            Frame::Object { key: Some(k), .. } => {
                let plain = !k.is_empty()
                    && !k.as_bytes()[0].is_ascii_digit()
                    && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                if plain {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                } else {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    let _ = write!(path, "{k:?}");
                }
            }
            Frame::Object { key: None, .. } => {}
            Frame::Array { index } => {
                let _ = write!(path, "[{index}]");
            }
        }
    }
    path
}

/// serde_json's message without its " at line L column C" suffix.
pub fn message_without_position(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    full.strip_suffix(&suffix).unwrap_or(&full).to_string()
}

/// One line naming the field: `task.prev_cpu: invalid type: string "x", expected usize
/// (line 5, column 22)`.
pub fn describe_error(text: &str, e: &serde_json::Error) -> String {
    let msg = message_without_position(e);
    if e.is_syntax() || e.is_eof() || e.line() == 0 {
        return format!("{msg} (line {}, column {})", e.line(), e.column());
    }
    let path = path_at(text, e.line(), e.column());
    let at = if path.is_empty() {
        "top level".to_string()
    } else {
        path
    };
    format!("{at}: {msg} (line {}, column {})", e.line(), e.column())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        prev_cpu: usize,
        #[serde(default)]
        load: u64,
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        task: Inner,
        #[serde(default)]
        list: Vec<Inner>,
        #[serde(default)]
        map: std::collections::BTreeMap<String, Inner>,
    }

    fn err(text: &str) -> String {
        let e = serde_json::from_str::<Outer>(text).unwrap_err();
        describe_error(text, &e)
    }

    #[test]
    fn names_the_field() {
        let m = err("{\n  \"task\": {\"prev_cpu\": \"x\"}\n}");
        assert!(
            m.starts_with("task.prev_cpu: invalid type: string \"x\""),
            "{m}"
        );
        let m = err(r#"{"task": {"prev_cpu": 1, "bogus": 2}}"#);
        assert!(m.starts_with("task.bogus: unknown field `bogus`"), "{m}");
        let m = err(r#"{"task": {"load": 3}}"#);
        assert!(m.starts_with("task: missing field `prev_cpu`"), "{m}");
        let m = err(r#"{"task": {"prev_cpu": 1}, "list": [{"prev_cpu": 1}, {"prev_cpu": -1}]}"#);
        assert!(m.starts_with("list[1].prev_cpu: invalid value"), "{m}");
        let m =
            err(r#"{"task": {"prev_cpu": 1}, "map": {"32-63": {"prev_cpu": 1, "load": "a,b"}}}"#);
        assert!(m.starts_with(r#"map."32-63".load: invalid type"#), "{m}");
        let m = err(r#"{"task": {"prev_cpu": 1}"#);
        assert!(m.contains("EOF") && m.contains("line 1"), "{m}");
        let m = err(r#"{}"#);
        assert!(m.starts_with("top level: missing field `task`"), "{m}");
    }
}
