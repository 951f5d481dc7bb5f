//! Names checked the way the API server checks them, before they go into a URL path.
//!
//! Each function returns the list of problems, empty when the value is valid, as apimachinery's
//! `validation` package does, so that a caller can report all of them at once.
//!
//! ```
//! use kinformer_core::validation;
//!
//! assert!(validation::is_dns1123_label("shop").is_empty());
//! assert!(!validation::is_dns1123_label("shop?limit=1").is_empty());
//! assert!(!validation::is_valid_path_segment_name("..").is_empty());
//! ```

/// The longest DNS-1123 label (a namespace name): 63 characters.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;

/// The longest DNS-1123 subdomain (most object names, an API group): 253 characters.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// Problems with `value` as a DNS-1123 label (RFC 1123): at most 63 lowercase alphanumeric
/// characters or `-`, starting and ending with an alphanumeric character. Namespace names are
/// labels.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        problems.push(format!(
            "must be no more than {DNS1123_LABEL_MAX_LENGTH} characters"
        ));
    }
    if !is_label(value) {
        problems.push(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
             '-', and must start and end with an alphanumeric character"
                .to_owned(),
        );
    }
    problems
}

/// Problems with `value` as a DNS-1123 subdomain: at most 253 characters, dot-separated DNS-1123
/// labels. Most object names and every API group are subdomains.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        problems.push(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters"
        ));
    }
    if !value.split('.').all(is_label) {
        problems.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character"
                .to_owned(),
        );
    }
    problems
}

/// Problems with `name` as one segment of a URL path (apimachinery's
/// `IsValidPathSegmentName`): it may not be empty, `.` or `..`, and may not contain `/` or `%`.
/// Every object name must pass this, whatever its resource's own rule.
pub fn is_valid_path_segment_name(name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    match name {
        "" => problems.push("may not be empty".to_owned()),
        "." | ".." => problems.push(format!("may not be '{name}'")),
        _ => {}
    }
    for c in ['/', '%'] {
        if name.contains(c) {
            problems.push(format!("may not contain '{c}'"));
        }
    }
    problems
}

/// Problems with `name` as a namespace name: a DNS-1123 label.
pub fn validate_namespace_name(name: &str) -> Vec<String> {
    is_dns1123_label(name)
}

/// Problems with `name` as the name of an object in a URL path: the path-segment rules, and at
/// most 253 characters (the longest name any built-in resource allows). Resources differ in
/// what else they require (most want a DNS-1123 subdomain, some a label, RBAC objects allow
/// almost anything); the API server checks that on write.
pub fn validate_object_name(name: &str) -> Vec<String> {
    let mut problems = is_valid_path_segment_name(name);
    if name.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        problems.push(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters"
        ));
    }
    problems
}

/// One DNS-1123 label, length aside: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_dns1123_labels() {
        for ok in ["default", "kube-system", "a", "0", "a-b-1", &"x".repeat(63)] {
            assert_eq!(validate_namespace_name(ok), Vec::<String>::new(), "{ok}");
        }
        for bad in [
            "",
            "Shop",
            "-a",
            "a-",
            "a.b",
            "a_b",
            "shop?limit=1",
            "../../../api/v1/namespaces?x=",
            "a/b",
            "a%2Fb",
            "ä",
            " a",
            &"x".repeat(64),
        ] {
            assert!(!validate_namespace_name(bad).is_empty(), "{bad:?}");
        }
        assert_eq!(validate_namespace_name(&"x".repeat(64)).len(), 1);
        assert_eq!(validate_namespace_name(&"X".repeat(64)).len(), 2);
    }

    #[test]
    fn subdomains_are_dotted_labels() {
        for ok in [
            "example.com",
            "apps",
            "a.b-c.d0",
            &format!("{}z", "a.".repeat(126)),
        ] {
            assert!(is_dns1123_subdomain(ok).is_empty(), "{ok}");
        }
        for bad in ["", ".a", "a.", "a..b", "A.b", "a/b", &"a".repeat(254)] {
            assert!(!is_dns1123_subdomain(bad).is_empty(), "{bad:?}");
        }
    }

    #[test]
    fn object_names_follow_the_path_segment_rules() {
        for ok in ["web-0", "system:controller:x", "a.b", "...", "a b", "ünï"] {
            assert!(validate_object_name(ok).is_empty(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a%2e", "/", &"x".repeat(254)] {
            assert!(!validate_object_name(bad).is_empty(), "{bad:?}");
        }
        assert_eq!(
            is_valid_path_segment_name("%/"),
            ["may not contain '/'", "may not contain '%'"]
        );
    }
}
