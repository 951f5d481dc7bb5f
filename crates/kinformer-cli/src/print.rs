//! What `watch` and `get` print: event lines, JSON and YAML documents, names, and kubectl-like
//! tables with a summary of each object (pods: status, node, restarts).
//!
//! Everything in a line, a name or a table cell that comes from the server is passed through
//! [`terminal::safe`] first; JSON and YAML are left to their serializers, which escape control
//! characters in strings, so that they stay exact.
//!
//! The informer caches each object in its compressed form ([`Cached`]); what is printed is
//! decoded one object at a time ([`Printable::decoded`]) and dropped once its row, line or
//! document is made, so that printing a large cache never holds every decoded object at once.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kinformer::core::TypeMeta;
use kinformer::prelude::*;
use serde_json::Value;

use crate::jsonpath::{self, Template};
use crate::terminal;

/// What the tool's informer caches of each object: its JSON, compressed, and its metadata. A pod
/// of 5 KB of JSON takes about 1.5 KB so, where the decoded [`DynamicObject`] takes several times
/// its JSON.
pub(crate) type Cached = Compressed<DynamicObject>;

/// An object to print: its name without a decode, and the object itself decoded.
pub(crate) trait Printable {
    /// `metadata.name`.
    fn printed_name(&self) -> &str;
    /// The object, decoded (for a cached object, anew on each call).
    fn decoded(&self) -> std::io::Result<Cow<'_, DynamicObject>>;
}

impl Printable for DynamicObject {
    fn printed_name(&self) -> &str {
        self.name()
    }

    fn decoded(&self) -> std::io::Result<Cow<'_, DynamicObject>> {
        Ok(Cow::Borrowed(self))
    }
}

impl<T: Printable + ?Sized> Printable for &T {
    fn printed_name(&self) -> &str {
        (**self).printed_name()
    }

    fn decoded(&self) -> std::io::Result<Cow<'_, DynamicObject>> {
        (**self).decoded()
    }
}

impl<T: Printable + ?Sized> Printable for Arc<T> {
    fn printed_name(&self) -> &str {
        (**self).printed_name()
    }

    fn decoded(&self) -> std::io::Result<Cow<'_, DynamicObject>> {
        (**self).decoded()
    }
}

/// A cached object and the type it was listed as: the API server leaves `apiVersion` and
/// `kind` out of a list's items, and a decoded item is given its resource's, as the client
/// gives them to a listed [`DynamicObject`].
#[derive(Debug, Clone)]
pub(crate) struct Item {
    /// The object as the cache holds it.
    pub(crate) object: Arc<Cached>,
    /// Its resource's `apiVersion` and `kind`, shared by every item of the resource.
    pub(crate) types: Arc<TypeMeta>,
}

impl Printable for Item {
    fn printed_name(&self) -> &str {
        self.object.name()
    }

    fn decoded(&self) -> std::io::Result<Cow<'_, DynamicObject>> {
        let mut object = self.object.typed().map_err(|source| {
            std::io::Error::other(Undecodable {
                key: self.object.key().to_string(),
                source,
            })
        })?;
        if object.types.kind.is_empty() {
            object.types.kind.clone_from(&self.types.kind);
        }
        if object.types.api_version.is_empty() {
            object.types.api_version.clone_from(&self.types.api_version);
        }
        Ok(Cow::Owned(object))
    }
}

/// A cached object that does not decode as a Kubernetes object (its metadata did, when it
/// was cached; a field of the wrong type elsewhere shows up when it is printed).
#[derive(Debug, thiserror::Error)]
#[error("cannot decode {key}: {source}")]
pub(crate) struct Undecodable {
    /// The object's key.
    pub(crate) key: String,
    /// What the decoder said.
    #[source]
    pub(crate) source: kinformer::compact::Error,
}

/// `-o`: how objects are printed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Format {
    /// One line per object or event, with a summary column.
    Text,
    /// Text with more columns (pods: IP and node).
    Wide,
    /// JSON: one document per line for `watch`, a `List` for `get`.
    Json,
    /// YAML: documents separated by `---` for `watch`, a `List` for `get`.
    Yaml,
    /// `kind/name` only.
    Name,
    /// `jsonpath=TEMPLATE`: the template, for the `List` (`get`) or each object.
    JsonPath(Template),
    /// `custom-columns=HEADER:PATH,...`: a table of these columns.
    CustomColumns(Vec<Column>),
}

impl Format {
    /// Whether `get` prints all its types as one document (a `List`, or the object alone).
    pub(crate) fn is_document(&self) -> bool {
        matches!(self, Self::Json | Self::Yaml | Self::JsonPath(_))
    }

    /// Whether this format prints a table.
    pub(crate) fn is_table(&self) -> bool {
        matches!(self, Self::Text | Self::Wide | Self::CustomColumns(_))
    }
}

/// One column of `-o custom-columns`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Column {
    /// Its header.
    pub(crate) header: String,
    /// What it shows.
    pub(crate) path: Template,
}

/// A watch event's type, as the API server names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    /// A new object.
    Added,
    /// A changed object.
    Modified,
    /// A deleted object.
    Deleted,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One event to print: its type, the object (the last known state for a tombstone), and
/// whether the delete was inferred from a relist (a tombstone).
#[derive(Debug)]
pub(crate) struct Event<'a> {
    /// ADDED, MODIFIED, DELETED.
    pub(crate) kind: EventType,
    /// The object.
    pub(crate) object: &'a DynamicObject,
    /// A delete seen only through a relist: the object's final state is unknown.
    pub(crate) tombstone: bool,
}

/// Options that shape every format.
#[derive(Debug, Clone)]
pub(crate) struct Style {
    /// The format.
    pub(crate) format: Format,
    /// Add the labels (`--show-labels`).
    pub(crate) show_labels: bool,
    /// The resource's kind in lower case, for `-o name` (`pod`, `deployment.apps`).
    pub(crate) name_prefix: String,
    /// The resource's plural, to choose a summary (`pods`).
    pub(crate) plural: String,
    /// Whether the table gets a NAMESPACE column.
    pub(crate) namespace_column: bool,
    /// Whether the table's names carry their type (`pod/web-1`), as when `get` prints several
    /// or with `--show-kind`.
    pub(crate) prefix_names: bool,
    /// `--no-headers`.
    pub(crate) no_headers: bool,
    /// `-L`: label keys shown as columns.
    pub(crate) label_columns: Vec<String>,
}

/// Prints one event.
pub(crate) fn event(out: &mut impl Write, style: &Style, e: &Event<'_>) -> std::io::Result<()> {
    let obj = e.object;
    match &style.format {
        Format::Json => {
            let line = serde_json::json!({
                "type": e.kind.as_str(),
                "key": obj.key().to_string(),
                "resourceVersion": obj.resource_version().unwrap_or(""),
                "tombstone": e.tombstone,
                "object": obj,
            });
            writeln!(out, "{}", terminal::safe_json(line.to_string()))
        }
        Format::Yaml => {
            let doc = serde_json::json!({
                "type": e.kind.as_str(),
                "tombstone": e.tombstone,
                "object": obj,
            });
            write!(out, "---\n{}", to_yaml(&doc)?)
        }
        Format::Name => writeln!(
            out,
            "{:<9}{}/{}",
            e.kind.as_str(),
            terminal::safe(&style.name_prefix),
            terminal::safe(obj.name())
        ),
        Format::JsonPath(template) => {
            writeln!(
                out,
                "{:<9}{}",
                e.kind.as_str(),
                template.render(&to_value(obj)?)
            )
        }
        Format::CustomColumns(columns) => {
            let cells = custom_cells(columns, &to_value(obj)?);
            writeln!(out, "{:<9}{}", e.kind.as_str(), cells.join("\t"))
        }
        Format::Text | Format::Wide => {
            let mut fields = summary(style, obj);
            if e.tombstone {
                fields.insert(
                    0,
                    "(tombstone: deleted while the watch was down)".to_owned(),
                );
            }
            if style.show_labels {
                fields.push(format!("labels={}", labels(obj)));
            }
            write!(
                out,
                "{:<9}{}\trv={}",
                e.kind.as_str(),
                terminal::safe(obj.key().as_ref()),
                terminal::safe(obj.resource_version().unwrap_or(""))
            )?;
            if !fields.is_empty() {
                write!(out, "\t{}", terminal::safe(&fields.join(" ")))?;
            }
            writeln!(out)
        }
    }
}

/// The summary of an event line, as `key=value` words.
fn summary(style: &Style, obj: &DynamicObject) -> Vec<String> {
    let wide = style.format == Format::Wide;
    let mut f = Vec::new();
    match style.plural.as_str() {
        "pods" => {
            f.push(format!("status={}", pod_status(obj)));
            f.push(format!(
                "node={}",
                str_at(&obj.data, "/spec/nodeName").unwrap_or("<none>")
            ));
            f.push(format!("restarts={}", pod_restarts(obj)));
            if wide {
                f.push(format!(
                    "ip={}",
                    str_at(&obj.data, "/status/podIP").unwrap_or("<none>")
                ));
            }
        }
        "nodes" => f.push(format!("status={}", node_status(obj))),
        "deployments" | "replicasets" | "statefulsets" => {
            f.push(format!("ready={}", ready_replicas(obj)));
        }
        "services" => {
            f.push(format!(
                "type={}",
                str_at(&obj.data, "/spec/type").unwrap_or("ClusterIP")
            ));
            f.push(format!(
                "cluster-ip={}",
                str_at(&obj.data, "/spec/clusterIP").unwrap_or("<none>")
            ));
        }
        "namespaces" => f.push(format!(
            "status={}",
            str_at(&obj.data, "/status/phase").unwrap_or("Active")
        )),
        _ => {}
    }
    f
}

/// The JSON form of an object, its fields in the order kubectl prints them (sorted).
pub(crate) fn to_value(obj: &DynamicObject) -> std::io::Result<Value> {
    serde_json::to_value(obj).map_err(std::io::Error::other)
}

/// Prints `objects` as one document in a document format ([`Format::is_document`]): the object
/// itself when `single` (the command named one object, `get ns default`), else a `List` of
/// them all, whatever their types, as kubectl does.
///
/// A JSON or YAML `List` is written item by item, each decoded, printed and dropped in turn:
/// the text is the very text of the whole document printed at once. A JSONPath template sees
/// the whole `List`, so it is built first.
pub(crate) fn document<O: Printable>(
    out: &mut impl Write,
    format: &Format,
    objects: &[O],
    single: bool,
) -> std::io::Result<()> {
    match (format, objects) {
        (_, [one]) if single => one_document(
            out,
            format,
            &without_managed_fields(format, to_value(&*one.decoded()?)?),
        ),
        (Format::Json | Format::Yaml, _) => streamed_list(out, format, objects),
        _ => {
            let items = objects
                .iter()
                .map(|o| Ok(without_managed_fields(format, to_value(&*o.decoded()?)?)))
                .collect::<std::io::Result<Vec<_>>>()?;
            one_document(out, format, &list_of(items))
        }
    }
}

/// A `List` of `items`, as kubectl prints several objects.
fn list_of(items: Vec<Value>) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": items,
    })
}

/// A JSON or YAML `List` written as [`one_document`] writes it whole, one item at a time: the
/// text of the `List` without items, cut where its items go, with each item's own text,
/// indented as it would be inside the `List`, put between.
fn streamed_list<O: Printable>(
    out: &mut impl Write,
    format: &Format,
    objects: &[O],
) -> std::io::Result<()> {
    let mut empty = Vec::new();
    one_document(&mut empty, format, &list_of(Vec::new()))?;
    let empty = String::from_utf8(empty).map_err(std::io::Error::other)?;
    let (open, close) = match format {
        Format::Json => ("\"items\": [", "]"),
        _ => ("items:", " []"),
    };
    let cut = empty
        .find(&format!("{open}{close}"))
        .ok_or_else(|| std::io::Error::other("an empty List has no items"))?
        + open.len();
    let (head, tail) = (&empty[..cut], &empty[cut + close.len()..]);
    if objects.is_empty() {
        return out.write_all(empty.as_bytes());
    }
    out.write_all(head.as_bytes())?;
    for (i, o) in objects.iter().enumerate() {
        let item = without_managed_fields(format, to_value(&*o.decoded()?)?);
        match format {
            Format::Json => {
                // Inside the List, an item is two levels deep: each of its lines is indented
                // by eight more spaces (a JSON string holds no raw line break).
                let text = terminal::safe_json(pretty_json(&item)?);
                let sep = if i == 0 { "\n        " } else { ",\n        " };
                write!(out, "{sep}{}", text.replace('\n', "\n        "))?;
            }
            _ => {
                // A sequence item: `- ` before its first line, two spaces before the others
                // (an empty line of a block scalar stays empty).
                if i == 0 {
                    out.write_all(b"\n")?;
                }
                let text = to_yaml(&item)?;
                for (j, line) in text.split_inclusive('\n').enumerate() {
                    let indent = match (j, line) {
                        (0, _) => "- ",
                        (_, "\n") => "",
                        _ => "  ",
                    };
                    write!(out, "{indent}{line}")?;
                }
            }
        }
    }
    if *format == Format::Json {
        out.write_all(b"\n    ]")?;
    }
    // After the items: the JSON's `],` and the rest; YAML's next key.
    match format {
        Format::Json => out.write_all(tail.as_bytes()),
        _ => out.write_all(tail.trim_start_matches('\n').as_bytes()),
    }
}

/// JSON indented by four spaces, as kubectl prints it.
fn pretty_json(doc: &Value) -> std::io::Result<String> {
    let mut text = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(
        &mut text,
        serde_json::ser::PrettyFormatter::with_indent(b"    "),
    );
    serde::Serialize::serialize(doc, &mut ser).map_err(std::io::Error::other)?;
    String::from_utf8(text).map_err(std::io::Error::other)
}

/// Prints one document: JSON indented by four spaces as kubectl, YAML as kubectl's, or a
/// JSONPath template's output (no newline is added, as kubectl adds none).
pub(crate) fn one_document(
    out: &mut impl Write,
    format: &Format,
    doc: &Value,
) -> std::io::Result<()> {
    match format {
        Format::Json => writeln!(out, "{}", terminal::safe_json(pretty_json(doc)?)),
        Format::Yaml => write!(out, "{}", to_yaml(doc)?),
        Format::JsonPath(template) => write!(out, "{}", template.render(doc)),
        _ => Ok(()),
    }
}

/// Prints the objects of one type for `get`, in their order, in a table or `-o name` format.
pub(crate) fn objects<O: Printable>(
    out: &mut impl Write,
    style: &Style,
    objects: &[O],
    now: Timestamp,
) -> std::io::Result<()> {
    match &style.format {
        Format::Name => {
            let prefix = terminal::safe(&style.name_prefix);
            for o in objects {
                writeln!(out, "{prefix}/{}", terminal::safe(o.printed_name()))?;
            }
            Ok(())
        }
        format if format.is_document() => document(out, format, objects, false),
        _ => {
            let mut rows = table(style, objects, now)?;
            if style.no_headers {
                rows.remove(0);
            }
            write_table(out, &rows)
        }
    }
}

/// Prints objects as `get -w` does: table rows aligned among themselves (the header over the
/// first batch, unless `--no-headers`); a JSON or YAML document per object (YAML documents
/// separated by `---`); a JSONPath template's output per object; or `kind/name`.
pub(crate) fn watched<O: Printable>(
    out: &mut impl Write,
    style: &Style,
    objects: &[O],
    first: bool,
    now: Timestamp,
) -> std::io::Result<()> {
    match &style.format {
        Format::Name => {
            for o in objects {
                writeln!(out, "{}/{}", style.name_prefix, o.printed_name())?;
            }
            Ok(())
        }
        format if format.is_document() => {
            for (i, o) in objects.iter().enumerate() {
                if *format == Format::Yaml && (i > 0 || !first) {
                    writeln!(out, "---")?;
                }
                let doc = without_managed_fields(format, to_value(&*o.decoded()?)?);
                one_document(out, format, &doc)?;
            }
            Ok(())
        }
        _ => {
            let mut rows = table(style, objects, now)?;
            if !first || style.no_headers {
                rows.remove(0);
            }
            write_table(out, &rows)
        }
    }
}

/// `-o json|yaml` leave out `metadata.managedFields`, as kubectl does unless asked
/// (`--show-managed-fields`); a JSONPath template still sees them.
fn without_managed_fields(format: &Format, mut doc: Value) -> Value {
    if matches!(format, Format::Json | Format::Yaml)
        && let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.remove("managedFields");
    }
    doc
}

/// The cells of custom columns for one object: each path's values comma-separated, `<none>`
/// where it finds nothing, as kubectl prints them.
fn custom_cells(columns: &[Column], doc: &Value) -> Vec<String> {
    columns
        .iter()
        .map(|c| {
            let values = c.path.values(doc);
            if values.is_empty() {
                return "<none>".to_owned();
            }
            let mut cell = String::new();
            for (i, v) in values.into_iter().enumerate() {
                if i > 0 {
                    cell.push(',');
                }
                jsonpath::push_value(&mut cell, v);
            }
            cell
        })
        .collect()
}

/// The header of an `-L` column: the key's last `/`-separated part, upper-cased, as kubectl.
fn label_header(key: &str) -> String {
    key.rsplit('/').next().unwrap_or(key).to_uppercase()
}

/// The table `get` prints: a header row, then one row per object, each object decoded for its
/// row alone.
fn table<O: Printable>(
    style: &Style,
    objects: &[O],
    now: Timestamp,
) -> std::io::Result<Vec<Vec<String>>> {
    if let Format::CustomColumns(columns) = &style.format {
        let mut rows = vec![columns.iter().map(|c| c.header.clone()).collect::<Vec<_>>()];
        for o in objects {
            rows.push(custom_cells(columns, &to_value(&*o.decoded()?)?));
        }
        return Ok(rows);
    }
    let wide = style.format == Format::Wide;
    let mut header: Vec<&str> = Vec::new();
    if style.namespace_column {
        header.push("NAMESPACE");
    }
    header.push("NAME");
    let extra: &[&str] = match style.plural.as_str() {
        "pods" if wide => &["READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"],
        "pods" => &["READY", "STATUS", "RESTARTS", "AGE"],
        "nodes" => &["STATUS", "AGE"],
        "deployments" | "statefulsets" => &["READY", "AGE"],
        "replicasets" => &["DESIRED", "READY", "AGE"],
        "services" => &["TYPE", "CLUSTER-IP", "AGE"],
        "namespaces" => &["STATUS", "AGE"],
        _ => &["AGE"],
    };
    header.extend_from_slice(extra);
    let mut header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    header.extend(style.label_columns.iter().map(|k| label_header(k)));
    if style.show_labels {
        header.push("LABELS".to_owned());
    }
    let mut rows = vec![header];
    for o in objects {
        let o = o.decoded()?;
        let o: &DynamicObject = &o;
        let mut row = Vec::new();
        if style.namespace_column {
            row.push(o.namespace().unwrap_or("").to_owned());
        }
        row.push(if style.prefix_names {
            format!("{}/{}", style.name_prefix, o.name())
        } else {
            o.name().to_owned()
        });
        for column in extra {
            row.push(match *column {
                "READY" if style.plural == "pods" => pod_ready(o),
                "READY" => ready_replicas(o),
                "DESIRED" => int_at(&o.data, "/spec/replicas").to_string(),
                "STATUS" if style.plural == "pods" => pod_status(o),
                "STATUS" if style.plural == "nodes" => node_status(o),
                "STATUS" => str_at(&o.data, "/status/phase")
                    .unwrap_or("Active")
                    .to_owned(),
                "RESTARTS" => pod_restarts(o).to_string(),
                "IP" => str_at(&o.data, "/status/podIP")
                    .unwrap_or("<none>")
                    .to_owned(),
                "NODE" => str_at(&o.data, "/spec/nodeName")
                    .unwrap_or("<none>")
                    .to_owned(),
                "TYPE" => str_at(&o.data, "/spec/type")
                    .unwrap_or("ClusterIP")
                    .to_owned(),
                "CLUSTER-IP" => str_at(&o.data, "/spec/clusterIP")
                    .unwrap_or("<none>")
                    .to_owned(),
                _ => age(o, now),
            });
        }
        for key in &style.label_columns {
            row.push(o.labels().get(key).cloned().unwrap_or_default());
        }
        if style.show_labels {
            row.push(labels(o));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// How much text a table collects before writing it.
const WRITE_BLOCK: usize = 64 * 1024;

/// Writes rows as columns three spaces apart, as kubectl does; no trailing spaces. Every cell is
/// made safe for a terminal first (and measured as it is printed).
fn write_table(out: &mut impl Write, rows: &[Vec<String>]) -> std::io::Result<()> {
    let rows: Vec<Vec<std::borrow::Cow<'_, str>>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| terminal::safe(cell)).collect())
        .collect();
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; columns];
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    // Written in blocks of lines: a table of 100k rows is not 100k writes to a line-buffered
    // stdout.
    let mut text = String::new();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            text.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i] - cell.chars().count() + 3;
                text.extend(std::iter::repeat_n(' ', pad));
            }
        }
        text.push('\n');
        if text.len() >= WRITE_BLOCK {
            out.write_all(text.as_bytes())?;
            text.clear();
        }
    }
    out.write_all(text.as_bytes())
}

/// YAML as kubectl prints it: keys sorted, a string that reads as a YAML timestamp
/// (`creationTimestamp: "2026-01-01T00:00:00Z"`) double-quoted, as Go's YAML encoder does, so
/// that a YAML 1.1 reader takes it back as a string, and quoted strings in double quotes
/// (`resourceVersion: "4"`, not `'4'`).
fn to_yaml(value: &Value) -> std::io::Result<String> {
    let text = serde_yaml_ng::to_string(value).map_err(std::io::Error::other)?;
    Ok(quote_timestamps(&text))
}

/// Double-quotes the plain scalars of `text` that look like timestamps, and turns single-quoted
/// values into double-quoted ones; the content of block scalars (`|`, `>`) is left alone.
fn quote_timestamps(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    // The indentation of the line that opened a block scalar, while in one.
    let mut block: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let indent = body.len() - body.trim_start().len();
        if let Some(opened) = block {
            if body.trim().is_empty() || indent > opened {
                out.push_str(line);
                continue;
            }
            block = None;
        }
        let (head, value) = split_scalar(body);
        if let Some(text) = single_quoted(value) {
            out.push_str(head);
            out.push('"');
            for c in text.chars() {
                if matches!(c, '"' | '\\') {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push('"');
            out.push_str(&line[body.len()..]);
        } else if is_timestamp(value) {
            out.push_str(head);
            out.push('"');
            out.push_str(value);
            out.push('"');
            out.push_str(&line[body.len()..]);
        } else {
            out.push_str(line);
        }
        if value.starts_with(['|', '>']) {
            block = Some(indent);
        }
    }
    out
}

/// The text of a whole single-quoted scalar (`'4'`, `'it''s'`), if `value` is one.
fn single_quoted(value: &str) -> Option<String> {
    let inner = value.strip_prefix('\'')?.strip_suffix('\'')?;
    if inner.replace("''", "").contains('\'') {
        return None;
    }
    Some(inner.replace("''", "'"))
}

/// A YAML line split before its value: `("  key: ", "value")`, `("- ", "value")`, or the
/// whole line and `""` when it holds no scalar value.
fn split_scalar(line: &str) -> (&str, &str) {
    let mut at = line.len() - line.trim_start().len();
    while line[at..].starts_with("- ") {
        at += 2;
    }
    let rest = &line[at..];
    if rest.starts_with(['"', '\'']) {
        // A quoted key (or a quoted value): its `: ` comes after the closing quote.
        let quote = &rest[..1];
        let Some(close) = rest[1..].find(quote) else {
            return (line, "");
        };
        return match rest[close + 2..].strip_prefix(": ") {
            Some(v) => (&line[..line.len() - v.len()], v),
            None => (line, ""),
        };
    }
    match rest.find(": ") {
        Some(colon) => {
            let v = &rest[colon + 2..];
            (&line[..line.len() - v.len()], v)
        }
        None if at > 0 && !rest.ends_with(':') => (&line[..at], rest),
        None => (line, ""),
    }
}

/// Whether Go's YAML encoder would take this plain string for a timestamp: `2006-1-2`,
/// `2006-1-2T15:4:5[.9][Z|+07:00]` (`T`, `t` or a space before the time).
fn is_timestamp(s: &str) -> bool {
    fn digits(s: &str, min: usize, max: usize) -> Option<&str> {
        let n = s.bytes().take_while(u8::is_ascii_digit).count();
        (min..=max).contains(&n).then(|| &s[n..])
    }
    let date = || -> Option<&str> {
        let rest = digits(s, 4, 4)?.strip_prefix('-')?;
        let rest = digits(rest, 1, 2)?.strip_prefix('-')?;
        digits(rest, 1, 2)
    };
    let Some(rest) = date() else { return false };
    if rest.is_empty() {
        return true;
    }
    let Some(time) = rest.strip_prefix(['T', 't', ' ']) else {
        return false;
    };
    let time = || -> Option<&str> {
        let rest = digits(time, 1, 2)?.strip_prefix(':')?;
        let rest = digits(rest, 1, 2)?.strip_prefix(':')?;
        let mut rest = digits(rest, 1, 2)?;
        if let Some(fraction) = rest.strip_prefix('.') {
            rest = digits(fraction, 1, 9)?;
        }
        Some(rest)
    };
    match time() {
        Some("" | "Z") => true,
        Some(zone) => zone
            .strip_prefix(['+', '-'])
            .and_then(|z| digits(z, 2, 2))
            .and_then(|z| z.strip_prefix(':'))
            .and_then(|z| digits(z, 2, 2))
            .is_some_and(str::is_empty),
        None => false,
    }
}

fn str_at<'a>(data: &'a Value, pointer: &str) -> Option<&'a str> {
    data.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn int_at(data: &Value, pointer: &str) -> i64 {
    data.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// A pod's STATUS as kubectl shows it: `Terminating` once deleted, else the waiting or
/// terminated reason of a container, else the phase.
fn pod_status(pod: &DynamicObject) -> String {
    if pod.metadata.deletion_timestamp.is_some() {
        return "Terminating".to_owned();
    }
    if let Some(statuses) = pod
        .data
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
    {
        for s in statuses {
            for state in ["/state/waiting/reason", "/state/terminated/reason"] {
                if let Some(reason) = str_at(s, state) {
                    return reason.to_owned();
                }
            }
        }
    }
    str_at(&pod.data, "/status/phase")
        .unwrap_or("Unknown")
        .to_owned()
}

fn pod_restarts(pod: &DynamicObject) -> i64 {
    pod.data
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map_or(0, |s| s.iter().map(|c| int_at(c, "/restartCount")).sum())
}

/// READY of a pod: ready containers / containers.
fn pod_ready(pod: &DynamicObject) -> String {
    let containers = pod
        .data
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = pod
        .data
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map_or(0, |s| {
            s.iter()
                .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                .count()
        });
    format!("{ready}/{containers}")
}

/// READY of a workload: ready replicas / desired replicas.
fn ready_replicas(obj: &DynamicObject) -> String {
    format!(
        "{}/{}",
        int_at(&obj.data, "/status/readyReplicas"),
        int_at(&obj.data, "/spec/replicas")
    )
}

fn node_status(node: &DynamicObject) -> String {
    let ready = node
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| str_at(c, "/type") == Some("Ready")))
        .and_then(|c| str_at(c, "/status"));
    let mut status = match ready {
        Some("True") => "Ready".to_owned(),
        Some(_) => "NotReady".to_owned(),
        None => "Unknown".to_owned(),
    };
    if node
        .data
        .pointer("/spec/unschedulable")
        .and_then(Value::as_bool)
        == Some(true)
    {
        status.push_str(",SchedulingDisabled");
    }
    status
}

fn labels(obj: &DynamicObject) -> String {
    let labels: &BTreeMap<String, String> = obj.labels();
    if labels.is_empty() {
        return "<none>".to_owned();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// AGE as kubectl shows the server's tables: `45s`, `5m12s`, `12m`, `4d11h`, `30d`
/// (`duration.HumanDuration`, which the simulated server's tables use too).
fn age(obj: &DynamicObject, now: Timestamp) -> String {
    let Some(created) = &obj.metadata.creation_timestamp else {
        return "<unknown>".to_owned();
    };
    let secs = now.as_second().saturating_sub(created.0.as_second()).max(0);
    kinformer_sim::human_duration(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: Value) -> DynamicObject {
        serde_json::from_value(json).unwrap()
    }

    fn style(format: Format) -> Style {
        Style {
            format,
            show_labels: false,
            name_prefix: "pod".into(),
            plural: "pods".into(),
            namespace_column: true,
            prefix_names: false,
            no_headers: false,
            label_columns: Vec::new(),
        }
    }

    fn sample() -> DynamicObject {
        pod(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "shop", "resourceVersion": "42",
                         "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": "web"}},
            "spec": {"nodeName": "node-2", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2},
                {"name": "b", "ready": false, "restartCount": 1}]}
        }))
    }

    fn printed(style: &Style, e: &Event<'_>) -> String {
        let mut out = Vec::new();
        event(&mut out, style, e).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn event_lines_carry_the_key_the_version_and_a_summary() {
        let p = sample();
        let added = Event {
            kind: EventType::Added,
            object: &p,
            tombstone: false,
        };
        assert_eq!(
            printed(&style(Format::Text), &added),
            "ADDED    shop/web-1\trv=42\tstatus=Running node=node-2 restarts=3\n"
        );
        assert_eq!(
            printed(&style(Format::Wide), &added),
            "ADDED    shop/web-1\trv=42\tstatus=Running node=node-2 restarts=3 ip=10.0.0.7\n"
        );
        let gone = Event {
            kind: EventType::Deleted,
            object: &p,
            tombstone: true,
        };
        assert_eq!(
            printed(&style(Format::Text), &gone),
            "DELETED  shop/web-1\trv=42\t(tombstone: deleted while the watch was down) \
             status=Running node=node-2 restarts=3\n"
        );
        assert_eq!(printed(&style(Format::Name), &gone), "DELETED  pod/web-1\n");
        let mut labelled = style(Format::Text);
        labelled.show_labels = true;
        assert!(printed(&labelled, &added).ends_with(" labels=app=web\n"));
        let json: Value = serde_json::from_str(&printed(&style(Format::Json), &gone)).unwrap();
        assert_eq!(json["type"], "DELETED");
        assert_eq!(json["key"], "shop/web-1");
        assert_eq!(json["resourceVersion"], "42");
        assert_eq!(json["tombstone"], true);
        assert_eq!(json["object"]["spec"]["nodeName"], "node-2");
    }

    #[test]
    fn get_prints_a_table_like_kubectl() {
        let p = std::sync::Arc::new(sample());
        let now: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        let mut out = Vec::new();
        objects(
            &mut out,
            &style(Format::Text),
            std::slice::from_ref(&p),
            now,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "NAMESPACE   NAME    READY   STATUS    RESTARTS   AGE\n\
             shop        web-1   1/2     Running   3          5m\n"
        );
        let mut s = style(Format::Wide);
        s.namespace_column = false;
        s.show_labels = true;
        let mut out = Vec::new();
        objects(&mut out, &s, &[p], now).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "NAME    READY   STATUS    RESTARTS   AGE   IP         NODE     LABELS\n\
             web-1   1/2     Running   3          5m    10.0.0.7   node-2   app=web\n"
        );
    }

    #[test]
    fn yaml_events_are_documents_and_get_prints_a_list() {
        let p = sample();
        let added = Event {
            kind: EventType::Added,
            object: &p,
            tombstone: false,
        };
        let text = printed(&style(Format::Yaml), &added);
        assert!(text.starts_with("---\n"), "{text}");
        let doc: Value = serde_yaml_ng::from_str(&text[4..]).unwrap();
        assert_eq!(doc["type"], "ADDED");
        assert_eq!(doc["object"]["metadata"]["name"], "web-1");
        let mut out = Vec::new();
        let now: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        objects(
            &mut out,
            &style(Format::Yaml),
            &[std::sync::Arc::new(p)],
            now,
        )
        .unwrap();
        let list: Value = serde_yaml_ng::from_slice(&out).unwrap();
        assert_eq!(list["kind"], "List");
        assert_eq!(list["items"][0]["spec"]["nodeName"], "node-2");
    }

    /// A pod whose every server-controlled string carries something a terminal would act on.
    fn hostile() -> DynamicObject {
        pod(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web\u{1b}]0;owned\u{7}-1\r", "namespace": "shop\u{9b}2J",
                         "resourceVersion": "4\u{1b}[2K2",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"app": "w\u{202e}eb\n"}},
            "spec": {"nodeName": "node\u{1b}[31m", "containers": [{"name": "a"}]},
            "status": {"phase": "Run\u{8}ning", "podIP": "10.0.0.7\u{7f}",
                       "containerStatuses": [{"name": "a", "ready": true, "restartCount": 0,
                         "state": {"waiting": {"reason": "Crash\u{1b}[1A"}}}]}
        }))
    }

    /// Whether `text` holds a character that acts on a terminal (a line's own end aside).
    fn acts_on_a_terminal(text: &str) -> bool {
        text.lines().any(|l| {
            l.chars()
                .any(|c| c != '\t' && terminal::safe(&c.to_string()) != c.to_string())
        })
    }

    #[test]
    fn server_text_never_reaches_a_terminal_raw() {
        let p = hostile();
        let now: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        let arc = std::sync::Arc::new(p.clone());
        for format in [Format::Text, Format::Wide, Format::Name] {
            let mut s = style(format.clone());
            s.show_labels = true;
            for tombstone in [false, true] {
                let e = Event {
                    kind: EventType::Modified,
                    object: &p,
                    tombstone,
                };
                let line = printed(&s, &e);
                assert!(!acts_on_a_terminal(&line), "{format:?}: {line:?}");
                assert_eq!(line.lines().count(), 1, "{format:?}: {line:?}");
            }
            let mut out = Vec::new();
            objects(&mut out, &s, std::slice::from_ref(&arc), now).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(!acts_on_a_terminal(&text), "{format:?}: {text:?}");
        }
        // The escapes are visible, so the reader sees that something odd was sent.
        let line = printed(
            &style(Format::Text),
            &Event {
                kind: EventType::Added,
                object: &p,
                tombstone: false,
            },
        );
        assert!(
            line.starts_with("ADDED    shop\\u{9b}2J/web\\x1b]0;owned\\x07-1\\r\trv=4\\x1b[2K2\t"),
            "{line:?}"
        );
        // The table's columns are aligned on what is printed.
        let mut out = Vec::new();
        objects(
            &mut out,
            &style(Format::Text),
            std::slice::from_ref(&arc),
            now,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0].find("NAME "), lines[1].find("web"), "{text}");
    }

    /// JSON escapes everything [`terminal::safe`] does; YAML (libyaml's emitter) every control
    /// character, in a double-quoted scalar.
    fn raw(format: &Format, text: &str) -> bool {
        match format {
            Format::Yaml => text.chars().any(|c| c.is_control() && c != '\n'),
            _ => acts_on_a_terminal(text),
        }
    }

    #[test]
    fn json_and_yaml_keep_server_text_exact_and_escaped() {
        let p = hostile();
        let now: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        let name = p.name().to_owned();
        for format in [Format::Json, Format::Yaml] {
            let e = Event {
                kind: EventType::Added,
                object: &p,
                tombstone: false,
            };
            let text = printed(&style(format.clone()), &e);
            assert!(!raw(&format, &text), "{format:?}: {text:?}");
            let doc: Value = if format == Format::Json {
                serde_json::from_str(&text).unwrap()
            } else {
                serde_yaml_ng::from_str(&text[4..]).unwrap()
            };
            assert_eq!(
                doc["object"]["metadata"]["name"],
                name.as_str(),
                "{format:?}"
            );
            assert_eq!(doc["object"]["metadata"]["labels"]["app"], "w\u{202e}eb\n");
            let mut out = Vec::new();
            objects(
                &mut out,
                &style(format.clone()),
                &[std::sync::Arc::new(p.clone())],
                now,
            )
            .unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(!raw(&format, &text), "{format:?}: {text:?}");
            let list: Value = if format == Format::Json {
                serde_json::from_str(&text).unwrap()
            } else {
                serde_yaml_ng::from_str(&text).unwrap()
            };
            assert_eq!(list["items"][0]["metadata"]["name"], name.as_str());
            assert_eq!(list["items"][0]["spec"]["nodeName"], "node\u{1b}[31m");
        }
    }

    /// The `List` of `objects` printed whole, as one [`Value`].
    fn whole_list(format: &Format, objects: &[DynamicObject]) -> String {
        let items = objects
            .iter()
            .map(|o| without_managed_fields(format, to_value(o).unwrap()))
            .collect();
        let mut out = Vec::new();
        one_document(&mut out, format, &list_of(items)).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn lists_printed_item_by_item_are_the_whole_document_byte_for_byte() {
        let odd = pod(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "odd", "namespace": "shop",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "kubectl", "operation": "Update"}],
                "annotations": {
                    "text": "line one\n\n  indented\nat: 2026-01-01T00:00:00Z\n",
                    "trailing": "a\n\n\n", "leading": "  x\ny", "quote": "it's",
                    "when": "2026-01-01", "empty": ""}},
            "spec": {"containers": [], "nested": [[1, 2.5, null], {"a": [], "b": {}}]},
            "status": {}
        }));
        let many: Vec<DynamicObject> = vec![sample(), hostile(), odd];
        for format in [Format::Json, Format::Yaml] {
            for objects in [&many[..0], &many[..1], &many[..]] {
                let mut out = Vec::new();
                document(&mut out, &format, objects, false).unwrap();
                let streamed = String::from_utf8(out).unwrap();
                assert_eq!(streamed, whole_list(&format, objects), "{format:?}");
            }
        }
    }

    #[test]
    fn cached_items_decode_with_their_resources_type() {
        let types = Arc::new(TypeMeta {
            api_version: "v1".into(),
            kind: "Pod".into(),
        });
        // A list's item, without apiVersion and kind.
        let listed: Cached =
            serde_json::from_str(r#"{"metadata":{"name":"a","namespace":"ns"},"spec":{}}"#)
                .unwrap();
        let item = Item {
            object: Arc::new(listed),
            types: Arc::clone(&types),
        };
        assert_eq!(item.printed_name(), "a");
        let decoded = item.decoded().unwrap();
        assert_eq!(
            (
                decoded.types.api_version.as_str(),
                decoded.types.kind.as_str()
            ),
            ("v1", "Pod")
        );
        // A watch event's object keeps its own.
        let watched: Cached = serde_json::from_str(
            r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}"#,
        )
        .unwrap();
        let item = Item {
            object: Arc::new(watched),
            types,
        };
        assert_eq!(item.decoded().unwrap().types.kind, "Widget");
        // An object whose metadata decodes but whose rest does not is named in the error.
        let bad: Cached =
            serde_json::from_str(r#"{"metadata":{"name":"b","namespace":"ns","generation":"x"}}"#)
                .unwrap();
        let item = Item {
            object: Arc::new(bad),
            types: item.types,
        };
        let e = item.decoded().unwrap_err();
        assert!(e.to_string().starts_with("cannot decode ns/b: "), "{e}");
    }

    #[test]
    fn yaml_quotes_timestamps_as_kubectl() {
        let doc = serde_json::json!({
            "metadata": {"creationTimestamp": "2026-01-01T00:00:00Z", "name": "2026-01-01",
                         "resourceVersion": "4"},
            "enabled": "true",
            "quote": "it's",
            "list": ["2026-01-01T00:00:00.5+02:00", "x"],
            "text": "line one\nat: 2026-01-01T00:00:00Z\n",
            "notATime": "2026-01-01Tnoon",
            "spaced": "2026-1-2 3:04:05",
        });
        let yaml = to_yaml(&doc).unwrap();
        assert!(
            yaml.contains("creationTimestamp: \"2026-01-01T00:00:00Z\"\n"),
            "{yaml}"
        );
        assert!(yaml.contains("resourceVersion: \"4\"\n"), "{yaml}");
        assert!(yaml.contains("enabled: \"true\"\n"), "{yaml}");
        assert!(yaml.contains("name: \"2026-01-01\"\n"), "{yaml}");
        assert!(
            yaml.contains("- \"2026-01-01T00:00:00.5+02:00\"\n"),
            "{yaml}"
        );
        assert!(yaml.contains("notATime: 2026-01-01Tnoon\n"), "{yaml}");
        assert!(yaml.contains("spaced: \"2026-1-2 3:04:05\"\n"), "{yaml}");
        // The content of a block scalar is text, never quoted.
        assert!(yaml.contains("  at: 2026-01-01T00:00:00Z\n"), "{yaml}");
        let back: Value = serde_yaml_ng::from_str(&yaml).unwrap();
        assert_eq!(back, doc);
    }

    #[test]
    fn tables_take_label_columns_custom_columns_and_no_headers() {
        let p = std::sync::Arc::new(sample());
        let now: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        let mut s = style(Format::Text);
        s.namespace_column = false;
        s.label_columns = vec!["app".into(), "example.com/tier".into()];
        s.prefix_names = true;
        let mut out = Vec::new();
        objects(&mut out, &s, std::slice::from_ref(&p), now).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "NAME        READY   STATUS    RESTARTS   AGE   APP   TIER\n\
             pod/web-1   1/2     Running   3          5m    web   \n"
        );
        let columns = vec![
            Column {
                header: "NAME".into(),
                path: Template::parse_relaxed(".metadata.name").unwrap(),
            },
            Column {
                header: "CONTAINERS".into(),
                path: Template::parse_relaxed("{.spec.containers[*].name}").unwrap(),
            },
            Column {
                header: "MISSING".into(),
                path: Template::parse_relaxed(".spec.nope").unwrap(),
            },
        ];
        let mut s = style(Format::CustomColumns(columns));
        s.no_headers = true;
        let mut out = Vec::new();
        objects(&mut out, &s, &[p], now).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "web-1   a,b   <none>\n");
    }

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let created = |ago: i64| {
            let at = Timestamp::from_second(1_800_000_000 - ago).unwrap();
            pod(serde_json::json!({"metadata": {"name": "p", "creationTimestamp": at.to_string()}}))
        };
        for (ago, shown) in [
            (5, "5s"),
            (119, "119s"),
            (312, "5m12s"),
            (600, "10m"),
            (4 * 3600 + 120, "4h2m"),
            (4 * 86_400 + 11 * 3600, "4d11h"),
            (30 * 86_400, "30d"),
        ] {
            assert_eq!(age(&created(ago), now), shown, "{ago} s");
        }
        assert_eq!(
            age(&pod(serde_json::json!({"metadata": {"name": "p"}})), now),
            "<unknown>"
        );
    }
}
