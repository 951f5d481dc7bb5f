//! The protobuf framing: envelope, watch frames, lists and status.
