//! `cargo xtask protobuf [--check]`: generates kinformer-protobuf's conversions between
//! k8s-openapi's types and k8s-pb's messages, `crates/kinformer-protobuf/src/convert/generated.rs`.
//!
//! Both crates are read from source (found through `cargo metadata`) and parsed with `syn`:
//! k8s-pb's one `mod.rs` per API group and version, and every Kubernetes version's tree of
//! k8s-openapi (`src/v1_33` ..). Starting from the kinds the simulated server serves, every
//! struct reachable through k8s-openapi's field types gets a `FromMessage` and a `ToMessage`
//! impl, one line per field; a field (or type) present only in some Kubernetes versions is
//! wrapped in k8s-openapi's `k8s_if_*` macros, so the file compiles under every version. Fields
//! on one side only are listed at the top of the file; a type the generator cannot map is an
//! error, never skipped.
//!
//! `--check` generates in memory and fails when the checked-in file differs (a test runs it).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// Arguments of `cargo xtask protobuf`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Fails when the checked-in file differs from what would be generated, writing nothing.
    #[arg(long)]
    check: bool,
}

/// The generated file, relative to the workspace root.
pub(crate) const OUTPUT: &str = "crates/kinformer-protobuf/src/convert/generated.rs";

/// The kinds the simulated server serves: `(module, type)`, the same path in both crates.
const ROOTS: &[(&str, &str)] = &[
    ("api::core::v1", "Pod"),
    ("api::core::v1", "Service"),
    ("api::core::v1", "ConfigMap"),
    ("api::core::v1", "Secret"),
    ("api::core::v1", "ServiceAccount"),
    ("api::core::v1", "Endpoints"),
    ("api::core::v1", "Event"),
    ("api::core::v1", "Namespace"),
    ("api::core::v1", "Node"),
    ("api::apps::v1", "Deployment"),
    ("api::apps::v1", "ReplicaSet"),
    ("api::apps::v1", "StatefulSet"),
    ("api::apps::v1", "DaemonSet"),
    ("api::discovery::v1", "EndpointSlice"),
    ("api::coordination::v1", "Lease"),
];

/// Types converted by hand in `convert/mod.rs`: the generator stops at them.
const LEAVES: &[&str] = &[
    "apimachinery::pkg::apis::meta::v1::Time",
    "apimachinery::pkg::apis::meta::v1::MicroTime",
    "apimachinery::pkg::apis::meta::v1::FieldsV1",
    "apimachinery::pkg::api::resource::Quantity",
    "apimachinery::pkg::util::intstr::IntOrString",
    "apimachinery::pkg::runtime::RawExtension",
    "ByteString",
];

/// Rust types that are the same on both sides.
const SCALARS: &[&str] = &["std::string::String", "String", "bool", "i32", "i64", "f64"];

pub(crate) fn run(root: &Path, args: &Args) -> ExitCode {
    let generated = match generate(root) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("protobuf: {e}");
            return ExitCode::FAILURE;
        }
    };
    let path = root.join(OUTPUT);
    if args.check {
        match check(root, &generated) {
            Ok(()) => {
                println!("protobuf: {OUTPUT} is up to date");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("protobuf: {e}");
                ExitCode::FAILURE
            }
        }
    } else {
        match fs::write(&path, generated) {
            Ok(()) => {
                println!("protobuf: wrote {OUTPUT}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("protobuf: writing {}: {e}", path.display());
                ExitCode::FAILURE
            }
        }
    }
}

/// Compares the checked-in file with `generated`.
pub(crate) fn check(root: &Path, generated: &str) -> Result<(), String> {
    let current = fs::read_to_string(root.join(OUTPUT)).unwrap_or_default();
    if current == generated {
        Ok(())
    } else {
        Err(format!(
            "{OUTPUT} differs from what `cargo xtask protobuf` generates: run it and commit the result"
        ))
    }
}

/// The source folders of k8s-pb and k8s-openapi, from `cargo metadata`.
fn sources(root: &Path) -> Result<(PathBuf, PathBuf), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err("cargo metadata failed".into());
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("reading cargo metadata: {e}"))?;
    let find = |name: &str| -> Result<PathBuf, String> {
        let found: Vec<PathBuf> = metadata["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["name"] == name)
            .filter_map(|p| p["manifest_path"].as_str())
            .map(|m| Path::new(m).with_file_name("src"))
            .collect();
        match found.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(format!("cargo metadata lists no package {name}")),
            _ => Err(format!("cargo metadata lists {name} more than once")),
        }
    };
    Ok((find("k8s-pb")?, find("k8s-openapi")?))
}

/// One struct's fields: the field's Rust name and its type.
type Fields = Vec<(String, syn::Type)>;

/// A field's name as both crates spell it: `r#type` and `type_` are `type`, and `pod_ips`
/// (k8s-openapi) and `pod_i_ps` (prost's snake case of `podIPs`) are the same field.
fn normalize_field(name: &str) -> String {
    name.trim_start_matches("r#")
        .trim_end_matches('_')
        .replace('_', "")
        .to_lowercase()
}

/// Parses a Rust file.
fn parse(path: &Path) -> Result<syn::File, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    syn::parse_file(&text).map_err(|e| format!("parsing {}: {e}", path.display()))
}

/// A struct's named fields.
fn fields_of(item: &syn::ItemStruct) -> Fields {
    item.fields
        .iter()
        .filter_map(|f| {
            let ident = f.ident.as_ref()?;
            Some((ident.to_string(), f.ty.clone()))
        })
        .collect()
}

/// Whether a struct derives `Default` (k8s-openapi's do unless a required field has no default,
/// as `Condition`'s `Time`).
fn derives_default(item: &syn::ItemStruct) -> bool {
    item.attrs
        .iter()
        .filter(|a| a.path().is_ident("derive"))
        .any(|a| {
            let mut found = false;
            let _ = a.parse_nested_meta(|meta| {
                found |= meta.path.is_ident("Default");
                Ok(())
            });
            found
        })
}

/// k8s-pb's messages, one parsed `mod.rs` per module.
struct Pb {
    src: PathBuf,
    /// Module -> lowercased message name -> (name, fields).
    modules: HashMap<String, HashMap<String, (String, Fields)>>,
    /// `(module, message, field)` -> the field's number, from its `#[prost(.., tag = "N")]`.
    tags: HashMap<(String, String, String), u32>,
}

impl Pb {
    /// The message for the k8s-openapi type `name` in `module` (names compare case-insensitively:
    /// prost writes `HostIp` for `HostIP`).
    fn message(&mut self, module: &str, name: &str) -> Result<Option<&(String, Fields)>, String> {
        if !self.modules.contains_key(module) {
            let mut path = self.src.clone();
            path.extend(module.split("::"));
            path.push("mod.rs");
            let mut messages = HashMap::new();
            if path.exists() {
                for item in parse(&path)?.items {
                    if let syn::Item::Struct(s) = item {
                        let name = s.ident.to_string();
                        for field in &s.fields {
                            if let (Some(ident), Some(tag)) = (&field.ident, prost_tag(field)) {
                                self.tags.insert(
                                    (module.to_owned(), name.clone(), ident.to_string()),
                                    tag,
                                );
                            }
                        }
                        messages.insert(name.to_lowercase(), (name, fields_of(&s)));
                    }
                }
            }
            self.modules.insert(module.to_owned(), messages);
        }
        Ok(self.modules[module].get(&name.to_lowercase()))
    }

    /// The number of `field` in the message `name` of `module` (a message already read).
    fn tag(&self, module: &str, name: &str, field: &str) -> Result<u32, String> {
        self.tags
            .get(&(module.to_owned(), name.to_owned(), field.to_owned()))
            .copied()
            .ok_or_else(|| format!("k8s-pb's {module}::{name}.{field} has no prost tag"))
    }
}

/// A prost field's number: the `tag = "N"` of its `#[prost(..)]` attribute.
fn prost_tag(field: &syn::Field) -> Option<u32> {
    let mut tag = None;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("prost")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.input.peek(syn::Token![=]) {
                let value: syn::Lit = meta.value()?.parse()?;
                if meta.path.is_ident("tag")
                    && let syn::Lit::Str(text) = value
                {
                    tag = text.value().parse().ok();
                }
            }
            Ok(())
        });
    }
    tag
}

/// One Kubernetes version's tree of k8s-openapi.
struct OpenApi {
    /// `src/v1_NN`.
    dir: PathBuf,
    /// Module -> type name -> the file (stem) defining it.
    modules: HashMap<String, HashMap<String, String>>,
}

impl OpenApi {
    /// The struct `name` of `module` in this version (its fields, and whether it derives
    /// `Default`), or `None` when the version lacks it.
    fn fields(&mut self, module: &str, name: &str) -> Result<Option<(Fields, bool)>, String> {
        let mut dir = self.dir.clone();
        dir.extend(module.split("::"));
        if !self.modules.contains_key(module) {
            let mut files = HashMap::new();
            let mod_rs = dir.join("mod.rs");
            if mod_rs.exists() {
                for item in parse(&mod_rs)?.items {
                    // `pub use self::pod_spec::PodSpec;`
                    if let syn::Item::Use(u) = item
                        && let syn::UseTree::Path(this) = &u.tree
                        && this.ident == "self"
                        && let syn::UseTree::Path(file) = &*this.tree
                        && let syn::UseTree::Name(ty) = &*file.tree
                    {
                        files.insert(ty.ident.to_string(), file.ident.to_string());
                    }
                }
            }
            self.modules.insert(module.to_owned(), files);
        }
        let Some(file) = self.modules[module].get(name) else {
            return Ok(None);
        };
        let path = dir.join(format!("{file}.rs"));
        for item in parse(&path)?.items {
            match item {
                syn::Item::Struct(s) if s.ident == name => {
                    return Ok(Some((fields_of(&s), derives_default(&s))));
                }
                syn::Item::Enum(e) if e.ident == name => {
                    return Err(format!(
                        "{module}::{name} is an enum in k8s-openapi: add it to the hand-written leaves"
                    ));
                }
                _ => {}
            }
        }
        Err(format!("{} does not define {name}", path.display()))
    }
}

/// A type as text, for messages and comparisons: `Option<std::string::String>`.
fn type_text(ty: &syn::Type) -> String {
    let syn::Type::Path(path) = ty else {
        return "(a type that is not a path)".into();
    };
    path.path
        .segments
        .iter()
        .map(|s| match &s.arguments {
            syn::PathArguments::AngleBracketed(a) => {
                let args: Vec<String> = a
                    .args
                    .iter()
                    .map(|a| match a {
                        syn::GenericArgument::Type(t) => type_text(t),
                        _ => "_".into(),
                    })
                    .collect();
                format!("{}<{}>", s.ident, args.join(", "))
            }
            _ => s.ident.to_string(),
        })
        .collect::<Vec<_>>()
        .join("::")
}

/// The structs a k8s-openapi field type refers to (`(module, name)`), or why it cannot be mapped.
fn referenced(ty: &syn::Type, out: &mut Vec<(String, String)>) -> Result<(), String> {
    let text = || type_text(ty);
    let syn::Type::Path(path) = ty else {
        return Err(format!("cannot map the type `{}`", text()));
    };
    let segments: Vec<String> = path
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    let joined = segments.join("::");
    let args = || -> Vec<&syn::Type> {
        match &path.path.segments.last().map(|s| &s.arguments) {
            Some(syn::PathArguments::AngleBracketed(a)) => a
                .args
                .iter()
                .filter_map(|a| match a {
                    syn::GenericArgument::Type(t) => Some(t),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    };
    match joined.as_str() {
        "Option" | "std::option::Option" | "std::vec::Vec" | "Vec" => {
            for t in args() {
                referenced(t, out)?;
            }
            Ok(())
        }
        "std::collections::BTreeMap" | "BTreeMap" => match args().as_slice() {
            [key, value] if SCALARS.contains(&type_text(key).as_str()) => referenced(value, out),
            _ => Err(format!("cannot map the map type `{}`", text())),
        },
        s if SCALARS.contains(&s) => Ok(()),
        _ if segments.first().map(String::as_str) == Some("crate") => {
            let inner = &segments[1..];
            let full = inner.join("::");
            if LEAVES.contains(&full.as_str()) {
                return Ok(());
            }
            match inner {
                [module @ .., name]
                    if matches!(
                        module.first().map(String::as_str),
                        Some("api" | "apimachinery")
                    ) =>
                {
                    out.push((module.join("::"), name.clone()));
                    Ok(())
                }
                _ => Err(format!("cannot map the type `{}`", text())),
            }
        }
        _ => Err(format!("cannot map the type `{}`", text())),
    }
}

/// The Kubernetes minor versions k8s-openapi has trees for, ascending.
fn versions(openapi_src: &Path) -> Result<Vec<u32>, String> {
    let mut versions: Vec<u32> = fs::read_dir(openapi_src)
        .map_err(|e| format!("listing {}: {e}", openapi_src.display()))?
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("v1_")?
                .parse()
                .ok()
        })
        .collect();
    versions.sort_unstable();
    if versions.is_empty() {
        return Err(format!("no v1_NN trees in {}", openapi_src.display()));
    }
    Ok(versions)
}

/// Wraps `body` so it compiles only in `present` of `all` versions (both ascending). rustfmt
/// leaves a macro's body as written, so it is indented here, for a call at `depth` levels.
fn gate(all: &[u32], present: &BTreeSet<u32>, body: &str, depth: usize) -> String {
    if all.iter().all(|v| present.contains(v)) {
        return body.to_owned();
    }
    let pad = "    ".repeat(depth);
    let indent = |text: &str, levels: usize| -> String {
        let inner = "    ".repeat(depth + levels);
        text.lines()
            .map(|l| {
                if l.trim().is_empty() {
                    String::new()
                } else {
                    format!("{inner}{l}")
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (first, last) = (all[0], all[all.len() - 1]);
    // Contiguous runs of the versions present.
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &v in present {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == v => *end = v,
            _ => runs.push((v, v)),
        }
    }
    let mut out = String::new();
    for (a, b) in runs {
        let wrapped = if a == b {
            format!(
                "k8s_openapi::k8s_if_1_{a}! {{\n{}\n{pad}}}\n",
                indent(body, 1)
            )
        } else if a == first {
            format!(
                "k8s_openapi::k8s_if_le_1_{b}! {{\n{}\n{pad}}}\n",
                indent(body, 1)
            )
        } else if b == last {
            format!(
                "k8s_openapi::k8s_if_ge_1_{a}! {{\n{}\n{pad}}}\n",
                indent(body, 1)
            )
        } else {
            format!(
                "k8s_openapi::k8s_if_ge_1_{a}! {{\n{pad}    k8s_openapi::k8s_if_le_1_{b}! {{\n{}\n{pad}    }}\n{pad}}}\n",
                indent(body, 2)
            )
        };
        out.push_str(&wrapped);
    }
    out
}

/// Versions as text: `1.34+`, `1.33-1.35`, `1.36`, or a list.
fn describe(all: &[u32], present: &BTreeSet<u32>) -> String {
    let list: Vec<u32> = present.iter().copied().collect();
    let last = all[all.len() - 1];
    let contiguous = list.windows(2).all(|w| w[1] == w[0] + 1);
    if list.len() == all.len() {
        return "all versions".into();
    }
    match list.as_slice() {
        [] => "no version".into(),
        [one] => format!("1.{one}"),
        [a, .., b] if contiguous && *b == last => format!("1.{a}+"),
        [a, .., b] if contiguous => format!("1.{a}-1.{b}"),
        _ => list
            .iter()
            .map(|v| format!("1.{v}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// One type to generate.
struct Type {
    module: String,
    name: String,
    pb_name: String,
    /// The versions that have it.
    versions: BTreeSet<u32>,
    /// Whether the k8s-openapi type implements `Default`.
    default: bool,
    /// The fields converted, in k8s-pb's order.
    fields: Vec<Mapped>,
}

/// One k8s-pb field converted.
enum Mapped {
    /// `(k8s-openapi field, k8s-pb field, versions that have it, the field's number)`.
    Direct(String, String, BTreeSet<u32>, u32),
    /// A Go embedded struct: a k8s-pb field holding a message whose fields k8s-openapi inlines.
    Embedded {
        /// The k8s-pb field.
        pb_field: String,
        /// Its number.
        tag: u32,
        /// Its message's path (`pb::api::core::v1::LocalObjectReference`).
        message: String,
        /// `(k8s-openapi field, the message's field, versions that have it, its number)`.
        fields: Vec<(String, String, BTreeSet<u32>, u32)>,
    },
}

/// The message a k8s-pb field's type names (`Option<LocalObjectReference>`, or a path through
/// `super::`), as `(module, name)` from k8s-pb's root; `None` for other types.
fn pb_message_path(module: &str, ty: &syn::Type) -> Option<(String, String)> {
    let syn::Type::Path(path) = ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    if last.ident != "Option" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let Some(syn::GenericArgument::Type(syn::Type::Path(inner))) = args.args.first() else {
        return None;
    };
    let mut segments: Vec<String> = inner
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    let name = segments.pop()?;
    let mut base: Vec<String> = module.split("::").map(str::to_owned).collect();
    let mut rest = segments.as_slice();
    while let [first, tail @ ..] = rest {
        if first != "super" {
            break;
        }
        base.pop()?;
        rest = tail;
    }
    if inner.path.leading_colon.is_some() {
        return None;
    }
    base.extend(rest.iter().cloned());
    Some((base.join("::"), name))
}

/// Generates the file's text, formatted.
pub(crate) fn generate(root: &Path) -> Result<String, String> {
    let (pb_src, openapi_src) = sources(root)?;
    let all = versions(&openapi_src)?;
    let mut pb = Pb {
        src: pb_src,
        modules: HashMap::new(),
        tags: HashMap::new(),
    };
    let mut trees: Vec<(u32, OpenApi)> = all
        .iter()
        .map(|&v| {
            (
                v,
                OpenApi {
                    dir: openapi_src.join(format!("v1_{v}")),
                    modules: HashMap::new(),
                },
            )
        })
        .collect();

    let mut types: BTreeMap<(String, String), Type> = BTreeMap::new();
    let mut one_side: Vec<String> = Vec::new();
    let mut embedded_notes: Vec<String> = Vec::new();
    let mut queue: VecDeque<(String, String)> = ROOTS
        .iter()
        .map(|(m, n)| ((*m).to_owned(), (*n).to_owned()))
        .collect();
    let mut seen: BTreeSet<(String, String)> = queue.iter().cloned().collect();
    while let Some((module, name)) = queue.pop_front() {
        let (pb_name, pb_fields) = match pb.message(&module, &name)? {
            Some(found) => found.clone(),
            None => {
                return Err(format!(
                    "k8s-openapi's {module}::{name} has no k8s-pb message: cannot map it"
                ));
            }
        };
        // The struct in every version that has it.
        let mut per_version: Vec<(u32, Fields)> = Vec::new();
        let mut default = true;
        for (v, tree) in &mut trees {
            if let Some((fields, has_default)) = tree.fields(&module, &name)? {
                per_version.push((*v, fields));
                default &= has_default;
            }
        }
        if per_version.is_empty() {
            return Err(format!("no k8s-openapi version has {module}::{name}"));
        }
        let versions: BTreeSet<u32> = per_version.iter().map(|(v, _)| *v).collect();
        // Normalized name -> (k8s-openapi name, versions).
        let mut openapi_fields: BTreeMap<String, (String, BTreeSet<u32>)> = BTreeMap::new();
        for (v, fields) in &per_version {
            for (field, _) in fields {
                let entry = openapi_fields
                    .entry(normalize_field(field))
                    .or_insert_with(|| (field.clone(), BTreeSet::new()));
                if &entry.0 != field {
                    return Err(format!(
                        "{module}::{name}: fields {} and {field} look the same",
                        entry.0
                    ));
                }
                entry.1.insert(*v);
            }
        }
        // Match k8s-pb's fields: by name, or as a Go embedded struct (its message's fields are
        // the k8s-openapi struct's own: JSON inlines them).
        let mut mapped: Vec<Mapped> = Vec::new();
        let mut matched: BTreeSet<String> = BTreeSet::new();
        let mut claim = |key: String, pb_field: &str| -> Result<(), String> {
            if matched.insert(key) {
                Ok(())
            } else {
                Err(format!(
                    "{module}::{pb_name}: two k8s-pb fields look like {pb_field}"
                ))
            }
        };
        for (pb_field, pb_ty) in &pb_fields {
            let key = normalize_field(pb_field);
            if let Some((field, present)) = openapi_fields.get(&key) {
                claim(key, pb_field)?;
                mapped.push(Mapped::Direct(
                    field.clone(),
                    pb_field.clone(),
                    present.clone(),
                    pb.tag(&module, &pb_name, pb_field)?,
                ));
                continue;
            }
            let embedded = match pb_message_path(&module, pb_ty) {
                Some((m, n)) => pb.message(&m, &n)?.cloned().map(|found| (m, found)),
                None => None,
            };
            let inner: Vec<(String, String, BTreeSet<u32>, u32)> = match &embedded {
                Some((m, (message, fields))) => fields
                    .iter()
                    .filter_map(|(f, _)| {
                        let (field, present) = openapi_fields.get(&normalize_field(f))?;
                        Some(
                            pb.tag(m, message, f)
                                .map(|tag| (field.clone(), f.clone(), present.clone(), tag)),
                        )
                    })
                    .collect::<Result<_, _>>()?,
                None => Vec::new(),
            };
            match embedded {
                Some((m, (message, fields))) if !inner.is_empty() => {
                    for (_, f, _, _) in &inner {
                        claim(normalize_field(f), f)?;
                    }
                    for (f, _) in &fields {
                        if !inner.iter().any(|(_, g, _, _)| g == f) {
                            one_side.push(format!(
                                "k8s-pb only: {m}::{message}.{f} (embedded in {module}::{pb_name})"
                            ));
                        }
                    }
                    embedded_notes.push(format!(
                        "{module}::{pb_name}.{pb_field} embeds {m}::{message}, whose fields k8s-openapi's {name} has inline"
                    ));
                    mapped.push(Mapped::Embedded {
                        pb_field: pb_field.clone(),
                        tag: pb.tag(&module, &pb_name, pb_field)?,
                        message: format!("pb::{m}::{message}"),
                        fields: inner,
                    });
                }
                _ => one_side.push(format!("k8s-pb only: {module}::{pb_name}.{pb_field}")),
            }
        }
        for (key, (field, present)) in &openapi_fields {
            if !matched.contains(key) {
                one_side.push(format!(
                    "k8s-openapi only: {module}::{name}.{field} ({})",
                    describe(&all, present)
                ));
            }
        }
        // Follow the types of the fields that are converted.
        for (v, fields) in &per_version {
            for (field, ty) in fields {
                if !matched.contains(&normalize_field(field)) {
                    continue;
                }
                let mut refs = Vec::new();
                referenced(ty, &mut refs)
                    .map_err(|e| format!("{module}::{name}.{field} (1.{v}): {e}"))?;
                for r in refs {
                    if seen.insert(r.clone()) {
                        queue.push_back(r);
                    }
                }
            }
        }
        if versions.len() != all.len() {
            one_side.push(format!(
                "k8s-openapi has the type {module}::{name} in {} only (k8s-pb has it)",
                describe(&all, &versions)
            ));
        }
        if !default {
            // Built as a struct literal: every field converted, in every version alike.
            let uniform = mapped
                .iter()
                .all(|m| matches!(m, Mapped::Direct(_, _, p, _) if *p == versions));
            if !uniform || matched.len() != openapi_fields.len() {
                return Err(format!(
                    "{module}::{name} has no Default, and its fields differ between versions or \
                     sides: the generator cannot build it"
                ));
            }
        }
        types.insert(
            (module.clone(), name.clone()),
            Type {
                module,
                name,
                pb_name,
                versions,
                default,
                fields: mapped,
            },
        );
    }
    one_side.sort();
    embedded_notes.sort();

    let text = render(root, &all, &types, &one_side, &embedded_notes)?;
    rustfmt(root, &text)
}

/// The file's text, before formatting.
fn render(
    root: &Path,
    all: &[u32],
    types: &BTreeMap<(String, String), Type>,
    one_side: &[String],
    embedded: &[String],
) -> Result<String, String> {
    let mut s = String::new();
    let first = all[0];
    let last = all[all.len() - 1];
    let _ = write!(
        s,
        "//! Conversions between k8s-openapi's types and k8s-pb's messages.\n\
         //!\n\
         //! GENERATED by `cargo xtask protobuf` from the sources of k8s-pb and k8s-openapi \
         (Kubernetes 1.{first} to 1.{last}): do not edit by hand, run the generator instead. \
         `cargo xtask protobuf --check` (run by xtask's tests) fails when this file is stale.\n\
         //!\n\
         //! {} types, reachable from the kinds the simulated server serves.\n\
         //!\n\
         //! Fields and types on one side only (not converted):\n\
         //!\n",
        types.len()
    );
    for line in one_side {
        let _ = writeln!(s, "//! - {line}");
    }
    s.push_str(
        "//!\n//! Go embedded structs, a message field in k8s-pb and inline fields in k8s-openapi:\n//!\n",
    );
    for line in embedded {
        let _ = writeln!(s, "//! - {line}");
    }
    s.push_str(
        "\n// Fields differ between Kubernetes versions, so each body starts from `Default` and \
         assigns the fields this version has (a struct literal could not be gated per field); in \
         some versions a body assigns nothing, leaving `out` unchanged and `m` unread. A field \
         number whose field only some versions have returns from inside the version's macro, so \
         the skip after it is unreachable in those versions.\n\
         #![allow(\n\
             clippy::field_reassign_with_default,\n\
             unreachable_code,\n\
             unused_mut,\n\
             unused_variables\n\
         )]\n\n\
         use k8s_pb as pb;\n\n\
         use crate::Error;\n\
         use crate::convert::direct::{self, Field};\n\
         use crate::convert::{FromMessage, ToMessage};\n\n",
    );

    let mut required = String::new();
    let mut elements = String::new();
    for t in types.values() {
        let openapi = format!("k8s_openapi::{}::{}", t.module, t.name);
        let message = format!("pb::{}::{}", t.module, t.pb_name);
        let mut from = String::new();
        let mut to = String::new();
        let mut arms = String::new();
        for mapped in &t.fields {
            match mapped {
                Mapped::Direct(field, _, present, tag) => {
                    arms.push_str(&arm(all, &t.versions, present, *tag, field));
                }
                Mapped::Embedded { tag, fields, .. } => {
                    let mut inner = String::new();
                    for (field, _, present, tag) in fields {
                        inner.push_str(&arm(all, &t.versions, present, *tag, field));
                    }
                    let _ = writeln!(
                        arms,
                        "{tag} => direct::fields(r.bytes(wire)?, depth, |tag, wire, r, depth| \
                         match tag {{\n{inner}_ => r.skip(wire, depth),\n}}),"
                    );
                }
            }
            match mapped {
                Mapped::Direct(field, pb_field, present, _) => {
                    let body = format!("out.{field} = FromMessage::from_message(m.{pb_field})?;");
                    from.push_str(&gate_within(all, &t.versions, present, &body));
                    let body = format!("out.{pb_field} = ToMessage::to_message(&self.{field});");
                    to.push_str(&gate_within(all, &t.versions, present, &body));
                }
                Mapped::Embedded {
                    pb_field,
                    message,
                    fields,
                    ..
                } => {
                    let var = pb_field.trim_start_matches("r#");
                    let _ = writeln!(from, "let {var} = m.{pb_field}.unwrap_or_default();");
                    let _ = writeln!(to, "let mut {var} = {message}::default();");
                    for (field, inner, present, _) in fields {
                        let body =
                            format!("out.{field} = FromMessage::from_message({var}.{inner})?;");
                        from.push_str(&gate_within(all, &t.versions, present, &body));
                        let body = format!("{var}.{inner} = ToMessage::to_message(&self.{field});");
                        to.push_str(&gate_within(all, &t.versions, present, &body));
                    }
                    let _ = writeln!(to, "out.{pb_field} = Some({var});");
                }
            }
        }
        let build = if t.default {
            format!("let mut out = Self::default();\n{from}Ok(out)")
        } else {
            let mut literal = String::new();
            for mapped in &t.fields {
                if let Mapped::Direct(field, pb_field, _, _) = mapped {
                    let _ = writeln!(
                        literal,
                        "{field}: FromMessage::from_message(m.{pb_field})?,"
                    );
                }
            }
            format!("Ok(Self {{\n{literal}}})")
        };
        let mut impls = format!(
            "impl FromMessage<{message}> for {openapi} {{\n\
             fn from_message(m: {message}) -> Result<Self, Error> {{\n\
             {build}\n}}\n}}\n\n\
             impl ToMessage<{message}> for {openapi} {{\n\
             fn to_message(&self) -> {message} {{\n\
             let mut out = {message}::default();\n{to}out\n}}\n}}\n\n"
        );
        if t.default {
            let body = if arms.is_empty() {
                "r.skip(wire, depth)".to_owned()
            } else {
                format!("match tag {{\n{arms}_ => r.skip(wire, depth),\n}}")
            };
            let _ = write!(
                impls,
                "impl direct::Merge for {openapi} {{\n\
                 fn merge_field(\n\
                 &mut self,\n\
                 tag: u32,\n\
                 wire: direct::Wire,\n\
                 r: &mut direct::Reader<'_>,\n\
                 depth: u32,\n\
                 ) -> Result<(), Error> {{\n\
                 {body}\n}}\n}}\n\n"
            );
        }
        if t.versions.len() == all.len() {
            s.push_str(&impls);
        } else {
            // rustfmt leaves a macro's body alone: format the impls before wrapping them.
            s.push_str(&gate(
                all,
                &t.versions,
                rustfmt(root, &impls)?.trim_end(),
                0,
            ));
            s.push('\n');
        }
        let element = if t.default {
            format!("crate::convert::direct::messages! {{ {openapi}; }}")
        } else {
            format!("crate::convert::direct::through_message! {{ {openapi} => {message}; }}")
        };
        let _ = writeln!(elements, "{}", gate(all, &t.versions, &element, 0));
        if t.default {
            let _ = writeln!(
                required,
                "{}",
                gate(
                    all,
                    &t.versions,
                    &format!("crate::convert::required! {{ {openapi} => {message}; }}"),
                    0,
                )
            );
        }
    }
    s.push_str(
        "// Structs as required fields: an absent message is the default value (a struct without \
         a default cannot be a required field).\n",
    );
    s.push_str(&required);
    s.push_str(
        "\n// Every struct as an element of the direct decoder: in place when it has a default, \
         through its k8s-pb message otherwise.\n",
    );
    s.push_str(&elements);
    s.push_str("\ncrate::convert::protobuf_kinds! {\n");
    for (module, name) in ROOTS {
        let t = &types[&((*module).to_owned(), (*name).to_owned())];
        let _ = writeln!(
            s,
            "    k8s_openapi::{module}::{name} => pb::{module}::{};",
            t.pb_name
        );
    }
    s.push_str("}\n");
    Ok(s)
}

/// One `match` arm of a generated `Merge`: field number `tag` decoded into `self.{field}`. A field
/// only some versions have returns from inside their macro, and is skipped in the others.
fn arm(
    all: &[u32],
    of_type: &BTreeSet<u32>,
    present: &BTreeSet<u32>,
    tag: u32,
    field: &str,
) -> String {
    let call = format!("Field::merge_field(&mut self.{field}, wire, r, depth)");
    if present == of_type {
        format!("{tag} => {call},\n")
    } else {
        format!(
            "{tag} => {{\n{}r.skip(wire, depth)\n}}\n",
            gate(all, present, &format!("return {call};"), 3)
        )
    }
}

/// Gates a field's line by its versions, unless it is in every version of its type.
fn gate_within(
    all: &[u32],
    of_type: &BTreeSet<u32>,
    present: &BTreeSet<u32>,
    body: &str,
) -> String {
    if present == of_type {
        format!("{body}\n")
    } else {
        gate(all, present, body, 2)
    }
}

/// Formats Rust text with `rustfmt --edition 2024`, as `cargo fmt` would.
fn rustfmt(root: &Path, text: &str) -> Result<String, String> {
    let mut child = Command::new("rustfmt")
        .args(["--edition", "2024", "--emit", "stdout"])
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running rustfmt: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("rustfmt has no stdin")?;
    let input = text.to_owned();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child
        .wait_with_output()
        .map_err(|e| format!("running rustfmt: {e}"))?;
    writer
        .join()
        .map_err(|_| "writing to rustfmt panicked".to_owned())?
        .map_err(|e| format!("writing to rustfmt: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "rustfmt rejected the generated text: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    String::from_utf8(output.stdout).map_err(|e| format!("rustfmt wrote non-UTF-8: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_conversions_are_up_to_date() {
        let root = crate::workspace_root();
        let generated = generate(&root).unwrap_or_else(|e| panic!("{e}"));
        if let Err(e) = check(&root, &generated) {
            panic!("{e}");
        }
    }

    #[test]
    fn a_stale_file_fails_the_check_naming_it() {
        let dir = std::env::temp_dir().join(format!("xtask-protobuf-check-{}", std::process::id()));
        let path = dir.join(OUTPUT);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "//! old\n").unwrap();
        let e = check(&dir, "//! new\n").unwrap_err();
        assert!(e.contains(OUTPUT), "{e}");
        assert_eq!(check(&dir, "//! old\n"), Ok(()));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn field_names_match_across_spellings() {
        assert_eq!(normalize_field("r#type"), normalize_field("type_"));
        assert_eq!(normalize_field("pod_i_ps"), normalize_field("pod_ips"));
        assert_ne!(normalize_field("pod_ip"), normalize_field("pod_ips"));
    }

    #[test]
    fn gates_cover_exactly_the_versions_present() {
        let all = [33, 34, 35, 36, 37];
        let gate = |present: &[u32]| gate(&all, &present.iter().copied().collect(), "x", 0);
        assert_eq!(gate(&all), "x");
        assert!(gate(&[34, 35, 36, 37]).starts_with("k8s_openapi::k8s_if_ge_1_34!"));
        assert!(gate(&[33, 34]).starts_with("k8s_openapi::k8s_if_le_1_34!"));
        assert!(gate(&[35]).starts_with("k8s_openapi::k8s_if_1_35!"));
        let middle = gate(&[34, 35]);
        assert!(middle.contains("k8s_if_ge_1_34!") && middle.contains("k8s_if_le_1_35!"));
        assert_eq!(gate(&[33, 37]).matches("x\n").count(), 2);
    }

    #[test]
    fn unmappable_types_are_errors() {
        let mut refs = Vec::new();
        for bad in [
            "Option<Box<crate::api::core::v1::PodSpec>>",
            "crate::serde_json::Value",
            "(i32, i32)",
        ] {
            let ty: syn::Type = syn::parse_str(bad).unwrap();
            assert!(referenced(&ty, &mut refs).is_err(), "{bad}");
        }
        let ty: syn::Type = syn::parse_str(
            "Option<std::collections::BTreeMap<std::string::String, crate::apimachinery::pkg::api::resource::Quantity>>",
        )
        .unwrap();
        referenced(&ty, &mut refs).unwrap();
        let ty: syn::Type =
            syn::parse_str("std::vec::Vec<crate::api::core::v1::Container>").unwrap();
        referenced(&ty, &mut refs).unwrap();
        assert_eq!(refs, [("api::core::v1".to_owned(), "Container".to_owned())]);
    }
}
