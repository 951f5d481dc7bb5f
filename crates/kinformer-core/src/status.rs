//! `metav1.Status`: how the API server reports a failure.

use serde::{Deserialize, Serialize};

/// A `metav1.Status` object, as carried by error responses and by watch `ERROR` events.
///
/// ```
/// use kinformer_core::Status;
///
/// let status: Status = serde_json::from_str(r#"{
///     "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
///     "message": "too old resource version: 1 (5)", "reason": "Expired", "code": 410
/// }"#).unwrap();
/// assert!(status.is_gone());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// `Success` or `Failure`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// A human-readable description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// A machine-readable reason, such as `Expired`, `Gone`, `NotFound`, `TooManyRequests`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The HTTP status code this status stands for (0 when not set).
    #[serde(default)]
    pub code: u16,
    /// Extra detail, including the causes of the failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
}

/// `metav1.StatusDetails`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// The name of the object the status is about.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Its kind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Its uid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The individual causes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds the client should wait before retrying (0 when not set).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry_after_seconds: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `metav1.StatusCause`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// A machine-readable cause, such as `ResourceVersionTooLarge`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// A human-readable description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The field the cause is about.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl Status {
    /// A `Failure` status with this code, reason and message.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            status: "Failure".to_owned(),
            message: message.into(),
            reason: reason.to_owned(),
            code,
            details: None,
        }
    }

    /// `true` for 410 (reasons `Expired` or `Gone`): the requested resource version is no longer
    /// available and the client must relist.
    pub fn is_gone(&self) -> bool {
        self.code == 410 || self.reason == "Expired" || self.reason == "Gone"
    }

    /// `true` when a cause says the requested resource version is newer than the server has
    /// (a 504 with cause `ResourceVersionTooLarge`).
    pub fn is_too_large_resource_version(&self) -> bool {
        self.details
            .iter()
            .flat_map(|d| &d.causes)
            .any(|c| c.reason == "ResourceVersionTooLarge")
    }
}
