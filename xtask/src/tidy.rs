//! Structural rules of the workspace, checked by `cargo xtask tidy` and by `cargo test`:
//!
//! 1. every crate inherits the workspace lints (`[lints] workspace = true`);
//! 2. every `.rs` file starts with a `//!` doc comment;
//! 3. no crate but the facade depends on more than one sibling layer's implementation crate
//!    (`kinformer-core` is the shared vocabulary, not a layer, and the simulated server and the CLI
//!    are not layers either).

use std::fs;
use std::path::{Path, PathBuf};

/// Crates that implement a pipeline layer.
const LAYERS: &[&str] = &[
    "kinformer-client",
    "kinformer-reflector",
    "kinformer-delta-fifo",
    "kinformer-indexer",
    "kinformer-shared-informer",
    "kinformer-lister",
];

/// Crates allowed to wire several layers together.
const WIRING: &[&str] = &["kinformer", "kinformer-cli", "kinformer-benches", "xtask"];

/// Checks every rule; returns the list of problems found.
pub(crate) fn check(root: &Path) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    for manifest in manifests(root) {
        let text = fs::read_to_string(&manifest).unwrap_or_default();
        let name = package_name(&text).unwrap_or_default();
        if !inherits_lints(&text) {
            problems.push(format!(
                "{}: lacks `[lints] workspace = true`",
                rel(root, &manifest)
            ));
        }
        if !WIRING.contains(&name.as_str()) {
            let layers = layer_dependencies(&text);
            if layers.len() > 1 {
                problems.push(format!(
                    "{}: {name} depends on several layer crates ({}); only the facade wires layers",
                    rel(root, &manifest),
                    layers.join(", ")
                ));
            }
        }
        let dir = manifest.parent().expect("a manifest has a folder");
        for file in rust_files(dir) {
            let text = fs::read_to_string(&file).unwrap_or_default();
            if !text.trim_start().starts_with("//!") {
                problems.push(format!(
                    "{}: does not start with a `//!` doc comment",
                    rel(root, &file)
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// The manifests of every workspace member: `crates/*`, `xtask`, `benches`.
fn manifests(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(root.join("crates")) {
        for e in entries.flatten() {
            let m = e.path().join("Cargo.toml");
            if m.is_file() {
                out.push(m);
            }
        }
    }
    for member in ["xtask", "benches"] {
        let m = root.join(member).join("Cargo.toml");
        if m.is_file() {
            out.push(m);
        }
    }
    out.sort();
    out
}

/// Every `.rs` file below a crate folder, skipping build output.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name()
                    .is_some_and(|n| n != "target" && n != "fixtures")
                {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Lines of a TOML section (`[name]`), a light reading that is enough for our manifests.
fn section<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let header = format!("[{name}]");
    let mut inside = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            inside = t == header;
        } else if inside && !t.is_empty() && !t.starts_with('#') {
            lines.push(t);
        }
    }
    lines
}

fn package_name(text: &str) -> Option<String> {
    section(text, "package").iter().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "name").then(|| v.trim().trim_matches('"').to_owned())
    })
}

fn inherits_lints(text: &str) -> bool {
    section(text, "lints")
        .iter()
        .any(|l| l.replace(' ', "") == "workspace=true")
}

/// Layer crates named in `[dependencies]` (dev-dependencies may wire layers for tests).
fn layer_dependencies(text: &str) -> Vec<String> {
    section(text, "dependencies")
        .iter()
        .filter_map(|l| {
            let key = l.split(['=', '.']).next()?.trim();
            LAYERS.contains(&key).then(|| key.to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_is_tidy() {
        if let Err(problems) = check(&crate::workspace_root()) {
            panic!("tidy found problems:\n{}", problems.join("\n"));
        }
    }

    #[test]
    fn the_rules_catch_what_they_claim_to() {
        let bad = "[package]\nname = \"kinformer-reflector\"\n[dependencies]\nkinformer-client.workspace = true\nkinformer-indexer = { workspace = true }\n";
        assert!(!inherits_lints(bad));
        assert_eq!(package_name(bad).as_deref(), Some("kinformer-reflector"));
        assert_eq!(
            layer_dependencies(bad),
            ["kinformer-client", "kinformer-indexer"]
        );
        let good = "[package]\nname = \"x\"\n\n[lints]\nworkspace = true\n";
        assert!(inherits_lints(good));
        assert!(layer_dependencies(good).is_empty());
    }
}
