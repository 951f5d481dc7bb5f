//! Field selectors.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use super::invalid;
use crate::Error;

/// The operator of one field requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FieldOperator {
    /// `field=value` or `field==value`.
    Equals,
    /// `field!=value`.
    NotEquals,
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldRequirement {
    /// The field path, for example `metadata.name` or `spec.nodeName`.
    pub field: String,
    /// The operator.
    pub operator: FieldOperator,
    /// The value, unescaped.
    pub value: String,
}

/// A field selector: terms that must all hold. The empty selector matches everything.
///
/// Values may contain `,`, `=` and `\` escaped with a backslash, as in apimachinery. A field the
/// object does not have counts as the empty string.
///
/// ```
/// use kinformer_core::FieldSelector;
///
/// let s: FieldSelector = "metadata.namespace!=kube-system,metadata.name=a\\,b".parse().unwrap();
/// assert_eq!(s.requirements()[0].value, "a,b");
/// assert_eq!(s.to_string(), "metadata.name=a\\,b,metadata.namespace!=kube-system");
/// assert!(s.matches(|f| Some(if f == "metadata.name" { "a,b" } else { "default" }.into())));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// A selector from terms (sorted here).
    pub fn from_requirements(mut requirements: Vec<FieldRequirement>) -> Self {
        requirements.sort();
        Self { requirements }
    }

    /// The terms, sorted by field.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// `true` when the selector matches everything.
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object matches, given a function that reads a field's value from it (`None` for a
    /// field the object does not have).
    pub fn matches<'a>(&self, mut field: impl FnMut(&str) -> Option<Cow<'a, str>>) -> bool {
        self.requirements.iter().all(|r| {
            let v = field(&r.field);
            let equal = v.as_deref().unwrap_or("") == r.value;
            equal == (r.operator == FieldOperator::Equals)
        })
    }
}

fn escape(v: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for c in v.chars() {
        if matches!(c, '\\' | ',' | '=') {
            f.write_str("\\")?;
        }
        write!(f, "{c}")?;
    }
    Ok(())
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(&r.field)?;
            f.write_str(match r.operator {
                FieldOperator::Equals => "=",
                FieldOperator::NotEquals => "!=",
            })?;
            escape(&r.value, f)?;
        }
        Ok(())
    }
}

impl FromStr for FieldSelector {
    type Err = Error;

    /// Parses `field=value`, `field==value` and `field!=value` terms joined by commas.
    fn from_str(input: &str) -> Result<Self, Error> {
        let mut reqs = Vec::new();
        if input.trim().is_empty() {
            return Ok(Self::default());
        }
        for (start, term) in split_unescaped(input) {
            reqs.push(parse_term(input, start, term)?);
        }
        Ok(Self::from_requirements(reqs))
    }
}

/// Splits on commas that are not escaped, with each part's byte offset.
fn split_unescaped(input: &str) -> Vec<(usize, &str)> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in input.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                parts.push((start, &input[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push((start, &input[start..]));
    parts
}

fn parse_term(input: &str, start: usize, term: &str) -> Result<FieldRequirement, Error> {
    // The first unescaped operator splits field from value; `!=` and `==` before `=`.
    let bytes = term.as_bytes();
    let mut i = 0;
    let mut found = None;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'!' if bytes.get(i + 1) == Some(&b'=') => {
                found = Some((i, 2, FieldOperator::NotEquals));
                break;
            }
            b'=' if bytes.get(i + 1) == Some(&b'=') => {
                found = Some((i, 2, FieldOperator::Equals));
                break;
            }
            b'=' => {
                found = Some((i, 1, FieldOperator::Equals));
                break;
            }
            _ => {}
        }
        i += 1;
    }
    let Some((at, len, operator)) = found else {
        return Err(invalid(
            input,
            start,
            format!("{term:?} has no operator (=, ==, !=)"),
        ));
    };
    let field = term[..at].trim();
    if field.is_empty() {
        return Err(invalid(
            input,
            start,
            "a field selector term needs a field name",
        ));
    }
    if let Some(c) = field
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/')))
    {
        return Err(invalid(
            input,
            start,
            format!("field name {field:?} contains {c:?}"),
        ));
    }
    let raw = &term[at + len..];
    let mut value = String::with_capacity(raw.len());
    let mut chars = raw.char_indices();
    while let Some((j, c)) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some((_, e @ ('\\' | ',' | '='))) => value.push(e),
                Some((k, e)) => {
                    return Err(invalid(
                        input,
                        start + at + len + k,
                        format!("invalid escape sequence \\{e}"),
                    ));
                }
                None => {
                    return Err(invalid(
                        input,
                        start + at + len + j,
                        "a trailing backslash escapes nothing",
                    ));
                }
            }
        } else if c == '=' || (c == '!' && raw[j + 1..].starts_with('=')) {
            return Err(invalid(
                input,
                start + at + len + j,
                "an unescaped operator in a value",
            ));
        } else {
            value.push(c);
        }
    }
    Ok(FieldRequirement {
        field: field.to_owned(),
        operator,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn parses_matches_and_renders() {
        let fields: BTreeMap<&str, &str> = [
            ("metadata.name", "a"),
            ("metadata.namespace", "ns"),
            ("spec.nodeName", "n1"),
        ]
        .into();
        let get = |f: &str| fields.get(f).map(|v| Cow::Borrowed(*v));
        // (selector, canonical, matches)
        let cases: &[(&str, &str, bool)] = &[
            ("", "", true),
            ("metadata.name=a", "metadata.name=a", true),
            ("metadata.name==a", "metadata.name=a", true),
            ("metadata.name!=a", "metadata.name!=a", false),
            ("spec.nodeName=n2", "spec.nodeName=n2", false),
            ("status.phase=", "status.phase=", true),
            ("status.phase!=Running", "status.phase!=Running", true),
            (
                "spec.nodeName=n1,metadata.namespace=ns",
                "metadata.namespace=ns,spec.nodeName=n1",
                true,
            ),
            (" metadata.name = a", "metadata.name= a", false),
        ];
        for (input, canonical, want) in cases {
            let s: FieldSelector = input.parse().unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(s.to_string(), *canonical, "{input}");
            assert_eq!(s.matches(get), *want, "{input}");
        }
    }

    #[test]
    fn rejects_malformed_terms() {
        let cases: &[(&str, usize, &str)] = &[
            ("metadata.name", 0, "no operator"),
            ("a=b,c", 4, "no operator"),
            ("=b", 0, "needs a field name"),
            ("a=b\\", 3, "trailing backslash"),
            ("a=b\\x", 4, "invalid escape"),
            ("a=b=c", 3, "unescaped operator"),
            ("a b=c", 0, "contains ' '"),
        ];
        for (input, pos, msg) in cases {
            match input.parse::<FieldSelector>() {
                Err(Error::InvalidSelector {
                    position, message, ..
                }) => {
                    assert_eq!(position, *pos, "{input}: {message}");
                    assert!(message.contains(msg), "{input}: {message}");
                }
                other => panic!("{input}: {other:?}"),
            }
        }
    }

    proptest! {
        #[test]
        fn parse_of_render_is_identity(
            terms in proptest::collection::vec(("[a-z][a-zA-Z0-9.]{0,12}", any::<bool>(), "[a-z0-9,=\\\\ -]{0,8}"), 0..4)
        ) {
            let s = FieldSelector::from_requirements(terms.into_iter().map(|(field, eq, value)| FieldRequirement {
                field,
                operator: if eq { FieldOperator::Equals } else { FieldOperator::NotEquals },
                value,
            }).collect());
            let rendered = s.to_string();
            let parsed: FieldSelector = rendered.parse().map_err(|e| TestCaseError::fail(format!("{rendered}: {e}")))?;
            prop_assert_eq!(parsed, s);
        }

        #[test]
        fn never_panics(input in ".{0,40}") {
            let _ = input.parse::<FieldSelector>();
        }
    }
}
