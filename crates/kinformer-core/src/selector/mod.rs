//! Kubernetes label and field selectors: parse the string grammar, match objects, render back.
//!
//! ```
//! use kinformer_core::selector::{FieldSelector, LabelSelector};
//! use std::collections::BTreeMap;
//!
//! let s: LabelSelector = "tier notin (db), app in (web,api), !canary".parse().unwrap();
//! // Rendering is canonical: requirements sorted by key, values sorted.
//! assert_eq!(s.to_string(), "app in (api,web),!canary,tier notin (db)");
//!
//! let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
//! assert!(s.matches(&labels));
//!
//! let err = "app in (web".parse::<LabelSelector>().unwrap_err();
//! assert!(err.to_string().contains("at byte 11"), "{err}");
//!
//! let f: FieldSelector = "spec.nodeName=node-1,status.phase!=Failed".parse().unwrap();
//! assert!(f.matches(|field| match field {
//!     "spec.nodeName" => Some("node-1".into()),
//!     _ => None,
//! }));
//! ```

mod field;
mod label;

pub use field::{FieldOperator, FieldRequirement, FieldSelector};
pub use label::{LabelSelector, Operator, Requirement};

use crate::Error;

fn invalid(input: &str, position: usize, message: impl Into<String>) -> Error {
    Error::InvalidSelector {
        input: input.to_owned(),
        position,
        message: message.into(),
    }
}
