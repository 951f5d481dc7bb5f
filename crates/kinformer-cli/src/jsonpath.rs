//! The JSONPath templates of `-o jsonpath=`, `-o custom-columns=` and `--sort-by`: the subset of
//! kubectl's syntax that its common uses need.
//!
//! A template is text with actions in braces: `{.metadata.name}`, `{.items[*].metadata.name}`,
//! `{range .items[*]}{.metadata.name}{"\n"}{end}`. An expression is a chain of steps from the
//! current object (`.`, `@`) or the root (`$`): `.field`, `..field` (at any depth), `.*`,
//! `['field']`, `[n]` (negative from the end), `[start:end]`, `[*]`, and filters
//! `[?(@.status.phase=="Running")]` (`==`, `!=`, `<`, `<=`, `>`, `>=` against a quoted string, a
//! number, `true`, `false`, `null` or another path; `[?(@.x)]` keeps those that have `x`).
//! A missing field yields nothing, as kubectl's `-o jsonpath` (which allows missing keys).
//! Several results of one action are printed space-separated; a string as itself, anything
//! else as compact JSON. What this subset does not cover (unions `['a','b']`, functions) is
//! refused with a message naming it.

use std::cmp::Ordering;

use serde_json::Value;

/// A template that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSONPath template {template:?}: {reason}")]
pub(crate) struct ParseError {
    /// The template as written.
    template: String,
    /// What is wrong, and where.
    reason: String,
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// `.name`, `['name']`.
    Field(String),
    /// `..name`.
    Descend(String),
    /// `.*`, `[*]`.
    All,
    /// `[n]`.
    Index(i64),
    /// `[start:end]`.
    Slice(Option<i64>, Option<i64>),
    /// `[?(...)]`.
    Filter(Box<Filter>),
}

/// Where a path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// `$`: the whole document.
    Root,
    /// `.`, `@`: the current object (the element of the innermost `range`).
    Current,
}

#[derive(Debug, Clone, PartialEq)]
struct Path {
    start: Start,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Path(Path),
    Literal(Value),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    left: Path,
    /// `None`: an existence test.
    right: Option<(Op, Operand)>,
}

/// A piece of a template.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Text(String),
    Path(Path),
    Range(Path, Vec<Node>),
}

/// A parsed template, ready to print any number of documents.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Template {
    nodes: Vec<Node>,
}

impl Template {
    /// Parses a template as `-o jsonpath=` takes it.
    pub(crate) fn parse(template: &str) -> Result<Self, ParseError> {
        let fail = |reason: String| ParseError {
            template: template.to_owned(),
            reason,
        };
        let mut stack: Vec<(Option<Path>, Vec<Node>)> = vec![(None, Vec::new())];
        let mut rest = template;
        while !rest.is_empty() {
            let Some(open) = rest.find('{') else {
                push_text(&mut stack, rest);
                break;
            };
            push_text(&mut stack, &rest[..open]);
            let after = &rest[open + 1..];
            let close = closing_brace(after)
                .ok_or_else(|| fail("unclosed action: a '{' without its '}'".to_owned()))?;
            let action = after[..close].trim();
            rest = &after[close + 1..];
            if action == "end" {
                if stack.len() == 1 {
                    return Err(fail("{end} without a {range}".to_owned()));
                }
                let (path, body) = stack.pop().unwrap_or_default();
                let node = Node::Range(
                    path.unwrap_or(Path {
                        start: Start::Current,
                        steps: Vec::new(),
                    }),
                    body,
                );
                if let Some((_, nodes)) = stack.last_mut() {
                    nodes.push(node);
                }
            } else if let Some(expr) = action.strip_prefix("range").filter(|e| {
                e.starts_with(|c: char| c.is_whitespace() || matches!(c, '.' | '$' | '@'))
            }) {
                let path = parse_path(expr.trim()).map_err(fail)?;
                stack.push((Some(path), Vec::new()));
            } else if action.starts_with('"') {
                let text = parse_string(action).map_err(fail)?;
                push_text(&mut stack, &text);
            } else if action.is_empty() {
                return Err(fail("an empty action {}".to_owned()));
            } else {
                let path = parse_path(action).map_err(fail)?;
                if let Some((_, nodes)) = stack.last_mut() {
                    nodes.push(Node::Path(path));
                }
            }
        }
        if stack.len() != 1 {
            return Err(fail("{range} without its {end}".to_owned()));
        }
        let (_, nodes) = stack.pop().unwrap_or_default();
        Ok(Self { nodes })
    }

    /// Parses a path as `--sort-by` and custom columns take it, kubectl's relaxed form: with or
    /// without braces and the leading dot (`.metadata.name`, `{.metadata.name}`,
    /// `metadata.name`).
    pub(crate) fn parse_relaxed(path: &str) -> Result<Self, ParseError> {
        let trimmed = path.trim();
        let inner = trimmed
            .strip_prefix('{')
            .and_then(|p| p.strip_suffix('}'))
            .unwrap_or(trimmed);
        let inner = if inner.starts_with(['.', '$', '@']) {
            inner.to_owned()
        } else {
            format!(".{inner}")
        };
        Self::parse(&format!("{{{inner}}}"))
    }

    /// Prints the template for `doc`.
    pub(crate) fn render(&self, doc: &Value) -> String {
        let mut out = String::new();
        render(&self.nodes, doc, doc, &mut out);
        out
    }

    /// The values the template's actions select in `doc`, in order (for custom columns and
    /// sorting); text is ignored.
    pub(crate) fn values<'a>(&self, doc: &'a Value) -> Vec<&'a Value> {
        let mut found = Vec::new();
        collect(&self.nodes, doc, doc, &mut found);
        found
    }
}

fn push_text(stack: &mut [(Option<Path>, Vec<Node>)], text: &str) {
    if text.is_empty() {
        return;
    }
    if let Some((_, nodes)) = stack.last_mut() {
        match nodes.last_mut() {
            Some(Node::Text(t)) => t.push_str(text),
            _ => nodes.push(Node::Text(text.to_owned())),
        }
    }
}

/// The index of the `}` that closes an action, skipping quoted strings.
fn closing_brace(s: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '}' => return Some(i),
                _ => {}
            },
        }
    }
    None
}

/// A quoted string literal, `"..."` or `'...'`, with `\n`, `\t`, `\r`, `\\` and the quote escaped.
fn parse_string(s: &str) -> Result<String, String> {
    let mut chars = s.chars();
    let quote = chars.next().ok_or("an empty string literal")?;
    let mut out = String::new();
    let mut escaped = false;
    for c in chars.by_ref() {
        if escaped {
            out.push(match c {
                'n' => '\n',
                't' => '\t',
                'r' => '\r',
                other => other,
            });
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            let rest: String = chars.collect();
            if !rest.trim().is_empty() {
                return Err(format!("unexpected {rest:?} after a string literal"));
            }
            return Ok(out);
        } else {
            out.push(c);
        }
    }
    Err(format!("unterminated string literal {s}"))
}

fn parse_path(s: &str) -> Result<Path, String> {
    let mut p = Parser { s, i: 0 };
    let path = p.path()?;
    if p.i < s.len() {
        return Err(format!(
            "unsupported syntax at {:?} (supported: .field, ..field, .*, [n], [a:b], [*], \
             ['field'], [?(@.field==\"value\")])",
            &s[p.i..]
        ));
    }
    Ok(path)
}

struct Parser<'a> {
    s: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.s[self.i..]
    }

    fn eat(&mut self, prefix: &str) -> bool {
        if self.rest().starts_with(prefix) {
            self.i += prefix.len();
            true
        } else {
            false
        }
    }

    fn skip_spaces(&mut self) {
        let n = self.rest().len() - self.rest().trim_start().len();
        self.i += n;
    }

    fn name(&mut self) -> String {
        let len = self
            .rest()
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '/')))
            .unwrap_or(self.rest().len());
        let name = self.rest()[..len].to_owned();
        self.i += len;
        name
    }

    fn path(&mut self) -> Result<Path, String> {
        let start = if self.eat("$") {
            Start::Root
        } else {
            self.eat("@");
            Start::Current
        };
        let mut steps = Vec::new();
        loop {
            if self.eat("..") {
                let name = self.name();
                if name.is_empty() {
                    return Err(format!("a name must follow '..' at {:?}", self.rest()));
                }
                steps.push(Step::Descend(name));
            } else if self.eat(".") {
                if self.eat("*") {
                    steps.push(Step::All);
                } else if self.rest().starts_with('[') || self.rest().is_empty() {
                    // `.` alone, or `.[0]`: the current value.
                } else {
                    let name = self.name();
                    if name.is_empty() {
                        return Err(format!("a field name must follow '.' at {:?}", self.rest()));
                    }
                    steps.push(Step::Field(name));
                }
            } else if self.eat("[") {
                steps.push(self.bracket()?);
            } else {
                break;
            }
        }
        Ok(Path { start, steps })
    }

    fn bracket(&mut self) -> Result<Step, String> {
        self.skip_spaces();
        let step = if self.eat("*") {
            Step::All
        } else if self.eat("?(") {
            let filter = self.filter()?;
            self.skip_spaces();
            if !self.eat(")") {
                return Err(format!("a filter must end with ')]' at {:?}", self.rest()));
            }
            Step::Filter(Box::new(filter))
        } else if self.rest().starts_with(['\'', '"']) {
            let literal = self.literal_string()?;
            self.skip_spaces();
            if self.rest().starts_with(',') {
                return Err("unions (['a','b']) are not supported".to_owned());
            }
            Step::Field(literal)
        } else {
            let end = self.rest().find(']').ok_or("a '[' without its ']'")?;
            let inside = self.rest()[..end].trim().to_owned();
            if inside.contains(',') {
                return Err(format!("unions ([{inside}]) are not supported"));
            }
            let number = |s: &str| -> Result<Option<i64>, String> {
                let s = s.trim();
                if s.is_empty() {
                    Ok(None)
                } else {
                    s.parse()
                        .map(Some)
                        .map_err(|_| format!("{s:?} is not an index"))
                }
            };
            self.i += end;
            match inside.split(':').collect::<Vec<_>>()[..] {
                [one] => Step::Index(number(one)?.ok_or("an empty index []")?),
                [a, b] => Step::Slice(number(a)?, number(b)?),
                _ => return Err(format!("slices with a step ([{inside}]) are not supported")),
            }
        };
        self.skip_spaces();
        if !self.eat("]") {
            return Err(format!("expected ']' at {:?}", self.rest()));
        }
        Ok(step)
    }

    fn literal_string(&mut self) -> Result<String, String> {
        let rest = self.rest();
        let end = closing_quote(rest).ok_or_else(|| format!("unterminated string in {rest:?}"))?;
        let literal = parse_string(&rest[..=end])?;
        self.i += end + 1;
        Ok(literal)
    }

    fn filter(&mut self) -> Result<Filter, String> {
        self.skip_spaces();
        if !self.rest().starts_with(['@', '$']) {
            return Err(format!(
                "a filter must test a path (@.field) at {:?}",
                self.rest()
            ));
        }
        let left = self.path()?;
        self.skip_spaces();
        let op = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ]
        .into_iter()
        .find(|(s, _)| self.eat(s))
        .map(|(_, op)| op);
        let Some(op) = op else {
            return Ok(Filter { left, right: None });
        };
        self.skip_spaces();
        let right = if self.rest().starts_with(['@', '$']) {
            Operand::Path(self.path()?)
        } else if self.rest().starts_with(['\'', '"']) {
            Operand::Literal(Value::String(self.literal_string()?))
        } else {
            let len = self
                .rest()
                .find(|c: char| c == ')' || c.is_whitespace())
                .unwrap_or(self.rest().len());
            let word = self.rest()[..len].to_owned();
            self.i += len;
            let value = match word.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                "null" => Value::Null,
                w => serde_json::from_str::<serde_json::Number>(w)
                    .map(Value::Number)
                    .map_err(|_| {
                        format!("{w:?} is not a quoted string, a number, true, false or null")
                    })?,
            };
            Operand::Literal(value)
        };
        Ok(Filter {
            left,
            right: Some((op, right)),
        })
    }
}

/// The index of the quote that closes the string `s` starts with.
fn closing_quote(s: &str) -> Option<usize> {
    let quote = s.chars().next()?;
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            return Some(i);
        }
    }
    None
}

fn eval<'a>(path: &Path, root: &'a Value, current: &'a Value) -> Vec<&'a Value> {
    let mut values = vec![match path.start {
        Start::Root => root,
        Start::Current => current,
    }];
    for step in &path.steps {
        let mut next = Vec::new();
        for v in values {
            apply(step, root, v, &mut next);
        }
        values = next;
    }
    values
}

fn apply<'a>(step: &Step, root: &'a Value, v: &'a Value, out: &mut Vec<&'a Value>) {
    match step {
        Step::Field(name) => {
            if let Some(found) = v.get(name.as_str()) {
                out.push(found);
            }
        }
        Step::Descend(name) => descend(name, v, out),
        Step::All => match v {
            Value::Array(items) => out.extend(items),
            Value::Object(map) => out.extend(map.values()),
            _ => {}
        },
        Step::Index(i) => {
            if let Value::Array(items) = v {
                let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                let at = if *i < 0 { len + i } else { *i };
                if let Some(found) = usize::try_from(at).ok().and_then(|at| items.get(at)) {
                    out.push(found);
                }
            }
        }
        Step::Slice(start, end) => {
            if let Value::Array(items) = v {
                let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                let clamp = |n: i64| -> usize {
                    let n = if n < 0 { len + n } else { n };
                    usize::try_from(n.clamp(0, len)).unwrap_or(0)
                };
                let (a, b) = (clamp(start.unwrap_or(0)), clamp(end.unwrap_or(len)));
                if a < b {
                    out.extend(&items[a..b]);
                }
            }
        }
        Step::Filter(filter) => {
            let candidates: Vec<&Value> = match v {
                Value::Array(items) => items.iter().collect(),
                other => vec![other],
            };
            for c in candidates {
                if keeps(filter, root, c) {
                    out.push(c);
                }
            }
        }
    }
}

fn descend<'a>(name: &str, v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(map) => {
            if let Some(found) = map.get(name) {
                out.push(found);
            }
            for child in map.values() {
                descend(name, child, out);
            }
        }
        Value::Array(items) => {
            for child in items {
                descend(name, child, out);
            }
        }
        _ => {}
    }
}

fn keeps(filter: &Filter, root: &Value, current: &Value) -> bool {
    let left = eval(&filter.left, root, current);
    let Some((op, right)) = &filter.right else {
        return !left.is_empty();
    };
    let right: Vec<&Value> = match right {
        Operand::Literal(v) => vec![v],
        Operand::Path(p) => eval(p, root, current),
    };
    left.iter().any(|l| {
        right.iter().any(|r| {
            let ordering = compare(l, r);
            match op {
                Op::Eq => ordering == Some(Ordering::Equal),
                Op::Ne => ordering != Some(Ordering::Equal),
                Op::Lt => ordering == Some(Ordering::Less),
                Op::Le => matches!(ordering, Some(Ordering::Less | Ordering::Equal)),
                Op::Gt => ordering == Some(Ordering::Greater),
                Op::Ge => matches!(ordering, Some(Ordering::Greater | Ordering::Equal)),
            }
        })
    })
}

/// Compares two values of the same kind: numbers as numbers, strings as strings; `None` for
/// values that do not compare (a string with a number).
pub(crate) fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Null, Value::Null) => Some(Ordering::Equal),
        _ => (a == b).then_some(Ordering::Equal),
    }
}

/// The elements a `range` walks: each element of an array the path selects, else each value.
fn range_items<'a>(path: &Path, root: &'a Value, current: &'a Value) -> Vec<&'a Value> {
    let found = eval(path, root, current);
    match found[..] {
        [Value::Array(items)] => items.iter().collect(),
        _ => found,
    }
}

fn render(nodes: &[Node], root: &Value, current: &Value, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Path(p) => {
                for (i, v) in eval(p, root, current).into_iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    push_value(out, v);
                }
            }
            Node::Range(p, body) => {
                for item in range_items(p, root, current) {
                    render(body, root, item, out);
                }
            }
        }
    }
}

fn collect<'a>(nodes: &[Node], root: &'a Value, current: &'a Value, out: &mut Vec<&'a Value>) {
    for node in nodes {
        match node {
            Node::Text(_) => {}
            Node::Path(p) => out.extend(eval(p, root, current)),
            Node::Range(p, body) => {
                for item in range_items(p, root, current) {
                    collect(body, root, item, out);
                }
            }
        }
    }
}

/// A value as kubectl's JSONPath prints it: a string as itself, anything else as JSON; the
/// server's text made safe for a terminal either way (the template's own text is kept as
/// written, its line breaks included).
pub(crate) fn push_value(out: &mut String, v: &Value) {
    match v {
        Value::String(s) => out.push_str(&crate::terminal::safe(s)),
        other => out.push_str(&crate::terminal::safe_json(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "kind": "List",
            "items": [
                {"metadata": {"name": "a", "labels": {"app": "web"}}, "status": {"phase": "Running", "n": 3}},
                {"metadata": {"name": "b"}, "status": {"phase": "Pending", "n": 10}},
                {"metadata": {"name": "c", "labels": {"app": "db"}}, "status": {"phase": "Running", "n": 1}},
            ]
        })
    }

    fn render(t: &str) -> String {
        Template::parse(t).unwrap().render(&doc())
    }

    #[test]
    fn renders_kubectls_common_templates() {
        assert_eq!(render("{.kind}"), "List");
        assert_eq!(render("{.items[*].metadata.name}"), "a b c");
        assert_eq!(render("{.items[0].metadata.name}"), "a");
        assert_eq!(render("{.items[-1].metadata.name}"), "c");
        assert_eq!(render("{.items[0:2].metadata.name}"), "a b");
        assert_eq!(render("{$.items[1]['metadata']['name']}"), "b");
        assert_eq!(
            render(r#"{range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\n"}{end}"#),
            "a\tRunning\nb\tPending\nc\tRunning\n"
        );
        assert_eq!(
            render(r#"{.items[?(@.status.phase=="Running")].metadata.name}"#),
            "a c"
        );
        assert_eq!(render("{.items[?(@.status.n > 2)].metadata.name}"), "a b");
        assert_eq!(
            render("{.items[?(@.metadata.labels.app)].metadata.name}"),
            "a c"
        );
        assert_eq!(render("{..phase}"), "Running Pending Running");
        assert_eq!(
            render("name: {.items[0].metadata.labels}"),
            r#"name: {"app":"web"}"#
        );
        assert_eq!(render("{.items[*].nope}"), "");
        assert_eq!(render("{.items[0].status.n}"), "3");
        assert_eq!(render("{range .items}{.metadata.name},{end}"), "a,b,c,");
        assert_eq!(render("{range.items[*]}{.metadata.name};{end}"), "a;b;c;");
    }

    #[test]
    fn relaxed_paths_take_every_form() {
        let item = &doc()["items"][0];
        for p in [".metadata.name", "{.metadata.name}", "metadata.name"] {
            let t = Template::parse_relaxed(p).unwrap();
            assert_eq!(t.values(item), [&json!("a")], "{p}");
        }
    }

    #[test]
    fn unsupported_syntax_is_refused_with_a_reason() {
        for (t, says) in [
            ("{.items[}", "without its ']'"),
            ("{.items", "unclosed action"),
            ("{range .items[*]}{.x}", "without its {end}"),
            ("{end}", "without a {range}"),
            ("{.items['a','b']}", "unions"),
            ("{.items[0,1]}", "unions"),
            ("{.items[::2]}", "step"),
            ("{.a | b}", "unsupported syntax"),
            ("{}", "empty action"),
            ("{.items[?(@.a == x)]}", "not a quoted string"),
        ] {
            let e = Template::parse(t).unwrap_err().to_string();
            assert!(e.contains(says), "{t}: {e}");
        }
    }
}
