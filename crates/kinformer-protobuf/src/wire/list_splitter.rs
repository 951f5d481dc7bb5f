//! Splitting a protobuf list body into its items as the body arrives.

use bytes::Bytes;

use super::{Chunks, Fields, ListMeta, MAGIC};
use crate::Error;

/// What the splitter says of a body it finds malformed after the fact.
const SPENT: &str = "a list body read on after it was found malformed";

/// The longest a field's key and length can be: two varints, of up to 5 and 10 bytes.
const MAX_HEADER: usize = 15;

/// Splits a protobuf list body (the magic bytes, then a `runtime.Unknown` whose `raw` is a
/// `PodList`, ...) into its items while it arrives: push the body's chunks as they come, take
/// each item's message as soon as its last byte is in.
///
/// It reads what [`decode_envelope`](super::decode_envelope) and [`decode_list`](super::decode_list)
/// read together, and hands out the same items: slices of the pushed chunks when an item lies
/// within one (zero-copy), gathered into one buffer when it straddles chunks. Bytes are dropped
/// as soon as they are handed out or skipped, so a caller that decodes each item and drops its
/// bytes holds only the items in flight, never the whole body.
///
/// Two things a whole body may hold and a body read in one pass cannot are refused:
/// a second `raw` field (protobuf would keep the last, after the first one's items were handed
/// out) and group fields (a wire type Kubernetes never writes). After an error, the splitter is
/// spent: every call returns an error.
///
/// ```
/// use bytes::Bytes;
/// use kinformer_protobuf::wire::{self, ListMeta, ListSplitter};
///
/// let meta = ListMeta { resource_version: Some("42".into()), ..ListMeta::default() };
/// let mut list = Vec::new();
/// wire::encode_list(&meta, &[b"\x0a\x03one", b"\x0a\x03two"], &mut list);
/// let mut body = Vec::new();
/// wire::encode_envelope("v1", "PodList", &list, &mut body);
/// let body = Bytes::from(body);
///
/// let mut splitter = ListSplitter::new();
/// let mut items = Vec::new();
/// for chunk in body.chunks(7) {
///     splitter.push(Bytes::copy_from_slice(chunk));
///     while let Some(item) = splitter.next_item()? {
///         items.push(item);
///     }
/// }
/// let list = splitter.finish()?;
/// assert_eq!(items, [&b"\x0a\x03one"[..], &b"\x0a\x03two"[..]]);
/// assert_eq!((list.kind.as_str(), list.meta, list.items), ("PodList", meta, 2));
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct ListSplitter {
    chunks: Chunks,
    /// The magic bytes were read.
    magic: bool,
    /// Where the next field is read: in the envelope, or in its `raw` list with this many bytes
    /// of it left.
    in_list: Option<u64>,
    /// The envelope's `raw` was seen.
    raw_seen: bool,
    /// Bytes of a skipped field still to drop.
    skip: u64,
    /// The envelope's `typeMeta` was read.
    type_meta_seen: bool,
    api_version: String,
    kind: String,
    content_encoding: String,
    meta: ListMeta,
    items: usize,
    failed: bool,
}

/// A list body split whole: what it said beside its items.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitList {
    /// The envelope's `typeMeta.apiVersion` (`v1`, `apps/v1`, ...; empty if it had none).
    pub api_version: String,
    /// The envelope's `typeMeta.kind` (`PodList`, ...; empty if it had none).
    pub kind: String,
    /// The list's metadata.
    pub meta: ListMeta,
    /// How many items were handed out.
    pub items: usize,
}

/// Reads a varint from the start of `head`: its value and length, `None` if `head` ends first.
fn varint(head: &[u8]) -> Result<Option<(u64, usize)>, Error> {
    let mut value = 0u64;
    for (i, &byte) in head.iter().enumerate().take(10) {
        if i == 9 && byte > 1 {
            return Err(Error::Malformed("a varint over ten bytes"));
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Ok(Some((value, i + 1)));
        }
    }
    if head.len() >= 10 {
        return Err(Error::Malformed("a varint over ten bytes"));
    }
    Ok(None)
}

impl ListSplitter {
    /// A splitter that has been pushed nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next chunk of the body. Empty chunks are ignored, and so is everything once
    /// the splitter has failed.
    pub fn push(&mut self, chunk: Bytes) {
        if !self.failed {
            self.chunks.push(chunk);
        }
    }

    /// The envelope's `apiVersion` and `kind`, once its `typeMeta` has been read (a real
    /// server writes it before the list), so that a caller can refuse a list of the wrong kind
    /// before decoding its items.
    pub fn type_meta(&self) -> Option<(&str, &str)> {
        self.type_meta_seen
            .then_some((self.api_version.as_str(), self.kind.as_str()))
    }

    /// The next item's message, or `None` if the bytes pushed so far end before one is whole.
    ///
    /// # Errors
    ///
    /// [`Error::NotProtobuf`] if the body does not begin with the magic bytes; [`Error::Decode`]
    /// or [`Error::Malformed`] if the envelope or the list is malformed.
    pub fn next_item(&mut self) -> Result<Option<Bytes>, Error> {
        if self.failed {
            return Err(Error::Malformed(SPENT));
        }
        let next = self.read();
        self.failed = next.is_err();
        if self.failed {
            self.chunks.clear();
        }
        next
    }

    /// Says whether the body ended where it should, and what it said beside its items.
    ///
    /// # Errors
    ///
    /// [`Error::NotProtobuf`] if fewer than the magic bytes came; [`Error::Truncated`] if the
    /// body ended inside a field, or inside its list; [`Error::ContentEncoding`] if the envelope
    /// says its bytes are encoded; any error [`next_item`](Self::next_item) returned before.
    pub fn finish(mut self) -> Result<SplitList, Error> {
        // Anything a caller left unread is read first: an item left is a truncation.
        let leftover = match self.next_item() {
            Ok(None) => false,
            Ok(Some(_)) => true,
            Err(e) => return Err(e),
        };
        if !self.magic {
            return Err(Error::NotProtobuf);
        }
        if leftover || self.skip > 0 || self.chunks.len() > 0 || self.in_list.is_some_and(|l| l > 0)
        {
            return Err(Error::Truncated {
                what: "a list body",
            });
        }
        if !self.content_encoding.is_empty() {
            return Err(Error::ContentEncoding(self.content_encoding));
        }
        Ok(SplitList {
            api_version: self.api_version,
            kind: self.kind,
            meta: self.meta,
            items: self.items,
        })
    }

    /// Drops `n` buffered bytes (`n <= chunks.len()`), counting them against the list's.
    fn consume(&mut self, n: usize) {
        self.chunks.consume(n);
        if let Some(left) = &mut self.in_list {
            *left -= n as u64;
        }
    }

    /// Takes `n` buffered bytes (`n <= chunks.len()`), counting them against the list's.
    fn take(&mut self, n: usize) -> Bytes {
        if let Some(left) = &mut self.in_list {
            *left -= n as u64;
        }
        self.chunks.take(n)
    }

    fn read(&mut self) -> Result<Option<Bytes>, Error> {
        loop {
            if self.skip > 0 {
                let n = usize::try_from(self.skip)
                    .unwrap_or(usize::MAX)
                    .min(self.chunks.len());
                self.consume(n);
                self.skip -= n as u64;
                if self.skip > 0 {
                    return Ok(None);
                }
            }
            if !self.magic {
                let mut magic = [0u8; MAGIC.len()];
                let n = self.chunks.peek(&mut magic);
                if magic[..n] != MAGIC[..n] {
                    return Err(Error::NotProtobuf);
                }
                if n < MAGIC.len() {
                    return Ok(None);
                }
                self.chunks.consume(n);
                self.magic = true;
            }
            if self.in_list == Some(0) {
                self.in_list = None;
            }
            let mut head = [0u8; MAX_HEADER];
            let n = self.chunks.peek(&mut head);
            let Some((key, key_len)) = varint(&head[..n])? else {
                return Ok(None);
            };
            if key > u64::from(u32::MAX) || key >> 3 == 0 {
                return Err(Error::Malformed("a field number out of range"));
            }
            let (tag, wire_type) = (key >> 3, key & 7);
            let (header, body) = match wire_type {
                0 => match varint(&head[key_len..n])? {
                    Some((_, len)) => (key_len + len, 0),
                    None => return Ok(None),
                },
                1 => (key_len, 8),
                2 => match varint(&head[key_len..n])? {
                    Some((len, len_len)) => (key_len + len_len, len),
                    None => return Ok(None),
                },
                5 => (key_len, 4),
                3 | 4 => {
                    return Err(Error::Malformed(
                        "a group field in a list body (Kubernetes never writes one)",
                    ));
                }
                _ => return Err(Error::Malformed("a field with an invalid wire type")),
            };
            let whole = header as u64 + body;
            if self.in_list.is_some_and(|left| whole > left) {
                return Err(Error::Malformed("a field runs past the end of its list"));
            }
            let in_list = self.in_list.is_some();
            let known = if in_list {
                matches!(tag, 1 | 2)
            } else {
                matches!(tag, 1..=4)
            };
            if !known {
                self.consume(header);
                self.skip = body;
                continue;
            }
            if wire_type == 2 && !in_list && tag == 2 {
                if self.raw_seen {
                    return Err(Error::Malformed(
                        "a list body with two raw fields (a real server writes one)",
                    ));
                }
                self.raw_seen = true;
                self.consume(header);
                self.in_list = Some(body);
                continue;
            }
            let Ok(whole) = usize::try_from(whole) else {
                return Err(Error::Malformed("a field longer than memory can hold"));
            };
            if self.chunks.len() < whole {
                return Ok(None);
            }
            if wire_type == 2 && in_list && tag == 2 {
                self.consume(header);
                self.items += 1;
                return Ok(Some(self.take(whole - header)));
            }
            // The metadata, the type or the encoding: read whole as the whole-body decoder
            // reads them, wrong wire types and all.
            let field = self.take(whole);
            self.read_small_field(field, in_list)?;
        }
    }

    /// Reads one whole field of the envelope (`typeMeta`, `raw` of the wrong wire type,
    /// `contentEncoding`, `contentType`) or of the list (`metadata`, `items` of the wrong wire
    /// type), key included.
    fn read_small_field(&mut self, field: Bytes, in_list: bool) -> Result<(), Error> {
        let mut fields = Fields::new(&field, if in_list { "list" } else { "Unknown" });
        let Some((tag, wire_type)) = fields.next()? else {
            return Ok(());
        };
        match (in_list, tag) {
            (true, 1) => self
                .meta
                .merge_from(fields.message(wire_type, "ListMeta")?)?,
            (true, _) | (false, 2) => {
                fields.bytes(wire_type)?;
            }
            (false, 1) => {
                let mut type_meta = fields.message(wire_type, "TypeMeta")?;
                while let Some((tag, wire_type)) = type_meta.next()? {
                    match tag {
                        1 => type_meta
                            .string(wire_type)?
                            .clone_into(&mut self.api_version),
                        2 => type_meta.string(wire_type)?.clone_into(&mut self.kind),
                        _ => type_meta.skip(tag, wire_type)?,
                    }
                }
                self.type_meta_seen = true;
            }
            (false, 3) => fields
                .string(wire_type)?
                .clone_into(&mut self.content_encoding),
            (false, _) => {
                fields.string(wire_type)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{encode_envelope, encode_list};

    /// A `PodList` body of `items`, its list preceded by `before` inside `raw` and followed by
    /// `after` in the envelope.
    fn body(items: &[&[u8]], before: &[u8], after: &[u8]) -> Bytes {
        let mut list = before.to_vec();
        encode_list(&ListMeta::default(), items, &mut list);
        let mut body = Vec::new();
        encode_envelope("v1", "PodList", &list, &mut body);
        body.extend_from_slice(after);
        Bytes::from(body)
    }

    fn split(body: &Bytes, chunk: usize) -> Result<(Vec<Bytes>, SplitList), Error> {
        let mut splitter = ListSplitter::new();
        let mut items = Vec::new();
        for piece in body.chunks(chunk) {
            splitter.push(body.slice_ref(piece));
            while let Some(item) = splitter.next_item()? {
                items.push(item);
            }
        }
        Ok((items, splitter.finish()?))
    }

    #[test]
    fn unknown_fields_are_skipped_across_chunks() {
        // Field 9 (a long string) and field 10 (a varint) in the list, field 7 (fixed32) and
        // field 6 (fixed64) in the envelope after it.
        let mut before = vec![0x4a, 0x80, 0x02];
        before.extend_from_slice(&[b'x'; 256]);
        before.extend_from_slice(&[0x50, 0xff, 0xff, 0x03]);
        let after = [&[0x3d, 1, 2, 3, 4][..], &[0x31, 1, 2, 3, 4, 5, 6, 7, 8]].concat();
        let body = body(&[b"\x0a\x01a", b"\x0a\x01b"], &before, &after);
        for chunk in [1, 2, 3, 7, 100, body.len()] {
            let (items, list) = split(&body, chunk).unwrap();
            assert_eq!(
                items,
                [&b"\x0a\x01a"[..], b"\x0a\x01b"],
                "chunks of {chunk}"
            );
            assert_eq!(list.kind, "PodList");
        }
    }

    #[test]
    fn an_item_within_a_chunk_is_a_slice_of_it() {
        let body = body(&[b"\x0a\x03one"], b"", b"");
        let mut splitter = ListSplitter::new();
        splitter.push(body.clone());
        let item = splitter.next_item().unwrap().unwrap();
        assert!(body.as_ptr_range().contains(&item.as_ptr()));
    }

    #[test]
    fn what_one_pass_cannot_read_is_refused_by_name() {
        // A group field in the list.
        let grouped = body(&[b"\x0a\x01a"], &[0x4b, 0x4c], b"");
        let e = split(&grouped, 3).unwrap_err();
        assert!(e.to_string().contains("group"), "{e}");
        // A second raw after the first one's items.
        let mut twice = body(&[b"\x0a\x01a"], b"", b"").to_vec();
        twice.extend_from_slice(&[0x12, 0x00]);
        let e = split(&Bytes::from(twice), 5).unwrap_err();
        assert!(e.to_string().contains("two raw"), "{e}");
        // A list field that claims more than the list holds.
        let past = body(&[], &[0x12, 0x7f], b"");
        let e = split(&past, 4).unwrap_err();
        assert!(e.to_string().contains("past the end"), "{e}");
    }

    #[test]
    fn a_refusal_stays() {
        let mut splitter = ListSplitter::new();
        splitter.push(Bytes::from_static(b"{\"kind\":\"PodList\"}"));
        assert!(matches!(splitter.next_item(), Err(Error::NotProtobuf)));
        splitter.push(body(&[b"\x0a\x01a"], b"", b""));
        assert!(splitter.next_item().is_err());
        assert!(splitter.finish().is_err());
    }

    #[test]
    fn an_encoded_body_is_refused_at_its_end() {
        // contentEncoding (3) set, after the list as Go writes it.
        let encoded = body(&[b"\x0a\x01a"], b"", b"\x1a\x04gzip");
        assert!(matches!(
            split(&encoded, 2),
            Err(Error::ContentEncoding(e)) if e == "gzip"
        ));
    }
}
