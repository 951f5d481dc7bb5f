//! The error types of `kinformer-core`: [`Error`] for parsing and decoding, [`StoreError`] for
//! what a store, a queue or a cache answers at a seam.

/// What can go wrong parsing or decoding in `kinformer-core`. Each variant says what a caller can
/// do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A string is not an object key of the form `name` or `namespace/name`. Not retryable: the key
    /// came from somewhere that does not make keys the way the cache does.
    #[error("invalid object key {key:?}: {reason}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A label or field selector does not parse. Not retryable: fix the selector.
    #[error("invalid selector {input:?} at byte {position}: {message}")]
    InvalidSelector {
        /// The selector as given.
        input: String,
        /// The byte offset in `input` where the problem was found.
        position: usize,
        /// What was expected or what is wrong.
        message: String,
    },

    /// A selector cannot be expressed in the requested form (for example a `>` requirement as a
    /// `metav1.LabelSelector`). Not retryable.
    #[error("selector cannot be converted: {0}")]
    UnsupportedSelector(String),

    /// JSON from the server does not decode into the expected shape. Not retryable for this
    /// payload: the server sent something that is not a Kubernetes object of the expected type.
    #[error("cannot decode {what}: {source}")]
    Decode {
        /// What was being decoded (a watch event, a list, an object).
        what: &'static str,
        /// The underlying JSON error, with line and column.
        #[source]
        source: serde_json::Error,
    },

    /// A watch event has a `type` this crate does not know. Not retryable for this event.
    #[error("unknown watch event type {0:?}")]
    UnknownEventType(String),
}

/// What a store, a queue or a cache answers at a seam ([`ReflectorStore`](crate::ReflectorStore),
/// [`CacheWrite`](crate::CacheWrite), [`IndexRead`](crate::IndexRead)). Each implementation
/// returns only the variants that can happen to it, and keeps nothing of its own behind them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store or queue has been closed: its consumer is gone and the writer should stop. Not
    /// retryable.
    #[error("the store is closed")]
    Closed,

    /// An index function failed for an object, so the object was not stored. The writer may log
    /// this and go on, or stop. Not retryable for this object: fix the function or the object.
    #[error("index function {index:?} failed for {key}: {message}")]
    IndexFunc {
        /// The name of the index.
        index: String,
        /// The key of the object being indexed.
        key: String,
        /// What the index function said.
        message: String,
    },

    /// No index has this name. Not retryable: add the index or fix the name.
    #[error("no index named {name:?}")]
    UnknownIndex {
        /// The name asked for.
        name: String,
    },
}
