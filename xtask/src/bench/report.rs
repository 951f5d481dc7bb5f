//! What `cargo xtask bench` prints and writes: medians with their spread, ratios to kube-runtime,
//! the targets beside them, the JSON lines, and the figures section of `docs/benchmarks.md` with
//! its chart.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use plotters::prelude::*;
use serde_json::{Value, json};

use super::run::{BASELINE, ClientSpec, Kind, Row, Scenario, Shape};

/// Median, minimum and maximum of a figure over the repetitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Stat {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

impl Stat {
    /// `None` when no repetition has the figure.
    fn of(values: impl IntoIterator<Item = f64>) -> Option<Stat> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        let median = if v.len() % 2 == 1 {
            v[mid]
        } else {
            (v[mid - 1] + v[mid]) / 2.0
        };
        Some(Stat {
            median,
            min: v[0],
            max: v[v.len() - 1],
        })
    }
}

/// One scenario and client over all repetitions.
#[derive(Debug, Clone)]
pub(crate) struct Summary {
    pub(crate) scenario: String,
    pub(crate) shape: String,
    pub(crate) client: String,
    /// `false`: the client's object type does not exist yet; nothing was measured.
    pub(crate) built: bool,
    pub(crate) reps: usize,
    pub(crate) sync_ms: Option<Stat>,
    pub(crate) events_per_s: Option<Stat>,
    pub(crate) cpu_per_k_events: Option<Stat>,
    pub(crate) peak_rss_mb: Option<Stat>,
    pub(crate) cpu_s: Option<Stat>,
    /// Every repetition was ok.
    pub(crate) ok: bool,
    /// Medians of the scenario-specific figures.
    pub(crate) extra: BTreeMap<String, f64>,
    pub(crate) notes: Vec<String>,
}

impl Summary {
    /// One JSON object: the medians under the row's names, the spread beside them.
    pub(crate) fn to_json(&self) -> Value {
        let med = |s: Option<Stat>| s.map_or(Value::Null, |s| json!(s.median));
        let mut o = json!({
            "scenario": self.scenario,
            "shape": self.shape,
            "client": self.client,
            "sync_ms": med(self.sync_ms),
            "events_per_s": med(self.events_per_s),
            "cpu_per_k_events": med(self.cpu_per_k_events),
            "peak_rss_mb": med(self.peak_rss_mb),
            "cpu_s": med(self.cpu_s),
            "ok": self.ok,
            "built": self.built,
            "reps": self.reps,
        });
        for (name, s) in [
            ("sync_ms", self.sync_ms),
            ("events_per_s", self.events_per_s),
            ("cpu_per_k_events", self.cpu_per_k_events),
            ("peak_rss_mb", self.peak_rss_mb),
            ("cpu_s", self.cpu_s),
        ] {
            if let Some(s) = s {
                o[format!("{name}_min")] = json!(s.min);
                o[format!("{name}_max")] = json!(s.max);
            }
        }
        for (k, v) in &self.extra {
            o[k.as_str()] = json!(v);
        }
        if !self.notes.is_empty() {
            o["notes"] = json!(self.notes);
        }
        o
    }
}

/// Groups the rows by scenario, shape and client, in the order of `scenarios`, `shapes` and
/// `clients`.
pub(crate) fn summarise(
    scenarios: &[Scenario],
    shapes: &[Shape],
    clients: &[&ClientSpec],
    rows: &[Row],
) -> Vec<Summary> {
    let mut out = Vec::new();
    for (s, shape) in scenarios
        .iter()
        .flat_map(|s| shapes.iter().map(move |sh| (s, sh.as_str())))
    {
        for c in clients {
            let mine: Vec<&Row> = rows
                .iter()
                .filter(|r| r.scenario == s.name && r.shape == shape && r.client == c.name)
                .collect();
            let mut extra = BTreeMap::new();
            let keys: std::collections::BTreeSet<&String> =
                mine.iter().flat_map(|r| r.extra.keys()).collect();
            for k in keys {
                if let Some(st) = Stat::of(mine.iter().filter_map(|r| r.extra.get(k).copied())) {
                    extra.insert(k.clone(), st.median);
                }
            }
            let mut notes: Vec<String> = mine
                .iter()
                .filter(|r| !r.note.is_empty())
                .map(|r| r.note.clone())
                .collect();
            notes.dedup();
            if !c.built {
                notes.push("not built yet".into());
            }
            out.push(Summary {
                scenario: s.name.to_owned(),
                shape: shape.to_owned(),
                client: c.name.to_owned(),
                built: c.built,
                reps: mine.len(),
                sync_ms: Stat::of(mine.iter().map(|r| r.sync_ms)),
                events_per_s: Stat::of(mine.iter().filter_map(|r| r.events_per_s)),
                cpu_per_k_events: Stat::of(mine.iter().filter_map(|r| r.cpu_per_k_events)),
                peak_rss_mb: Stat::of(mine.iter().map(|r| r.peak_rss_mb)),
                cpu_s: Stat::of(mine.iter().map(|r| r.cpu_s)),
                ok: c.built && !mine.is_empty() && mine.iter().all(|r| r.ok),
                extra,
                notes,
            });
        }
    }
    out
}

/// A figure a target is stated on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Figure {
    /// Events per second, as a ratio to kube-runtime.
    EventsRatio,
    /// CPU time per event after the sync, as a ratio to kube-runtime.
    CpuPerEventRatio,
    /// Sync time, as a ratio to kube-runtime.
    SyncRatio,
    /// Peak RSS, as a ratio to kube-runtime.
    RssRatio,
    /// Sync time in seconds.
    SyncSeconds,
    /// Peak RSS in MB.
    RssMb,
    /// Peak RSS during the relist over the steady RSS before it.
    RelistRatio,
    /// The run completed with the expected events.
    Completes,
}

/// One target of the bench, stated on the burst shape: `figure` of `client` in `scenario` at
/// most (or, with `at_least`, at least) `bound`.
#[derive(Debug, Clone, Copy)]
struct Target {
    scenario: &'static str,
    client: &'static str,
    figure: Figure,
    at_least: bool,
    bound: f64,
}

/// The shape every target is stated on: the one harder on kinformer.
const TARGET_SHAPE: Shape = Shape::Burst;

const fn t(
    scenario: &'static str,
    client: &'static str,
    figure: Figure,
    at_least: bool,
    bound: f64,
) -> Target {
    Target {
        scenario,
        client,
        figure,
        at_least,
        bound,
    }
}

const TYPED: &str = "kinformer-typed";
const TYPED_PB: &str = "kinformer-typed-pb";
const COMPACT: &str = "kinformer-compact";
const COMPRESSED: &str = "kinformer-compressed";

/// The targets (2-core machine, burst shape, medians, ratios to kube-runtime in the same run).
const TARGETS: &[Target] = &[
    t("upd-10k", TYPED, Figure::EventsRatio, true, 1.5),
    t("upd-10k", TYPED, Figure::CpuPerEventRatio, false, 0.7),
    t("upd-10k", TYPED, Figure::RssRatio, false, 1.0),
    t("upd-10k", COMPACT, Figure::EventsRatio, true, 5.0),
    t("upd-10k", COMPACT, Figure::RssRatio, false, 0.25),
    t("upd-10k", COMPRESSED, Figure::EventsRatio, true, 6.0),
    t("upd-10k", TYPED_PB, Figure::EventsRatio, true, 3.0),
    t("churn-10k", TYPED, Figure::EventsRatio, true, 1.5),
    t("sync-100k", TYPED, Figure::SyncRatio, false, 0.6),
    t("sync-100k", TYPED, Figure::RssRatio, false, 1.0),
    t("sync-100k", TYPED_PB, Figure::SyncRatio, false, 0.4),
    t("sync-100k", COMPACT, Figure::SyncRatio, false, 0.3),
    t("sync-100k", COMPACT, Figure::RssRatio, false, 0.2),
    t("sync-100k", COMPRESSED, Figure::SyncRatio, false, 0.35),
    t("sync-100k", COMPRESSED, Figure::RssRatio, false, 0.05),
    t("sync-150k", TYPED, Figure::Completes, true, 1.0),
    t("sync-150k", COMPACT, Figure::SyncSeconds, false, 4.0),
    t("sync-150k", COMPRESSED, Figure::RssMb, false, 250.0),
    t("relist", TYPED, Figure::RelistRatio, false, 1.2),
    t("relist", COMPACT, Figure::RelistRatio, false, 1.2),
    t("relist", COMPRESSED, Figure::RelistRatio, false, 1.2),
];

fn ratio(a: Option<Stat>, b: Option<Stat>) -> Option<f64> {
    let (a, b) = (a?.median, b?.median);
    (b > 0.0).then(|| a / b)
}

fn find<'a>(all: &'a [Summary], scenario: &str, shape: &str, client: &str) -> Option<&'a Summary> {
    all.iter()
        .find(|s| s.scenario == scenario && s.shape == shape && s.client == client)
}

/// The value of a target's figure on `shape`, if measured.
fn measure(t: &Target, all: &[Summary], shape: Shape) -> Option<f64> {
    let shape = shape.as_str();
    let me = find(all, t.scenario, shape, t.client).filter(|s| s.built)?;
    let base = find(all, t.scenario, shape, BASELINE);
    match t.figure {
        Figure::EventsRatio => ratio(me.events_per_s, base?.events_per_s),
        Figure::CpuPerEventRatio => ratio(me.cpu_per_k_events, base?.cpu_per_k_events),
        Figure::SyncRatio => ratio(me.sync_ms, base?.sync_ms),
        Figure::RssRatio => ratio(me.peak_rss_mb, base?.peak_rss_mb),
        Figure::SyncSeconds => me.sync_ms.map(|s| s.median / 1000.0),
        Figure::RssMb => me.peak_rss_mb.map(|s| s.median),
        Figure::RelistRatio => me.extra.get("relist_ratio").copied(),
        Figure::Completes => Some(if me.ok { 1.0 } else { 0.0 }),
    }
}

/// A target as text with its measured value on `shape`: `events/s >= 3x: 0.85x missed`.
fn target_text(t: &Target, all: &[Summary], shape: Shape) -> String {
    let goal = goal(t);
    match outcome(t, all, shape) {
        None => format!("{goal}: not measured"),
        Some(o) => format!("{goal}: {o}"),
    }
}

/// What a target asks: `events/s >= 3x`.
fn goal(t: &Target) -> String {
    let (what, unit) = figure_name(t.figure);
    let op = if t.at_least { ">=" } else { "<=" };
    if t.figure == Figure::Completes {
        what.to_owned()
    } else {
        format!("{what} {op} {}{unit}", t.bound)
    }
}

fn figure_name(figure: Figure) -> (&'static str, &'static str) {
    match figure {
        Figure::EventsRatio => ("events/s", "x"),
        Figure::CpuPerEventRatio => ("CPU per event", "x"),
        Figure::SyncRatio => ("sync time", "x"),
        Figure::RssRatio => ("peak RSS", "x"),
        Figure::SyncSeconds => ("sync time", " s"),
        Figure::RssMb => ("peak RSS", " MB"),
        Figure::RelistRatio => ("relist peak / steady RSS", ""),
        Figure::Completes => ("completes", ""),
    }
}

/// The measured value on `shape` and its verdict (`0.85x missed`), if measured.
fn outcome(t: &Target, all: &[Summary], shape: Shape) -> Option<String> {
    let v = measure(t, all, shape)?;
    let met = if t.at_least {
        v >= t.bound
    } else {
        v <= t.bound
    };
    let shown = if t.figure == Figure::Completes {
        if met { "yes" } else { "no" }.to_owned()
    } else {
        format!("{v:.2}{}", figure_name(t.figure).1)
    };
    Some(format!("{shown} {}", if met { "met" } else { "missed" }))
}

/// A target on [`TARGET_SHAPE`], with the same figure on every other shape of `shapes` beside it:
/// `events/s >= 1.5x: 2.75x met (paced: 2.12x met)`.
fn target_text_all_shapes(t: &Target, all: &[Summary], shapes: &[Shape]) -> String {
    let mut text = target_text(t, all, TARGET_SHAPE);
    for &shape in shapes.iter().filter(|&&s| s != TARGET_SHAPE) {
        if let Some(o) = outcome(t, all, shape) {
            let _ = write!(text, " ({}: {o})", shape.as_str());
        }
    }
    text
}

fn spread(s: Option<Stat>, scale: f64, digits: usize) -> String {
    match s {
        None => "-".into(),
        Some(s) => format!(
            "{:.d$} ({:.d$}-{:.d$})",
            s.median * scale,
            s.min * scale,
            s.max * scale,
            d = digits
        ),
    }
}

fn times(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.2}x"))
}

/// Scenario-specific figures as short text.
fn extras(s: &Summary) -> String {
    let mut out = Vec::new();
    if let Some(r) = s.extra.get("relist_ratio") {
        out.push(format!("relist peak/steady {r:.2}"));
    }
    for (k, label) in [
        ("get_us", "get"),
        ("ns_list_us", "ns list"),
        ("index_us", "by index"),
    ] {
        if let Some(v) = s.extra.get(k) {
            out.push(format!("{label} {v:.1} us"));
        }
    }
    out.join(", ")
}

/// One scenario's rows as cells: client, sync, events/s, CPU per 1k events, RSS, CPU, the five
/// ratios, extras, ok.
fn cells(all: &[Summary], s: &Summary) -> Vec<String> {
    if !s.built {
        return vec![s.client.clone(), "not built yet".into()];
    }
    let base = find(all, &s.scenario, &s.shape, BASELINE);
    let r = |f: fn(&Summary) -> Option<Stat>| {
        if s.client == BASELINE {
            if f(s).is_some() { "1x" } else { "-" }.to_owned()
        } else {
            times(base.and_then(|b| ratio(f(s), f(b))))
        }
    };
    let mut ok = if s.ok { "ok" } else { "NOT OK" }.to_owned();
    if !s.ok && !s.notes.is_empty() {
        ok = format!("NOT OK ({})", s.notes.join("; "));
    }
    vec![
        s.client.clone(),
        spread(s.sync_ms, 0.001, 2),
        spread(s.events_per_s, 1.0, 0),
        spread(s.cpu_per_k_events, 1.0, 3),
        spread(s.peak_rss_mb, 1.0, 0),
        spread(s.cpu_s, 1.0, 2),
        r(|x| x.sync_ms),
        r(|x| x.events_per_s),
        r(|x| x.cpu_per_k_events),
        r(|x| x.peak_rss_mb),
        r(|x| x.cpu_s),
        extras(s),
        ok,
    ]
}

const HEADER: [&str; 13] = [
    "client",
    "sync s",
    "events/s",
    "CPU s/1k ev",
    "peak RSS MB",
    "CPU s",
    "sync",
    "ev/s",
    "CPU/ev",
    "RSS",
    "CPU",
    "other",
    "ok",
];

/// The terminal table: per scenario and server shape, each client's medians (min-max), the
/// ratios to kube-runtime, and, on the burst shape, the targets beside them.
pub(crate) fn table(
    scenarios: &[Scenario],
    shapes: &[Shape],
    pods: &str,
    all: &[Summary],
) -> String {
    let mut out = String::new();
    for (sc, shape) in scenarios
        .iter()
        .flat_map(|s| shapes.iter().map(move |sh| (s, *sh)))
    {
        let _ = writeln!(
            out,
            "\n== {} [{} shape, {pods} pods] ({} pods{}): {}",
            sc.name,
            shape.as_str(),
            sc.pods,
            match sc.kind {
                Kind::Update | Kind::Fanout | Kind::Churn => format!(", {} events", sc.events),
                _ => String::new(),
            },
            sc.about
        );
        let rows: Vec<Vec<String>> = all
            .iter()
            .filter(|s| s.scenario == sc.name && s.shape == shape.as_str())
            .map(|s| cells(all, s))
            .collect();
        let mut widths: Vec<usize> = HEADER.iter().map(|h| h.len()).collect();
        for r in &rows {
            if r.len() == HEADER.len() {
                for (w, c) in widths.iter_mut().zip(r) {
                    *w = (*w).max(c.chars().count());
                }
            }
        }
        let line = |cells: &[String]| {
            let mut l = String::from(" ");
            for (i, c) in cells.iter().enumerate() {
                let w = widths.get(i).copied().unwrap_or(0);
                let _ = write!(l, " {c:<w$}");
                if i == 5 {
                    l.push_str(" |");
                }
            }
            l.trim_end().to_owned()
        };
        let header: Vec<String> = HEADER.iter().map(|h| (*h).to_owned()).collect();
        let _ = writeln!(out, "{}   (ratios to {BASELINE})", line(&header));
        for r in &rows {
            let _ = writeln!(out, "{}", line(r));
        }
        for t in TARGETS.iter().filter(|t| t.scenario == sc.name) {
            if shape == TARGET_SHAPE {
                let _ = writeln!(out, "  target {}: {}", t.client, target_text(t, all, shape));
            } else if let Some(o) = outcome(t, all, shape) {
                // The targets are stated on the burst shape; the same figure here, for the
                // shape that is worse for kinformer.
                let _ = writeln!(out, "  on this shape {}: {}: {o}", t.client, goal(t));
            }
        }
    }
    out
}

/// The scenario's headline advantage over kube-runtime, higher is better: events/s over theirs,
/// or their sync time, relist ratio or by-index latency over ours.
fn advantage(all: &[Summary], s: &Summary, kind: Kind) -> Option<f64> {
    let base = find(all, &s.scenario, &s.shape, BASELINE)?;
    if !s.built || !s.ok || !base.ok {
        return None;
    }
    let inv = |r: Option<f64>| r.filter(|r| *r > 0.0).map(|r| 1.0 / r);
    match kind {
        Kind::Update | Kind::Fanout | Kind::Churn => ratio(s.events_per_s, base.events_per_s),
        Kind::Sync | Kind::Stream => inv(ratio(s.sync_ms, base.sync_ms)),
        Kind::Relist => {
            let (a, b) = (
                s.extra.get("relist_ratio")?,
                base.extra.get("relist_ratio")?,
            );
            Some(b / a)
        }
        Kind::Lister => {
            let (a, b) = (s.extra.get("index_us")?, base.extra.get("index_us")?);
            (*a > 0.0).then(|| b / a)
        }
    }
}

/// Draws the chart of advantages on `shape` as an SVG document.
fn chart(scenarios: &[Scenario], shape: Shape, all: &[Summary]) -> Result<String, String> {
    let clients: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for s in all {
            if s.client != BASELINE && s.built && !v.contains(&s.client) {
                v.push(s.client.clone());
            }
        }
        v
    };
    let mut bars = Vec::new();
    for (i, sc) in scenarios.iter().enumerate() {
        for (j, c) in clients.iter().enumerate() {
            if let Some(v) =
                find(all, sc.name, shape.as_str(), c).and_then(|s| advantage(all, s, sc.kind))
            {
                bars.push((i, j, v));
            }
        }
    }
    let top = bars.iter().map(|b| b.2).fold(2.0_f64, f64::max) * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let n = scenarios.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "kinformer's advantage over {BASELINE}, {} shape (x, higher is better)",
                    shape.as_str()
                ),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(48)
            .build_cartesian_2d(0.0..n, 0.0..top)
            .map_err(|e| e.to_string())?;
        let names: Vec<&str> = scenarios.iter().map(|s| s.name).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(names.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let i = (x - 0.5).round();
                if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 {
                    names
                        .get(i as usize)
                        .map_or(String::new(), |s| (*s).to_owned())
                } else {
                    String::new()
                }
            })
            .y_desc("ratio")
            .draw()
            .map_err(|e| e.to_string())?;
        let palette = [
            RGBColor(31, 119, 180),
            RGBColor(255, 127, 14),
            RGBColor(44, 160, 44),
            RGBColor(214, 39, 40),
        ];
        let width = 0.8 / clients.len().max(1) as f64;
        for (j, c) in clients.iter().enumerate() {
            let color = palette[j % palette.len()];
            chart
                .draw_series(bars.iter().filter(|b| b.1 == j).map(|&(i, _, v)| {
                    let x0 = i as f64 + 0.1 + j as f64 * width;
                    Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], color.filled())
                }))
                .map_err(|e| e.to_string())?
                .label(c.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
        }
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 1.0), (n, 1.0)],
                BLACK.stroke_width(1),
            )))
            .map_err(|e| e.to_string())?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The markdown table of every scenario, shape and client.
fn markdown(scenarios: &[Scenario], shapes: &[Shape], all: &[Summary]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| scenario | shape | client | sync s | events/s | CPU s/1k ev | peak RSS MB | CPU s | sync | ev/s | CPU/ev | RSS | CPU | other | ok |"
    );
    let _ = writeln!(
        out,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for sc in scenarios {
        for shape in shapes {
            for s in all
                .iter()
                .filter(|s| s.scenario == sc.name && s.shape == shape.as_str())
            {
                let c = cells(all, s);
                if c.len() == 2 {
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} | {} | | | | | | | | | | |",
                        sc.name,
                        shape.as_str(),
                        c[0],
                        c[1]
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} |",
                        sc.name,
                        shape.as_str(),
                        c.join(" | ")
                    );
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "\nTargets, on the {} shape, with the same figure on the other shape beside it:\n",
        TARGET_SHAPE.as_str()
    );
    for sc in scenarios {
        for t in TARGETS.iter().filter(|t| t.scenario == sc.name) {
            let text = target_text_all_shapes(t, all, shapes);
            let _ = writeln!(out, "- {} {}: {text}", sc.name, t.client);
        }
    }
    out
}

const BEGIN: &str = "<!-- xtask bench: begin -->";
const END: &str = "<!-- xtask bench: end -->";
const CHART: &str = "benchmarks-ratios.svg";

/// The date of a Unix time, `YYYY-MM-DD` (UTC).
fn date(unix_secs: u64) -> String {
    // Days to civil date, after Howard Hinnant's algorithm.
    let z = (unix_secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn memory_gb() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: f64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib / 1024.0 / 1024.0)
}

/// Rewrites the section between the bench markers of `docs/benchmarks.md`, and the chart.
pub(crate) fn write_docs(
    root: &Path,
    command: &str,
    scenarios: &[Scenario],
    shapes: &[Shape],
    pods: &str,
    all: &[Summary],
    elapsed: Duration,
) -> Result<(), String> {
    let docs = root.join("docs");
    let path = docs.join("benchmarks.md");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (Some(a), Some(b)) = (text.find(BEGIN), text.find(END)) else {
        return Err(format!(
            "{} lacks the markers {BEGIN} and {END}",
            path.display()
        ));
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut section = String::new();
    let _ = writeln!(section, "{BEGIN}");
    let _ = writeln!(
        section,
        "Written by `{command}` on {} on a machine with {cores} cores and {:.1} GB of memory \
         ({:.0} s), {pods} pods. Medians of the repetitions with (min-max); ratios are to \
         {BASELINE} in the same run and shape; `CPU s/1k ev` is the client's CPU time after its \
         sync per 1,000 events; `other` holds each scenario's own figures. Do not edit by hand: \
         run the command again.\n",
        date(now),
        memory_gb().unwrap_or(f64::NAN),
        elapsed.as_secs_f64()
    );
    section.push_str(&markdown(scenarios, shapes, all));
    let headline = shapes.first().copied().unwrap_or(TARGET_SHAPE);
    let _ = writeln!(
        section,
        "\n![The headline figure of each scenario as kinformer's advantage over {BASELINE}, {} shape]({CHART})\n",
        headline.as_str()
    );
    section.push_str(END);
    let svg = chart(scenarios, headline, all)?;
    std::fs::write(docs.join(CHART), svg).map_err(|e| e.to_string())?;
    let new = format!("{}{section}{}", &text[..a], &text[b + END.len()..]);
    std::fs::write(&path, new).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::super::run::{CLIENTS, Size, scenarios};
    use super::*;

    fn row(scenario: &str, client: &str, sync_ms: f64, eps: Option<f64>, rss: f64) -> Row {
        Row {
            scenario: scenario.into(),
            shape: "burst".into(),
            client: client.into(),
            sync_ms,
            events_per_s: eps,
            cpu_per_k_events: eps.map(|e| 1000.0 / e),
            peak_rss_mb: rss,
            cpu_s: 1.0,
            ok: true,
            extra: BTreeMap::new(),
            note: String::new(),
        }
    }

    #[test]
    fn medians_ratios_and_targets() {
        let sc: Vec<Scenario> = scenarios(Size::Full).into_iter().take(2).collect();
        let future = ClientSpec {
            name: "kinformer-future",
            built: false,
            about: "a form that does not exist yet",
        };
        let clients: Vec<&ClientSpec> = CLIENTS.iter().chain([&future]).collect();
        let paced = |mut r: Row| {
            r.shape = "paced".into();
            r
        };
        let rows = vec![
            row("upd-10k", "kinformer-typed", 100.0, Some(30_000.0), 100.0),
            row("upd-10k", "kinformer-typed", 300.0, Some(40_000.0), 100.0),
            row("upd-10k", "kinformer-typed", 200.0, Some(35_000.0), 100.0),
            row("upd-10k", BASELINE, 400.0, Some(10_000.0), 200.0),
            paced(row(
                "upd-10k",
                "kinformer-typed",
                200.0,
                Some(9_000.0),
                100.0,
            )),
            paced(row("upd-10k", BASELINE, 400.0, Some(10_000.0), 200.0)),
            row("sync-100k", "kinformer-typed", 1000.0, None, 100.0),
            row("sync-100k", BASELINE, 1000.0, None, 100.0),
        ];
        let shapes = Shape::ALL;
        let all = summarise(&sc, &shapes, &clients, &rows);
        assert_eq!(all.len(), 2 * 2 * (CLIENTS.len() + 1));
        let typed = find(&all, "upd-10k", "burst", "kinformer-typed").unwrap();
        assert_eq!(
            typed.sync_ms,
            Some(Stat {
                median: 200.0,
                min: 100.0,
                max: 300.0
            })
        );
        assert_eq!(typed.reps, 3);
        let text = table(&sc, &shapes, "dense", &all);
        // 35k against 10k events/s on the burst shape: 3.5x, which meets ">= 1.5x"; the paced
        // shape's 0.9x is printed beside it, but the targets are judged on burst.
        assert!(text.contains("events/s >= 1.5x: 3.50x met"), "{text}");
        assert!(text.contains("CPU per event <= 0.7x: 0.29x met"), "{text}");
        assert!(text.contains("peak RSS <= 1x: 0.50x met"), "{text}");
        assert!(text.contains("sync time <= 0.6x: 1.00x missed"), "{text}");
        assert!(
            text.contains("== upd-10k [paced shape, dense pods]"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.contains("kinformer-typed") && l.contains("0.90x")),
            "{text}"
        );
        assert_eq!(text.matches("target kinformer-typed: events/s").count(), 1);
        assert!(
            text.contains("on this shape kinformer-typed: events/s >= 1.5x: 0.90x missed"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.contains("kinformer-future") && l.contains("not built yet")),
            "{text}"
        );
        let json = typed.to_json();
        assert_eq!(json["events_per_s"], 35_000.0);
        assert_eq!(json["shape"], "burst");
        assert_eq!(json["sync_ms_min"], 100.0);
        assert!(json["cpu_per_k_events"].as_f64().is_some());
        let svg = chart(&sc, Shape::Burst, &all).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("kinformer-typed"),
            "{svg}"
        );
        let md = markdown(&sc, &shapes, &all);
        assert!(
            md.contains("| upd-10k | burst | kinformer-typed | 0.20 (0.10-0.30) | 35000 (30000-40000) | 0.029 (0.025-0.033) |"),
            "{md}"
        );
        assert!(md.contains("| upd-10k | paced | kinformer-typed |"), "{md}");
        assert!(
            md.contains(
                "- upd-10k kinformer-typed: events/s >= 1.5x: 3.50x met (paced: 0.90x missed)"
            ),
            "{md}"
        );
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(1_767_225_600), "2026-01-01");
        assert_eq!(date(951_782_400), "2000-02-29");
    }
}
