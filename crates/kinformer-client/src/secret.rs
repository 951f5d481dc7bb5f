//! Keeping credentials out of output: a string that never shows itself in `Debug` or
//! `Display`, and URLs shown without the credentials they may carry.

use std::fmt;

use serde::{Deserialize, Deserializer, de};

/// A credential (token, password, private key data) that prints as `<redacted>`.
///
/// ```
/// use kinformer_client::SecretString;
///
/// let token = SecretString::from("s3cr3t");
/// assert_eq!(format!("{token:?}"), "<redacted>");
/// assert_eq!(token.expose(), "s3cr3t");
/// ```
#[derive(Clone, PartialEq, Eq, Default)]
pub struct SecretString(String);

impl SecretString {
    /// The secret itself. Call it only where the value is used, never to log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for SecretString {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl From<&str> for SecretString {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Reads a string; a value of another type is refused without echoing it into the error message.
struct SecretVisitor;

impl de::Visitor<'_> for SecretVisitor {
    type Value = SecretString;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<SecretString, E> {
        Ok(SecretString(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<SecretString, E> {
        Ok(SecretString(v))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<SecretString, E> {
        Err(E::custom(
            "expected a string, found a boolean (value hidden)",
        ))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<SecretString, E> {
        Err(E::custom(
            "expected a string, found a number (value hidden)",
        ))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<SecretString, E> {
        Err(E::custom(
            "expected a string, found a number (value hidden)",
        ))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<SecretString, E> {
        Err(E::custom(
            "expected a string, found a number (value hidden)",
        ))
    }
}

impl<'de> Deserialize<'de> for SecretString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SecretVisitor)
    }
}

/// A URL as messages and `Debug` show it: a user name and password in it (a proxy's, typically)
/// are replaced by `redacted`, and text that does not parse but has an `@` (where credentials
/// would be) is not shown at all.
pub(crate) fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            // Both calls fail only for URLs that cannot have credentials, which this one has.
            let _ = u.set_username("redacted");
            let _ = u.set_password(None);
            u.into()
        }
        Err(_) if url.contains('@') => {
            format!("<a URL of {} characters, not shown>", url.chars().count())
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_credentials_are_redacted() {
        assert_eq!(
            redact_url("http://ann:pw-9f2c@proxy:3128"),
            "http://redacted@proxy:3128/"
        );
        assert_eq!(
            redact_url("https://tok-9f2c@host/x"),
            "https://redacted@host/x"
        );
        assert_eq!(redact_url("https://host:6443"), "https://host:6443");
        assert!(!redact_url("http://ann:pw-9f2c@[bad").contains("pw-9f2c"));
    }

    #[test]
    fn wrong_types_do_not_echo_the_value() {
        let err = serde_json::from_str::<SecretString>("123456789").unwrap_err();
        assert!(!err.to_string().contains("123456789"), "{err}");
        assert_eq!(
            serde_json::from_str::<SecretString>("\"t\"")
                .unwrap()
                .expose(),
            "t"
        );
    }
}
