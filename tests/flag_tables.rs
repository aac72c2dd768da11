//! The flag tables of README.md and of src/policy/mod.rs's module documentation are
//! `scx_wakelab::policy::flag_table()`, rendered from the `flags!` table: this test fails
//! when either file's table differs, and prints the table it should hold.  To rewrite both
//! files' tables from the flags:
//!
//!     WAKELAB_UPDATE_FLAG_TABLES=1 cargo test --test flag_tables

use std::path::Path;

use scx_wakelab::policy::flag_table;

const UPDATE: &str = "WAKELAB_UPDATE_FLAG_TABLES";

/// Each file holding a flag table, and what its table's lines start with.
const FILES: &[(&str, &str)] = &[("README.md", ""), ("src/policy/mod.rs", "//! ")];

/// The byte range of the table in `text`: from its header line (`PREFIX| flag`) to the
/// end of the last line that starts with `PREFIX|`.
fn table_span(text: &str, prefix: &str) -> Option<(usize, usize)> {
    let head = format!("{prefix}| flag");
    let row = format!("{prefix}|");
    let mut at = 0;
    let mut span: Option<(usize, usize)> = None;
    for line in text.split_inclusive('\n') {
        let end = at + line.len();
        match span {
            None if line.starts_with(&head) => span = Some((at, end)),
            Some((start, _)) if line.starts_with(&row) => span = Some((start, end)),
            Some(_) => break,
            None => {}
        }
        at = end;
    }
    span
}

/// The rendered table as `prefix` writes it.
fn with_prefix(table: &str, prefix: &str) -> String {
    table.lines().map(|l| format!("{prefix}{l}\n")).collect()
}

#[test]
fn flag_tables_are_rendered_from_flags() {
    let want = flag_table();
    let update = std::env::var(UPDATE).is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    for (file, prefix) in FILES {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        let (start, end) = table_span(&text, prefix)
            .unwrap_or_else(|| panic!("{file}: no flag table (a line starting '{prefix}| flag')"));
        let rendered = with_prefix(&want, prefix);
        if text[start..end] == rendered {
            continue;
        }
        if update {
            let new = format!("{}{rendered}{}", &text[..start], &text[end..]);
            std::fs::write(&path, new).unwrap_or_else(|e| panic!("{file}: {e}"));
            eprintln!("{file}: flag table rewritten");
        } else {
            stale.push(*file);
        }
    }
    assert!(
        stale.is_empty(),
        "the flag table of {} differs from FLAGS; it should read:\n\n{want}\n\
         (rewrite with {UPDATE}=1 cargo test --test flag_tables)",
        stale.join(" and ")
    );
}

#[test]
fn the_table_is_found_where_it_is() {
    let text = "intro\n| flag | a |\n|---|---|\n| `x` | y |\n\nafter\n| other |\n";
    let (s, e) = table_span(text, "").unwrap();
    assert_eq!(&text[s..e], "| flag | a |\n|---|---|\n| `x` | y |\n");
    let doc = "//! ## Flags\n//!\n//! | flag | a |\n//! | `x` | y |\n//!\n//! ## Next\n";
    let (s, e) = table_span(doc, "//! ").unwrap();
    assert_eq!(&doc[s..e], "//! | flag | a |\n//! | `x` | y |\n");
    assert_eq!(table_span("no table\n", ""), None);
}
