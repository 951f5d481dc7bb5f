//! k8s-openapi types to and from k8s-pb messages.
