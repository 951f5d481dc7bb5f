//! Label selectors.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

use super::invalid;
use crate::Error;

/// The operator of one label requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// `key=value` or `key==value`: the label is present with this value.
    Equals,
    /// `key!=value`: the label is absent, or has another value.
    NotEquals,
    /// `key in (a,b)`: the label is present with one of the values.
    In,
    /// `key notin (a,b)`: the label is absent, or has none of the values.
    NotIn,
    /// `key`: the label is present.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key>n`: the label is present and its integer value is greater than `n`.
    GreaterThan,
    /// `key<n`: the label is present and its integer value is less than `n`.
    LessThan,
}

/// One requirement of a label selector: a key, an operator and its values (sorted, distinct).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// A requirement, checked as the API server checks it: a valid label key, valid label values,
    /// exactly one value for `=`/`!=`, at least one for `in`/`notin`, none for exists/does-not-exist,
    /// and one integer for `>`/`<`.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, Error> {
        let text = || format!("{key} {operator:?} {values:?}");
        validate_key(key).map_err(|m| invalid(&text(), 0, m))?;
        let count_ok = match operator {
            Operator::Equals | Operator::NotEquals => values.len() == 1,
            Operator::In | Operator::NotIn => !values.is_empty(),
            Operator::Exists | Operator::DoesNotExist => values.is_empty(),
            Operator::GreaterThan | Operator::LessThan => values.len() == 1,
        };
        if !count_ok {
            return Err(invalid(
                &text(),
                0,
                format!("wrong number of values for {operator:?}"),
            ));
        }
        for v in &values {
            if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
                v.parse::<i64>()
                    .map_err(|_| invalid(&text(), 0, format!("{v:?} is not an integer")))?;
            } else {
                validate_value(v).map_err(|m| invalid(&text(), 0, m))?;
            }
        }
        let mut values = values;
        values.sort();
        values.dedup();
        Ok(Self {
            key: key.to_owned(),
            operator,
            values,
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted and distinct.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether a set of labels meets this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let has = |v: &String| self.values.binary_search(v).is_ok();
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(has),
            Operator::NotEquals | Operator::NotIn => !value.is_some_and(has),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(have), Some(bound)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > bound
                } else {
                    have < bound
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = self.values.first().map_or("", String::as_str);
        match self.operator {
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::Equals => write!(f, "{}={first}", self.key),
            Operator::NotEquals => write!(f, "{}!={first}", self.key),
            Operator::GreaterThan => write!(f, "{}>{first}", self.key),
            Operator::LessThan => write!(f, "{}<{first}", self.key),
            Operator::In | Operator::NotIn => {
                let op = if self.operator == Operator::In {
                    "in"
                } else {
                    "notin"
                };
                write!(f, "{} {op} ({})", self.key, self.values.join(","))
            }
        }
    }
}

/// A label selector: requirements that must all hold (comma means AND).
///
/// The empty selector matches everything; [`LabelSelector::nothing`] matches nothing (what a
/// `null` `metav1.LabelSelector` means). Requirements are kept sorted, so two selectors that mean the
/// same are equal and render to the same canonical string.
///
/// ```
/// use kinformer_core::LabelSelector;
/// use std::collections::BTreeMap;
///
/// let s: LabelSelector = "env=prod,version>2".parse().unwrap();
/// let labels = BTreeMap::from([
///     ("env".to_string(), "prod".to_string()),
///     ("version".to_string(), "3".to_string()),
/// ]);
/// assert!(s.matches(&labels));
/// assert!(LabelSelector::everything().matches(&labels));
/// assert!(!LabelSelector::nothing().matches(&labels));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl LabelSelector {
    /// The selector that matches every object.
    pub fn everything() -> Self {
        Self::default()
    }

    /// The selector that matches no object.
    pub fn nothing() -> Self {
        Self {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// A selector from requirements (sorted here).
    pub fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort();
        Self {
            requirements,
            nothing: false,
        }
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// `true` for the selector that matches everything.
    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// `true` for the selector that matches nothing.
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// Whether a set of labels meets every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Converts a `metav1.LabelSelector` (`matchLabels` and `matchExpressions`), as
    /// `metav1.LabelSelectorAsSelector` does: `None` selects nothing, an empty one everything.
    ///
    /// ```
    /// use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
    /// use kinformer_core::LabelSelector;
    /// use std::collections::BTreeMap;
    ///
    /// let ls = metav1::LabelSelector {
    ///     match_labels: Some(BTreeMap::from([("app".into(), "web".into())])),
    ///     match_expressions: Some(vec![metav1::LabelSelectorRequirement {
    ///         key: "tier".into(), operator: "NotIn".into(), values: Some(vec!["db".into()]),
    ///     }]),
    /// };
    /// let s = LabelSelector::from_label_selector(Some(&ls)).unwrap();
    /// assert_eq!(s.to_string(), "app=web,tier notin (db)");
    /// assert!(LabelSelector::from_label_selector(None).unwrap().is_nothing());
    /// ```
    pub fn from_label_selector(selector: Option<&metav1::LabelSelector>) -> Result<Self, Error> {
        let Some(selector) = selector else {
            return Ok(Self::nothing());
        };
        let mut reqs = Vec::new();
        for (k, v) in selector.match_labels.iter().flatten() {
            reqs.push(Requirement::new(k, Operator::Equals, vec![v.clone()])?);
        }
        for e in selector.match_expressions.iter().flatten() {
            let op = match e.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(Error::UnsupportedSelector(format!(
                        "{other:?} is not a label selector operator"
                    )));
                }
            };
            reqs.push(Requirement::new(
                &e.key,
                op,
                e.values.clone().unwrap_or_default(),
            )?);
        }
        Ok(Self::from_requirements(reqs))
    }

    /// Converts to a `metav1.LabelSelector`. `=` becomes `matchLabels`, `!=` a `NotIn` expression;
    /// `>` and `<` have no such form and give [`Error::UnsupportedSelector`], and so does
    /// [`LabelSelector::nothing`].
    pub fn to_label_selector(&self) -> Result<metav1::LabelSelector, Error> {
        if self.nothing {
            return Err(Error::UnsupportedSelector(
                "the selector that matches nothing is a null metav1.LabelSelector".into(),
            ));
        }
        let mut match_labels = BTreeMap::new();
        let mut exprs = Vec::new();
        for r in &self.requirements {
            let (op, values) = match r.operator {
                Operator::Equals if !match_labels.contains_key(&r.key) => {
                    match_labels.insert(r.key.clone(), r.values[0].clone());
                    continue;
                }
                Operator::Equals | Operator::In => ("In", Some(r.values.clone())),
                Operator::NotEquals | Operator::NotIn => ("NotIn", Some(r.values.clone())),
                Operator::Exists => ("Exists", None),
                Operator::DoesNotExist => ("DoesNotExist", None),
                Operator::GreaterThan | Operator::LessThan => {
                    return Err(Error::UnsupportedSelector(format!(
                        "{r} has no metav1.LabelSelector form"
                    )));
                }
            };
            exprs.push(metav1::LabelSelectorRequirement {
                key: r.key.clone(),
                operator: op.to_owned(),
                values,
            });
        }
        Ok(metav1::LabelSelector {
            match_labels: (!match_labels.is_empty()).then_some(match_labels),
            match_expressions: (!exprs.is_empty()).then_some(exprs),
        })
    }
}

impl fmt::Display for LabelSelector {
    /// The canonical string. The selector that matches nothing has no string form and renders
    /// empty, as in apimachinery.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl FromStr for LabelSelector {
    type Err = Error;

    /// Parses the full Kubernetes grammar: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`,
    /// `a`, `!a`, `a>1`, `a<1`, joined by commas. The empty string selects everything.
    fn from_str(input: &str) -> Result<Self, Error> {
        Parser::new(input).parse()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token<'a> {
    Ident(&'a str),
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    In,
    NotIn,
    Open,
    Close,
    Comma,
    End,
}

impl<'a> Token<'a> {
    /// The token read where a value is expected: an identifier, or the keywords `in` and
    /// `notin`, which are values there (Kubernetes' parser reads them as identifiers in that
    /// context, so `tier=in` and `a in (in,notin)` are valid).
    fn as_value(&self) -> Option<&'a str> {
        match self {
            Token::Ident(v) => Some(v),
            Token::In => Some("in"),
            Token::NotIn => Some("notin"),
            _ => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            Token::Ident(s) => format!("identifier {s:?}"),
            Token::Not => "'!'".into(),
            Token::Eq => "'='".into(),
            Token::DoubleEq => "'=='".into(),
            Token::NotEq => "'!='".into(),
            Token::Gt => "'>'".into(),
            Token::Lt => "'<'".into(),
            Token::In => "'in'".into(),
            Token::NotIn => "'notin'".into(),
            Token::Open => "'('".into(),
            Token::Close => "')'".into(),
            Token::Comma => "','".into(),
            Token::End => "end of input".into(),
        }
    }
}

struct Parser<'a> {
    input: &'a str,
    pos: usize,
    peeked: Option<(usize, Token<'a>)>,
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Self {
        Self {
            input,
            pos: 0,
            peeked: None,
        }
    }

    fn err(&self, at: usize, message: impl Into<String>) -> Error {
        invalid(self.input, at, message)
    }

    /// Reads the next token and the byte offset where it starts.
    fn lex(&mut self) -> (usize, Token<'a>) {
        let rest = &self.input[self.pos..];
        let trimmed = rest.trim_start();
        let start = self.pos + (rest.len() - trimmed.len());
        let mut chars = trimmed.chars();
        let (len, tok) = match chars.next() {
            None => (0, Token::End),
            Some('(') => (1, Token::Open),
            Some(')') => (1, Token::Close),
            Some(',') => (1, Token::Comma),
            Some('>') => (1, Token::Gt),
            Some('<') => (1, Token::Lt),
            Some('!') if trimmed.starts_with("!=") => (2, Token::NotEq),
            Some('!') => (1, Token::Not),
            Some('=') if trimmed.starts_with("==") => (2, Token::DoubleEq),
            Some('=') => (1, Token::Eq),
            Some(_) => {
                let len = trimmed
                    .find(|c: char| c.is_whitespace() || is_special(c))
                    .unwrap_or(trimmed.len());
                let word = &trimmed[..len];
                let tok = match word {
                    "in" => Token::In,
                    "notin" => Token::NotIn,
                    _ => Token::Ident(word),
                };
                (len, tok)
            }
        };
        self.pos = start + len;
        (start, tok)
    }

    fn next(&mut self) -> (usize, Token<'a>) {
        self.peeked.take().unwrap_or_else(|| self.lex())
    }

    fn peek(&mut self) -> &Token<'a> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lex());
        }
        &self.peeked.as_ref().expect("peeked was just set").1
    }

    fn parse(mut self) -> Result<LabelSelector, Error> {
        let mut reqs = Vec::new();
        if *self.peek() == Token::End {
            return Ok(LabelSelector::everything());
        }
        loop {
            reqs.push(self.requirement()?);
            match self.next() {
                (_, Token::End) => break,
                (_, Token::Comma) => continue,
                (at, t) => {
                    return Err(self.err(
                        at,
                        format!("expected ',' or end of input, found {}", t.describe()),
                    ));
                }
            }
        }
        Ok(LabelSelector::from_requirements(reqs))
    }

    fn requirement(&mut self) -> Result<Requirement, Error> {
        let (at, tok) = self.next();
        let (key_at, key, negated) = match tok {
            Token::Not => match self.next() {
                (k_at, Token::Ident(k)) => (k_at, k, true),
                (k_at, t) => {
                    return Err(self.err(
                        k_at,
                        format!("expected a label key after '!', found {}", t.describe()),
                    ));
                }
            },
            Token::Ident(k) => (at, k, false),
            t => return Err(self.err(at, format!("expected a label key, found {}", t.describe()))),
        };
        validate_key(key).map_err(|m| self.err(key_at, m))?;
        if negated {
            return match self.peek() {
                Token::Comma | Token::End => {
                    Ok(self.build(key_at, key, Operator::DoesNotExist, vec![])?)
                }
                _ => {
                    let (at, t) = self.next();
                    Err(self.err(
                        at,
                        format!(
                            "expected ',' or end of input after '!{key}', found {}",
                            t.describe()
                        ),
                    ))
                }
            };
        }
        let (op_at, op) = match self.peek() {
            Token::Comma | Token::End => return self.build(key_at, key, Operator::Exists, vec![]),
            _ => self.next(),
        };
        let operator = match op {
            Token::Eq | Token::DoubleEq => Operator::Equals,
            Token::NotEq => Operator::NotEquals,
            Token::Gt => Operator::GreaterThan,
            Token::Lt => Operator::LessThan,
            Token::In => Operator::In,
            Token::NotIn => Operator::NotIn,
            t => {
                return Err(self.err(
                    op_at,
                    format!(
                        "expected an operator (=, ==, !=, >, <, in, notin) after {key:?}, found {}",
                        t.describe()
                    ),
                ));
            }
        };
        let values = if matches!(operator, Operator::In | Operator::NotIn) {
            self.value_set()?
        } else {
            vec![self.single_value(operator)?]
        };
        self.build(key_at, key, operator, values)
    }

    fn build(
        &self,
        at: usize,
        key: &str,
        operator: Operator,
        values: Vec<String>,
    ) -> Result<Requirement, Error> {
        Requirement::new(key, operator, values).map_err(|e| match e {
            Error::InvalidSelector { message, .. } => self.err(at, message),
            other => other,
        })
    }

    fn single_value(&mut self, operator: Operator) -> Result<String, Error> {
        match self.peek() {
            // `a=` selects the empty value, as in Kubernetes.
            Token::Comma | Token::End
                if !matches!(operator, Operator::GreaterThan | Operator::LessThan) =>
            {
                Ok(String::new())
            }
            _ => match self.next() {
                (at, t) if t.as_value().is_some() => {
                    let v = t.as_value().unwrap_or_default();
                    self.check_value(at, v, operator)?;
                    Ok(v.to_owned())
                }
                (at, t) => Err(self.err(at, format!("expected a value, found {}", t.describe()))),
            },
        }
    }

    fn check_value(&self, at: usize, v: &str, operator: Operator) -> Result<(), Error> {
        if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
            v.parse::<i64>()
                .map(|_| ())
                .map_err(|_| self.err(at, format!("{v:?} is not an integer")))
        } else {
            validate_value(v).map_err(|m| self.err(at, m))
        }
    }

    fn value_set(&mut self) -> Result<Vec<String>, Error> {
        match self.next() {
            (_, Token::Open) => {}
            (at, t) => return Err(self.err(at, format!("expected '(', found {}", t.describe()))),
        }
        let mut values = Vec::new();
        loop {
            // A value may be empty: `in (,a)` holds "" and "a".
            let value = match self.peek().as_value() {
                Some(_) => {
                    let (at, t) = self.next();
                    let v = t.as_value().unwrap_or_default();
                    self.check_value(at, v, Operator::In)?;
                    v.to_owned()
                }
                None => String::new(),
            };
            match self.next() {
                (_, Token::Comma) => values.push(value),
                (_, Token::Close) => {
                    // `()` is the set holding the empty value, as in Kubernetes.
                    values.push(value);
                    return Ok(values);
                }
                (at, t) => {
                    return Err(
                        self.err(at, format!("expected ',' or ')', found {}", t.describe()))
                    );
                }
            }
        }
    }
}

fn is_alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

/// A label value or the name part of a key: at most 63 characters, alphanumeric at both ends,
/// `-`, `_` and `.` between.
fn validate_name_part(s: &str, what: &str, allow_empty: bool) -> Result<(), String> {
    let b = s.as_bytes();
    if b.is_empty() {
        return if allow_empty {
            Ok(())
        } else {
            Err(format!("{what} must not be empty"))
        };
    }
    if b.len() > 63 {
        return Err(format!("{what} {s:?} is longer than 63 characters"));
    }
    if !is_alnum(b[0]) || !is_alnum(b[b.len() - 1]) {
        return Err(format!(
            "{what} {s:?} must begin and end with a letter or digit"
        ));
    }
    if let Some(c) = s
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "{what} {s:?} contains {c:?}; only letters, digits, '-', '_' and '.' are allowed"
        ));
    }
    Ok(())
}

fn validate_value(v: &str) -> Result<(), String> {
    validate_name_part(v, "label value", true)
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name part.
fn validate_key(k: &str) -> Result<(), String> {
    let name = match k.split_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() || prefix.len() > 253 {
                return Err(format!(
                    "label key prefix {prefix:?} must be 1 to 253 characters"
                ));
            }
            for label in prefix.split('.') {
                let b = label.as_bytes();
                let ok = !b.is_empty()
                    && b.len() <= 63
                    && b.iter()
                        .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                    && b[0] != b'-'
                    && b[b.len() - 1] != b'-';
                if !ok {
                    return Err(format!(
                        "label key prefix {prefix:?} is not a DNS subdomain"
                    ));
                }
            }
            name
        }
        None => k,
    };
    validate_name_part(name, "label key name", false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_and_matches_every_operator() {
        // (selector, canonical rendering, labels, matches?)
        type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], bool);
        let cases: &[Case<'_>] = &[
            ("", "", &[], true),
            ("a=b", "a=b", &[("a", "b")], true),
            ("a==b", "a=b", &[("a", "b")], true),
            ("a=b", "a=b", &[("a", "c")], false),
            ("a=b", "a=b", &[], false),
            ("a!=b", "a!=b", &[("a", "c")], true),
            ("a!=b", "a!=b", &[], true),
            ("a!=b", "a!=b", &[("a", "b")], false),
            ("a in (x,y)", "a in (x,y)", &[("a", "y")], true),
            ("a in (y, x)", "a in (x,y)", &[("a", "z")], false),
            ("a in (x)", "a in (x)", &[], false),
            ("a notin (x)", "a notin (x)", &[], true),
            ("a notin (x)", "a notin (x)", &[("a", "x")], false),
            ("a", "a", &[("a", "")], true),
            ("a", "a", &[], false),
            ("!a", "!a", &[], true),
            ("!a", "!a", &[("a", "1")], false),
            ("a>5", "a>5", &[("a", "6")], true),
            ("a>5", "a>5", &[("a", "5")], false),
            ("a>5", "a>5", &[("a", "x")], false),
            ("a<5", "a<5", &[("a", "-1")], true),
            ("a=", "a=", &[("a", "")], true),
            ("a in (,x)", "a in (,x)", &[("a", "")], true),
            ("a in ()", "a in ()", &[("a", "")], true),
            ("a notin ()", "a notin ()", &[("a", "x")], true),
            ("b=1,a=2", "a=2,b=1", &[("a", "2"), ("b", "1")], true),
            ("b=1,a=2", "a=2,b=1", &[("a", "2")], false),
            ("  x = y ,  !z  ", "x=y,!z", &[("x", "y")], true),
            (
                "example.com/app=web",
                "example.com/app=web",
                &[("example.com/app", "web")],
                true,
            ),
            ("a in (x,x)", "a in (x)", &[("a", "x")], true),
            // The keywords are values where a value is expected, as in Kubernetes.
            ("tier=in", "tier=in", &[("tier", "in")], true),
            ("tier!=notin", "tier!=notin", &[("tier", "in")], true),
            (
                "a in (in,notin)",
                "a in (in,notin)",
                &[("a", "notin")],
                true,
            ),
            ("a notin (in)", "a notin (in)", &[("a", "in")], false),
        ];
        for (input, canonical, l, want) in cases {
            let s: LabelSelector = input.parse().unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(s.to_string(), *canonical, "{input}");
            assert_eq!(s.matches(&labels(l)), *want, "{input} on {l:?}");
        }
    }

    #[test]
    fn reports_malformed_input_with_position() {
        let cases: &[(&str, usize, &str)] = &[
            ("a in (x", 7, "expected ',' or ')'"),
            ("a in x", 5, "expected '('"),
            ("=b", 0, "expected a label key"),
            ("a b", 2, "expected an operator"),
            ("a=b c", 4, "expected ',' or end of input"),
            ("a=b,", 4, "expected a label key"),
            ("!", 1, "expected a label key after '!'"),
            ("!a=b", 2, "expected ',' or end of input after '!a'"),
            ("a>x", 2, "not an integer"),
            ("a>", 2, "expected a value"),
            ("-a=b", 0, "must begin and end"),
            ("a=b$c", 2, "contains '$'"),
            ("Bad_Prefix/a=b", 0, "not a DNS subdomain"),
            ("a/=b", 0, "must not be empty"),
            ("a=b=c", 3, "expected ',' or end of input"),
            ("a in (x,y", 9, "expected ',' or ')'"),
        ];
        for (input, pos, msg) in cases {
            match input.parse::<LabelSelector>() {
                Err(Error::InvalidSelector {
                    input: i,
                    position,
                    message,
                }) => {
                    assert_eq!(i, *input);
                    assert_eq!(position, *pos, "{input}: {message}");
                    assert!(message.contains(msg), "{input}: {message:?} lacks {msg:?}");
                }
                other => panic!("{input}: {other:?}"),
            }
        }
        let long = format!("a={}", "v".repeat(64));
        assert!(long.parse::<LabelSelector>().is_err());
    }

    #[test]
    fn converts_from_and_to_metav1() {
        let s: LabelSelector = "app=web,tier notin (db,cache),gpu,!legacy,zone in (a,b)"
            .parse()
            .unwrap();
        let ls = s.to_label_selector().unwrap();
        assert_eq!(ls.match_labels.as_ref().unwrap()["app"], "web");
        assert_eq!(ls.match_expressions.as_ref().unwrap().len(), 4);
        let back = LabelSelector::from_label_selector(Some(&ls)).unwrap();
        let l = labels(&[("app", "web"), ("gpu", ""), ("zone", "a")]);
        assert!(s.matches(&l) && back.matches(&l));
        let l = labels(&[("app", "web"), ("gpu", ""), ("zone", "a"), ("tier", "db")]);
        assert!(!s.matches(&l) && !back.matches(&l));
        assert!(
            "a>1"
                .parse::<LabelSelector>()
                .unwrap()
                .to_label_selector()
                .is_err()
        );
        assert!(LabelSelector::nothing().to_label_selector().is_err());
        let empty = metav1::LabelSelector::default();
        assert!(
            LabelSelector::from_label_selector(Some(&empty))
                .unwrap()
                .is_everything()
        );
        let bad = metav1::LabelSelector {
            match_expressions: Some(vec![metav1::LabelSelectorRequirement {
                key: "a".into(),
                operator: "Like".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert!(matches!(
            LabelSelector::from_label_selector(Some(&bad)),
            Err(Error::UnsupportedSelector(_))
        ));
    }

    fn arb_name() -> impl Strategy<Value = String> {
        prop_oneof!["[a-z]", "[a-zA-Z0-9][a-zA-Z0-9._-]{0,10}[a-zA-Z0-9]"]
    }

    fn arb_key() -> impl Strategy<Value = String> {
        (
            proptest::option::of("[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?(\\.[a-z0-9]{1,5}){0,2}"),
            arb_name(),
        )
            .prop_map(|(p, n)| p.map_or(n.clone(), |p| format!("{p}/{n}")))
            .prop_filter("keywords are not keys", |k| k != "in" && k != "notin")
    }

    fn arb_value() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("in".to_owned()),
            Just("notin".to_owned()),
            arb_name()
        ]
    }

    fn arb_requirement() -> impl Strategy<Value = Requirement> {
        let ops = prop_oneof![
            Just(Operator::Equals),
            Just(Operator::NotEquals),
            Just(Operator::In),
            Just(Operator::NotIn),
            Just(Operator::Exists),
            Just(Operator::DoesNotExist),
            Just(Operator::GreaterThan),
            Just(Operator::LessThan),
        ];
        (
            arb_key(),
            ops,
            proptest::collection::vec(arb_value(), 1..4),
            any::<i32>(),
        )
            .prop_map(|(k, op, vals, n)| {
                let values = match op {
                    Operator::Equals | Operator::NotEquals => vec![vals[0].clone()],
                    Operator::In | Operator::NotIn => vals,
                    Operator::Exists | Operator::DoesNotExist => vec![],
                    Operator::GreaterThan | Operator::LessThan => vec![n.to_string()],
                };
                Requirement::new(&k, op, values).expect("generated requirements are valid")
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn parse_of_render_is_identity(reqs in proptest::collection::vec(arb_requirement(), 0..5)) {
            let s = LabelSelector::from_requirements(reqs);
            let rendered = s.to_string();
            let parsed: LabelSelector = rendered.parse().map_err(|e| TestCaseError::fail(format!("{rendered}: {e}")))?;
            prop_assert_eq!(&parsed, &s);
            prop_assert_eq!(parsed.to_string(), rendered);
        }

        #[test]
        fn never_panics_on_arbitrary_input(input in ".{0,40}") {
            let _ = input.parse::<LabelSelector>();
        }

        #[test]
        fn never_panics_on_selector_like_input(input in "[a-z!=(),<> in notin0-9/.-]{0,30}") {
            if let Err(Error::InvalidSelector { position, .. }) = input.parse::<LabelSelector>() {
                prop_assert!(position <= input.len());
            }
        }
    }
}
