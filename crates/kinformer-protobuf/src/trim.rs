//! An object's message without its managed fields, for callers that drop them anyway.
//!
//! `metadata.managedFields` is most of a dense object's message, and decoding it is most of the
//! work: every entry's `fieldsV1` is JSON that becomes a tree of `serde_json` maps. An informer
//! that strips managed fields (client-go's `TransformStripManagedFields`) builds that tree only
//! to free it. [`without_managed_fields`] cuts the entries out of the bytes first, which costs a
//! walk over the fields of the object and of its metadata and one copy of what is kept.

use std::borrow::Cow;
use std::ops::Range;

use kinformer_core::trim::ManagedFieldsDecode;

/// The bytes of an object's message to decode under `decode`: `message` as it is, or without
/// its managed fields ([`without_managed_fields`]).
///
/// ```
/// use std::borrow::Cow;
/// use kinformer_core::trim::ManagedFieldsDecode;
/// use kinformer_protobuf::trim::message;
///
/// // Field 1 (metadata) holding field 17 (one managed-fields entry, empty).
/// let pod = [0x0a, 0x03, 0x8a, 0x01, 0x00];
/// assert!(matches!(message(ManagedFieldsDecode::Keep, &pod), Cow::Borrowed(_)));
/// assert_eq!(&*message(ManagedFieldsDecode::Skip, &pod), &[0x0a, 0x00]);
/// ```
pub fn message(decode: ManagedFieldsDecode, message: &[u8]) -> Cow<'_, [u8]> {
    match decode {
        ManagedFieldsDecode::Keep => Cow::Borrowed(message),
        ManagedFieldsDecode::Skip => without_managed_fields(message),
    }
}

/// Every Kubernetes kind's `metadata` (`ObjectMeta`) is its field 1.
const METADATA: u64 = 1;
/// `ObjectMeta.managedFields`.
const MANAGED_FIELDS: u64 = 17;

/// `message`, an object's protobuf message (an envelope's `raw`, not the whole envelope), with
/// every `managedFields` entry of its `metadata` left out: borrowed as it is when there is none,
/// or when the bytes do not parse, so that the decoder that follows reports them as it would
/// have.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
/// use kinformer_protobuf::convert::Protobuf as _;
/// use kinformer_protobuf::trim::without_managed_fields;
///
/// let pod = Pod {
///     metadata: ObjectMeta {
///         name: Some("web".into()),
///         managed_fields: Some(vec![ManagedFieldsEntry {
///             manager: Some("kubectl".into()),
///             ..ManagedFieldsEntry::default()
///         }]),
///         ..ObjectMeta::default()
///     },
///     ..Pod::default()
/// };
/// let mut message = Vec::new();
/// pod.encode(&mut message);
/// let trimmed = without_managed_fields(&message);
/// assert!(trimmed.len() < message.len());
/// let decoded = Pod::decode(&trimmed)?;
/// assert_eq!(decoded.metadata.name.as_deref(), Some("web"));
/// assert_eq!(decoded.metadata.managed_fields, None);
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
pub fn without_managed_fields(message: &[u8]) -> Cow<'_, [u8]> {
    match cuts(message) {
        Some(cuts) if !cuts.metadata.is_empty() => Cow::Owned(splice(message, &cuts)),
        _ => Cow::Borrowed(message),
    }
}

/// Where the metadata fields lie and which of their bytes go.
struct Cuts {
    /// Each metadata field that loses entries.
    metadata: Vec<Trimmed>,
}

/// A metadata field that loses entries, as offsets into the message.
struct Trimmed {
    /// The whole field, key to end.
    whole: Range<usize>,
    /// Its payload: the `ObjectMeta` message.
    payload: Range<usize>,
    /// The payload's `managedFields` entries, whole.
    gone: Vec<Range<usize>>,
}

/// One field of a message, as offsets into the bytes.
struct Field {
    number: u64,
    /// Key to end.
    whole: Range<usize>,
    /// A length-delimited field's payload; empty for the other wire types.
    payload: Range<usize>,
}

/// A varint at `*at`, moving past it; `None` past the end or over ten bytes.
fn varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..10 {
        let byte = *buf.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// The fields of `buf[range]`. `None` if a field does not parse or is a group.
fn fields(buf: &[u8], range: Range<usize>) -> Option<Vec<Field>> {
    let mut out = Vec::new();
    let mut at = range.start;
    while at < range.end {
        let start = at;
        let key = varint(buf, &mut at)?;
        let payload = match key & 7 {
            0 => {
                varint(buf, &mut at)?;
                at..at
            }
            1 => {
                at += 8;
                at..at
            }
            2 => {
                let len = usize::try_from(varint(buf, &mut at)?).ok()?;
                let begin = at;
                at = at.checked_add(len)?;
                begin..at
            }
            5 => {
                at += 4;
                at..at
            }
            _ => return None,
        };
        if at > range.end {
            return None;
        }
        out.push(Field {
            number: key >> 3,
            whole: start..at,
            payload,
        });
    }
    Some(out)
}

fn cuts(message: &[u8]) -> Option<Cuts> {
    let mut metadata = Vec::new();
    for Field {
        number,
        whole,
        payload,
    } in fields(message, 0..message.len())?
    {
        if number != METADATA {
            continue;
        }
        // Field 1 of a kind is its metadata, length-delimited: anything else is left to the
        // decoder to refuse.
        if message[whole.start] & 7 != 2 {
            return None;
        }
        let gone: Vec<Range<usize>> = fields(message, payload.clone())?
            .into_iter()
            .filter(|f| f.number == MANAGED_FIELDS)
            .map(|f| f.whole)
            .collect();
        if !gone.is_empty() {
            metadata.push(Trimmed {
                whole,
                payload,
                gone,
            });
        }
    }
    Some(Cuts { metadata })
}

/// Appends `value` as a varint.
fn put_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn splice(message: &[u8], cuts: &Cuts) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len());
    let mut copied = 0;
    for Trimmed {
        whole,
        payload,
        gone,
    } in &cuts.metadata
    {
        out.extend_from_slice(&message[copied..whole.start]);
        let kept = payload.len() - gone.iter().map(Range::len).sum::<usize>();
        put_varint((METADATA << 3) | 2, &mut out);
        put_varint(kept as u64, &mut out);
        let mut from = payload.start;
        for cut in gone {
            out.extend_from_slice(&message[from..cut.start]);
            from = cut.end;
        }
        out.extend_from_slice(&message[from..payload.end]);
        copied = whole.end;
    }
    out.extend_from_slice(&message[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A length-delimited field.
    fn len_field(tag: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint((tag << 3) | 2, &mut out);
        put_varint(payload.len() as u64, &mut out);
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn entries_are_cut_from_every_metadata_field_and_the_rest_kept_in_order() {
        let entry = len_field(MANAGED_FIELDS, &[0x0a, 0x01, b'm']);
        let name = len_field(1, b"web");
        let labels = len_field(11, &[0x0a, 0x01, b'k', 0x12, 0x01, b'v']);
        // A metadata field long enough that its length takes two bytes, before the cut.
        let mut meta = name.clone();
        for _ in 0..40 {
            meta.extend_from_slice(&entry);
        }
        meta.extend_from_slice(&labels);
        let spec = len_field(2, b"spec bytes");
        let mut message = len_field(METADATA, &meta);
        message.extend_from_slice(&spec);
        // A second metadata field merges into the first on decode: it loses its entries too.
        let mut second = entry.clone();
        second.extend_from_slice(&name);
        message.extend_from_slice(&len_field(METADATA, &second));
        // A varint field stays as it is.
        message.extend_from_slice(&[0x18, 0x96, 0x01]);

        let mut kept_meta = name.clone();
        kept_meta.extend_from_slice(&labels);
        let mut want = len_field(METADATA, &kept_meta);
        want.extend_from_slice(&spec);
        want.extend_from_slice(&len_field(METADATA, &name));
        want.extend_from_slice(&[0x18, 0x96, 0x01]);
        assert_eq!(&*without_managed_fields(&message), &want[..]);
    }

    #[test]
    fn bytes_without_entries_or_that_do_not_parse_are_lent_as_they_are() {
        let plain = len_field(METADATA, &len_field(1, b"web"));
        assert!(matches!(without_managed_fields(&plain), Cow::Borrowed(_)));
        let entry = len_field(MANAGED_FIELDS, b"x");
        let good = len_field(METADATA, &entry);
        for bad in [
            // Cut inside the metadata.
            &good[..good.len() - 1],
            // A length past the end.
            &[0x0a, 0x7f, 0x8a, 0x01][..],
            // A group.
            &[0x0b, 0x0c][..],
            // A varint over ten bytes.
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ][..],
            // Metadata that is not length-delimited.
            &[0x08, 0x01][..],
        ] {
            assert!(
                matches!(without_managed_fields(bad), Cow::Borrowed(b) if b == bad),
                "{bad:?}"
            );
        }
    }
}
