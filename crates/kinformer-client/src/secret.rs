//! A string that never shows itself in `Debug` or `Display`.

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

#[cfg(test)]
mod tests {
    use super::*;

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
