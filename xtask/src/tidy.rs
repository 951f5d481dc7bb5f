//! Structural rules of the workspace, checked by `cargo xtask tidy` and by `cargo test`:
//!
//! 1. every crate inherits the workspace lints (`[lints] workspace = true`);
//! 2. every `.rs` file starts with a `//!` doc comment;
//! 3. no crate but the facade depends on more than one sibling layer's implementation crate
//!    (`kinformer-core` is the shared vocabulary, not a layer, and the simulated server and the CLI
//!    are not layers either);
//! 4. the leaf layers (reflector, delta FIFO, indexer, lister) and the object-type crates (compact)
//!    depend on no kinformer crate but `kinformer-core`, and the few siblings `LEAF_ALLOWED`
//!    names with its reason (dev-dependencies may use any);
//! 5. every third-party `[workspace.dependencies]` entry is used by some crate (internal crates
//!    are all listed there, used yet or not).
//!
//! The packages and their dependencies come from `cargo metadata`; only what it does not report
//! (a crate's `[lints]`, the root's `[workspace.dependencies]`) is read from the manifests.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

/// Crates that implement a pipeline layer.
const LAYERS: &[&str] = &[
    "kinformer-client",
    "kinformer-reflector",
    "kinformer-delta-fifo",
    "kinformer-indexer",
    "kinformer-shared-informer",
    "kinformer-lister",
];

/// Crates that stand on the shared vocabulary alone: the leaf layers (the shared informer too: it
/// takes any stream of store events, so it needs no reflector), the object-type crates (an
/// object form is just another `Object`, usable by every layer), and the test support, whose
/// scripted `ListWatch` proves that a source needs no HTTP client.
const LEAF_LAYERS: &[&str] = &[
    "kinformer-reflector",
    "kinformer-delta-fifo",
    "kinformer-indexer",
    "kinformer-shared-informer",
    "kinformer-lister",
    "kinformer-compact",
    "kinformer-test-support",
];

/// Siblings a leaf may lean on beyond core: the test support's recording handler implements the
/// shared informer's handler trait (behind its `informer` feature); the compact forms re-export
/// the compact form over protobuf, which lives beside the protobuf codec that decodes it, with
/// its `Form` impl (kinformer-protobuf is an encoding, not a layer, and stands on core alone).
/// No layer may.
const LEAF_ALLOWED: &[(&str, &str)] = &[
    ("kinformer-test-support", "kinformer-shared-informer"),
    ("kinformer-compact", "kinformer-protobuf"),
];

/// Crates allowed to wire several layers together.
const WIRING: &[&str] = &["kinformer", "kinformer-cli", "kinformer-benches", "xtask"];

/// The part of `cargo metadata --format-version 1 --no-deps` the rules read.
#[derive(Debug, Deserialize)]
pub(crate) struct Metadata {
    packages: Vec<Package>,
}

/// One workspace member.
#[derive(Debug, Deserialize)]
struct Package {
    name: String,
    manifest_path: PathBuf,
    dependencies: Vec<Dependency>,
}

/// One declared dependency of a member.
#[derive(Debug, Deserialize)]
struct Dependency {
    /// The package depended on (renames are not used in this workspace).
    name: String,
    /// `None` for a normal dependency, `Some("dev")` or `Some("build")` otherwise.
    kind: Option<String>,
}

impl Dependency {
    fn is_normal(&self) -> bool {
        self.kind.is_none()
    }
}

/// Checks every rule; returns the list of problems found.
pub(crate) fn check(root: &Path) -> Result<(), Vec<String>> {
    let metadata = metadata(root).map_err(|e| vec![e])?;
    let workspace_deps = workspace_dependencies(&root.join("Cargo.toml")).map_err(|e| vec![e])?;
    let mut problems = check_dependencies(&metadata, &workspace_deps);
    for package in &metadata.packages {
        let manifest = &package.manifest_path;
        let text = fs::read_to_string(manifest).unwrap_or_default();
        match inherits_lints(&text) {
            Ok(true) => {}
            Ok(false) => problems.push(format!(
                "{}: lacks `[lints] workspace = true`",
                rel(root, manifest)
            )),
            Err(e) => problems.push(format!("{}: {e}", rel(root, manifest))),
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

/// Runs `cargo metadata` on the workspace.
fn metadata(root: &Path) -> Result<Metadata, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("cannot read cargo metadata: {e}"))
}

/// The rules over the dependency graph (3, 4, 5).
fn check_dependencies(metadata: &Metadata, workspace_deps: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    for package in &metadata.packages {
        let name = package.name.as_str();
        let normal: Vec<&str> = package
            .dependencies
            .iter()
            .filter(|d| d.is_normal())
            .map(|d| d.name.as_str())
            .collect();
        if !WIRING.contains(&name) {
            let layers: Vec<&str> = normal
                .iter()
                .copied()
                .filter(|d| LAYERS.contains(d))
                .collect();
            if layers.len() > 1 {
                problems.push(format!(
                    "{name} depends on several layer crates ({}); only the facade wires layers",
                    layers.join(", ")
                ));
            }
        }
        if LEAF_LAYERS.contains(&name) {
            let siblings: Vec<&str> = normal
                .iter()
                .copied()
                .filter(|d| d.starts_with("kinformer") && *d != "kinformer-core")
                .filter(|d| !LEAF_ALLOWED.contains(&(name, *d)))
                .collect();
            if !siblings.is_empty() {
                problems.push(format!(
                    "{name} depends on {}; a leaf layer depends on kinformer-core only",
                    siblings.join(", ")
                ));
            }
        }
    }
    let used: BTreeSet<&str> = metadata
        .packages
        .iter()
        .flat_map(|p| p.dependencies.iter().map(|d| d.name.as_str()))
        .collect();
    for dep in workspace_deps {
        if !used.contains(dep.as_str()) {
            problems.push(format!(
                "Cargo.toml: `[workspace.dependencies]` entry `{dep}` is used by no crate"
            ));
        }
    }
    problems
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// The third-party names in the root manifest's `[workspace.dependencies]` (those without a
/// `path`).
fn workspace_dependencies(manifest: &Path) -> Result<BTreeSet<String>, String> {
    let text = fs::read_to_string(manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    third_party_dependencies(&text).map_err(|e| format!("{}: {e}", manifest.display()))
}

/// [`workspace_dependencies`] of a manifest's text.
fn third_party_dependencies(text: &str) -> Result<BTreeSet<String>, String> {
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
    Ok(doc
        .get("workspace")
        .and_then(|w| w.get("dependencies"))
        .and_then(|d| d.as_table_like())
        .map(|t| {
            t.iter()
                .filter(|(_, v)| v.get("path").is_none())
                .map(|(k, _)| k.to_owned())
                .collect()
        })
        .unwrap_or_default())
}

/// Whether a manifest says `[lints] workspace = true`.
fn inherits_lints(text: &str) -> Result<bool, String> {
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
    Ok(doc
        .get("lints")
        .and_then(|l| l.get("workspace"))
        .and_then(|w| w.as_bool())
        == Some(true))
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

#[cfg(test)]
mod tests {
    use super::*;

    // Holds on the workspace as it is; each rule is also tested on its own below.
    #[test]
    fn workspace_is_tidy() {
        if let Err(problems) = check(&crate::workspace_root()) {
            panic!("tidy found problems:\n{}", problems.join("\n"));
        }
    }

    /// A package of a fake metadata document: its name and its `(dependency, kind)` pairs.
    type FakePackage<'a> = (&'a str, &'a [(&'a str, Option<&'a str>)]);

    /// A `cargo metadata` document holding these packages.
    fn fake(packages: &[FakePackage<'_>]) -> Metadata {
        let packages: Vec<serde_json::Value> = packages
            .iter()
            .map(|(name, deps)| {
                serde_json::json!({
                    "name": name,
                    "version": "0.1.0",
                    "manifest_path": format!("/ws/crates/{name}/Cargo.toml"),
                    "dependencies": deps.iter().map(|(d, kind)| serde_json::json!({
                        "name": d, "kind": kind, "req": "*", "optional": false,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let doc = serde_json::json!({"packages": packages, "workspace_members": [], "version": 1});
        serde_json::from_value(doc).unwrap()
    }

    #[test]
    fn the_dependency_rules_catch_what_they_claim_to() {
        let used = |names: &[&str]| names.iter().map(|s| (*s).to_owned()).collect();
        // Each case: the packages, the workspace dependencies, and the problems expected.
        let cases: &[(&[FakePackage<'_>], &[&str], &[&str])] = &[
            // Leaf layers on core alone, siblings only as dev-dependencies: tidy.
            (
                &[
                    ("kinformer-core", &[("serde", None)]),
                    (
                        "kinformer-lister",
                        &[
                            ("kinformer-core", None),
                            ("kinformer-indexer", Some("dev")),
                            ("kinformer-sim", Some("dev")),
                        ],
                    ),
                    ("kinformer-indexer", &[("kinformer-core", None)]),
                ],
                &[
                    "kinformer-core",
                    "kinformer-indexer",
                    "kinformer-sim",
                    "serde",
                ],
                &[],
            ),
            // A leaf layer with a sibling as a normal dependency.
            (
                &[(
                    "kinformer-lister",
                    &[("kinformer-core", None), ("kinformer-indexer", None)],
                )],
                &[],
                &[
                    "kinformer-lister depends on kinformer-indexer; a leaf layer depends on \
                     kinformer-core only",
                ],
            ),
            // Not only layers: the simulated server and the client are siblings too.
            (
                &[(
                    "kinformer-reflector",
                    &[("kinformer-client", None), ("kinformer-sim", None)],
                )],
                &[],
                &[
                    "kinformer-reflector depends on kinformer-client, kinformer-sim; a leaf \
                     layer depends on kinformer-core only",
                ],
            ),
            // The test support may implement the shared informer's handler trait; nothing more.
            (
                &[(
                    "kinformer-test-support",
                    &[
                        ("kinformer-core", None),
                        ("kinformer-shared-informer", None),
                        ("kinformer-sim", None),
                    ],
                )],
                &[],
                &[
                    "kinformer-test-support depends on kinformer-sim; a leaf layer depends on \
                     kinformer-core only",
                ],
            ),
            // The shared informer takes a stream of events: a reflector behind it is the
            // caller's choice, never its dependency.
            (
                &[(
                    "kinformer-shared-informer",
                    &[("kinformer-core", None), ("kinformer-reflector", None)],
                )],
                &[],
                &[
                    "kinformer-shared-informer depends on kinformer-reflector; a leaf layer \
                     depends on kinformer-core only",
                ],
            ),
            // Two layers in a crate that does not wire them; the facade may.
            (
                &[
                    (
                        "kinformer-shared-informer",
                        &[("kinformer-client", None), ("kinformer-indexer", None)],
                    ),
                    (
                        "kinformer",
                        &[("kinformer-client", None), ("kinformer-indexer", None)],
                    ),
                ],
                &[],
                &[
                    "kinformer-shared-informer depends on several layer crates \
                     (kinformer-client, kinformer-indexer); only the facade wires layers",
                    "kinformer-shared-informer depends on kinformer-client, kinformer-indexer; a \
                     leaf layer depends on kinformer-core only",
                ],
            ),
            // A workspace dependency nobody uses.
            (
                &[("kinformer-core", &[("serde", Some("dev"))])],
                &["serde", "memchr"],
                &["Cargo.toml: `[workspace.dependencies]` entry `memchr` is used by no crate"],
            ),
        ];
        for (packages, deps, want) in cases {
            let got = check_dependencies(&fake(packages), &used(deps));
            assert_eq!(got, *want, "{packages:?}");
        }
    }

    #[test]
    fn the_manifest_rules_catch_what_they_claim_to() {
        let bad = "[package]\nname = \"kinformer-reflector\"\n[dependencies]\nkinformer-client.workspace = true\n";
        assert_eq!(inherits_lints(bad), Ok(false));
        let good = "[package]\nname = \"x\"\n\n[lints]\nworkspace = true\n";
        assert_eq!(inherits_lints(good), Ok(true));
        assert!(inherits_lints("[lints").is_err());
        let root = "[workspace.dependencies]\nkinformer-core = { path = \"crates/kinformer-core\" }\nserde = \"1\"\nclap = { version = \"4\", features = [\"derive\"] }\n";
        let names: Vec<String> = third_party_dependencies(root)
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(names, ["clap", "serde"]);
    }
}
