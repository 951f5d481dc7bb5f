//! Splitting a JSON list body into runs of items as it arrives.

use std::ops::Range;
use std::sync::Arc;

use serde::de::{DeserializeOwned, Error as _, IgnoredAny};

use super::{ObjectList, RawListMeta, decode_ranges};
use crate::trim::ManagedFieldsDecode;
use crate::{Error, Object, Scope};

/// Splits a JSON list body (`{"kind":"PodList","metadata":{...},"items":[...]}`) into runs of
/// items while it arrives: push the body's bytes as they come, take the items whose last byte
/// is in, decode them wherever you like, and drop their bytes.
///
/// It reads what [`ListPage::locate`](super::ListPage::locate) reads, and the items it hands
/// out are the ones `locate` finds: the list's metadata and its other fields are checked as
/// `locate` checks them (a `metadata` that is not a list's metadata, a repeated `items` or
/// `metadata`, bytes after the list are errors); each item is cut at its end by its brackets
/// and strings, and checked when it is decoded ([`ItemRun::decode`]), where an item that is
/// not valid JSON is an error naming it. The body is held only until its items are taken.
///
/// ```
/// use kinformer_core::{DynamicObject, JsonListSplitter, Scope};
///
/// let body = br#"{"kind":"PodList","metadata":{"resourceVersion":"9"},"items":[
///     {"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#;
/// let mut splitter = JsonListSplitter::new();
/// let mut items = Vec::new();
/// for chunk in body.chunks(10) {
///     splitter.push(chunk)?;
///     if let Some(run) = splitter.take_items() {
///         items.extend(run.decode::<DynamicObject>(Some(Scope::Cluster))?);
///     }
/// }
/// let list = splitter.finish(items)?;
/// assert_eq!(list.items.len(), 2);
/// assert_eq!(list.items[1].metadata.name.as_deref(), Some("b"));
/// assert_eq!(list.resource_version.as_str(), "9");
/// # Ok::<(), kinformer_core::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct JsonListSplitter {
    /// Bytes pushed and not yet handed out.
    buf: Vec<u8>,
    /// How far `buf` has been read.
    at: usize,
    state: State,
    /// The value being read, and where in `buf` it began.
    value: Value,
    value_start: usize,
    /// The top-level key whose value is being read.
    key: Key,
    /// The items complete in `buf`, not yet handed out.
    items: Vec<Range<usize>>,
    /// Items handed out before those.
    handed_out: usize,
    seen_items: bool,
    seen_metadata: bool,
    meta: RawListMeta,
    failed: bool,
}

/// Where the reader is in the list object.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the list's `{`.
    #[default]
    Start,
    /// After `{` or a `,`: a key, or (after `{` only) the end.
    Key { first: bool },
    /// In a key's string.
    KeyString,
    /// After a key: its `:`.
    Colon,
    /// After `:`: `items`' array, or any other value.
    ItemsOrValue,
    /// In a field's value, but `items`' array.
    FieldValue,
    /// In `items`' array, before an item or (first only) its end.
    Item { first: bool },
    /// In an item.
    InItem,
    /// After an item: `,` or `]`.
    AfterItem,
    /// After a field's value: `,` or `}`.
    AfterField,
    /// After the list's `}`: whitespace only.
    Done,
}

/// The top-level field being read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Key {
    #[default]
    Other,
    Metadata,
    Items,
}

/// A JSON value being skipped over: how deep in brackets, in a string or a scalar.
#[derive(Debug, Default, Clone, Copy)]
struct Value {
    started: bool,
    depth: usize,
    in_string: bool,
    escaped: bool,
    scalar: bool,
}

/// A table of the bytes in `special`.
const fn table(special: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut i = 0;
    while i < special.len() {
        table[special[i] as usize] = true;
        i += 1;
    }
    table
}
/// Bytes that end a scalar.
static ENDS_SCALAR: [bool; 256] = table(b"{}[]\",: \t\r\n");
/// Bytes that matter inside brackets, outside strings: commas, colons and whitespace do not.
static NESTS: [bool; 256] = table(b"{}[]\"");

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

impl Value {
    /// Reads on from `*at`; true once the value's last byte is read (`*at` just past it).
    fn scan(&mut self, buf: &[u8], at: &mut usize) -> Result<bool, &'static str> {
        let mut i = *at;
        let done = loop {
            if self.escaped {
                // The byte after a backslash that ended the last push.
                if i >= buf.len() {
                    break false;
                }
                self.escaped = false;
                i += 1;
                continue;
            }
            if self.in_string {
                match memchr::memchr2(b'"', b'\\', &buf[i..]) {
                    None => {
                        i = buf.len();
                        break false;
                    }
                    Some(n) => {
                        i += n;
                        if buf[i] == b'\\' {
                            // The escaped byte may not have come yet.
                            if i + 1 >= buf.len() {
                                self.escaped = true;
                                i = buf.len();
                                break false;
                            }
                            i += 2;
                            continue;
                        }
                        i += 1;
                        self.in_string = false;
                        if self.depth == 0 {
                            break true;
                        }
                        continue;
                    }
                }
            }
            if !self.started {
                while i < buf.len() && is_space(buf[i]) {
                    i += 1;
                }
                let Some(&b) = buf.get(i) else {
                    break false;
                };
                self.started = true;
                match b {
                    b'{' | b'[' => self.depth = 1,
                    b'"' => self.in_string = true,
                    b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => self.scalar = true,
                    _ => return Err("a value cannot start so"),
                }
                i += 1;
                continue;
            }
            if self.scalar {
                while i < buf.len() && !ENDS_SCALAR[usize::from(buf[i])] {
                    i += 1;
                }
                break i < buf.len();
            }
            while i < buf.len() && !NESTS[usize::from(buf[i])] {
                i += 1;
            }
            let Some(&b) = buf.get(i) else {
                break false;
            };
            i += 1;
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        break true;
                    }
                }
                _ => {}
            }
        };
        *at = i;
        Ok(done)
    }
}

/// Items handed out together: the bytes that hold them and where each lies.
#[derive(Debug)]
pub struct ItemRun {
    body: Arc<Vec<u8>>,
    items: Vec<Range<usize>>,
    first: usize,
}

impl ItemRun {
    /// How many items the run holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the run holds no item.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The number of the run's first item in the list.
    pub fn first(&self) -> usize {
        self.first
    }

    /// The run cut into runs of `size` items at most (the last may hold fewer), in order, all
    /// sharing its bytes.
    ///
    /// # Panics
    ///
    /// If `size` is zero.
    pub fn into_runs(self, size: usize) -> Vec<ItemRun> {
        assert!(size > 0, "runs of zero items");
        self.items
            .chunks(size)
            .enumerate()
            .map(|(i, items)| ItemRun {
                body: Arc::clone(&self.body),
                items: items.to_vec(),
                first: self.first + i * size,
            })
            .collect()
    }

    /// Decodes the run's items, as [`ListPage::decode_items`](super::ListPage::decode_items)
    /// does: an item that does not decode, has no name, or (for [`Scope::Namespaced`]) no
    /// namespace, is an [`Error::Decode`] naming it by its number in the list (`items[70]`).
    pub fn decode<K: Object + DeserializeOwned>(
        &self,
        scope: Option<Scope>,
    ) -> Result<Vec<Arc<K>>, Error> {
        self.decode_with(scope, ManagedFieldsDecode::Keep)
    }

    /// [`decode`](Self::decode), with each item's `metadata.managedFields` decoded or left out
    /// as `managed_fields` says ([`without_managed_fields`](crate::trim::without_managed_fields)).
    pub fn decode_with<K: Object + DeserializeOwned>(
        &self,
        scope: Option<Scope>,
        managed_fields: ManagedFieldsDecode,
    ) -> Result<Vec<Arc<K>>, Error> {
        decode_ranges(&self.body, &self.items, self.first, scope, managed_fields)
    }
}

fn malformed(what: &str) -> Error {
    Error::Decode {
        what: "list",
        source: serde_json::Error::custom(what),
    }
}

impl JsonListSplitter {
    /// A splitter that has been pushed nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next bytes of the body and reads them.
    ///
    /// # Errors
    ///
    /// [`Error::Decode`] if the body is not a JSON list object so far; after one, every call
    /// fails.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), Error> {
        if self.failed {
            return Err(malformed(
                "a list body read on after it was found malformed",
            ));
        }
        self.buf.extend_from_slice(bytes);
        let read = self.read();
        if read.is_err() {
            self.failed = true;
            self.buf = Vec::new();
            self.items.clear();
        }
        read
    }

    /// The items complete so far and not yet taken, with the bytes that hold them (which the
    /// splitter then lets go of), or `None` if there are none.
    pub fn take_items(&mut self) -> Option<ItemRun> {
        let last = self.items.last()?.end;
        // The rest, a part of an item at most, goes to a buffer as large as this one was, so
        // that the next run's bytes need not grow it again.
        let mut rest = Vec::with_capacity(self.buf.capacity());
        rest.extend_from_slice(&self.buf[last..]);
        self.buf.truncate(last);
        let body = Arc::new(std::mem::replace(&mut self.buf, rest));
        self.at -= last;
        self.value_start = self.value_start.saturating_sub(last);
        let items = std::mem::take(&mut self.items);
        let first = self.handed_out;
        self.handed_out += items.len();
        Some(ItemRun { body, items, first })
    }

    /// How many items are complete and not yet taken.
    pub fn ready(&self) -> usize {
        self.items.len()
    }

    /// Says whether the body ended where a list ends, and makes the list of its `items`, the
    /// decoded items of every run taken, in order.
    ///
    /// # Errors
    ///
    /// [`Error::Decode`] if the body ended before its list did, or was found malformed.
    ///
    /// # Panics
    ///
    /// If items are complete and were not taken ([`take_items`](Self::take_items)).
    pub fn finish<K>(mut self, items: Vec<Arc<K>>) -> Result<ObjectList<K>, Error> {
        if self.failed {
            return Err(malformed(
                "a list body read on after it was found malformed",
            ));
        }
        if self.state != State::Done {
            return Err(Error::Decode {
                what: "list",
                source: serde_json::Error::io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the list body ended before the list did",
                )),
            });
        }
        assert!(
            self.items.is_empty(),
            "JsonListSplitter::finish with items not taken"
        );
        let meta = std::mem::take(&mut self.meta);
        Ok(ObjectList {
            items,
            resource_version: meta.resource_version.into(),
            continue_token: meta.continue_token.filter(|c| !c.is_empty()),
            remaining_item_count: meta.remaining_item_count,
            shard_selector: meta.shard_info.and_then(|i| i.selector),
        })
    }

    fn read(&mut self) -> Result<(), Error> {
        loop {
            let state = self.state;
            if matches!(state, State::KeyString | State::FieldValue | State::InItem) {
                let mut at = self.at;
                let done = self.value.scan(&self.buf, &mut at).map_err(malformed)?;
                self.at = at;
                if !done {
                    return Ok(());
                }
                self.value_done()?;
                continue;
            }
            while self.at < self.buf.len() && is_space(self.buf[self.at]) {
                self.at += 1;
            }
            let Some(&b) = self.buf.get(self.at) else {
                return Ok(());
            };
            // The next state, and whether the byte is part of a value that starts here (and
            // so not consumed yet).
            let (next, value_starts) = match (state, b) {
                (State::Start, b'{') => (State::Key { first: true }, false),
                (State::Start, _) => return Err(malformed("a list body is a JSON object")),
                (State::Key { first: true }, b'}') => (State::Done, false),
                // The key is read as a value: its string, escapes and all.
                (State::Key { .. }, b'"') => (State::KeyString, true),
                (State::Key { .. }, _) => return Err(malformed("expected a field name")),
                (State::Colon, b':') => (State::ItemsOrValue, false),
                (State::Colon, _) => return Err(malformed("expected ':' after a field name")),
                (State::ItemsOrValue, b'[') if self.key == Key::Items => {
                    (State::Item { first: true }, false)
                }
                (State::ItemsOrValue, _) => (State::FieldValue, true),
                (State::Item { first: true } | State::AfterItem, b']') => {
                    (State::AfterField, false)
                }
                (State::Item { .. }, _) => (State::InItem, true),
                (State::AfterItem, b',') => (State::Item { first: false }, false),
                (State::AfterItem, _) => {
                    return Err(malformed("expected ',' or ']' after an item"));
                }
                (State::AfterField, b',') => (State::Key { first: false }, false),
                (State::AfterField, b'}') => (State::Done, false),
                (State::AfterField, _) => {
                    return Err(malformed("expected ',' or '}' after a field"));
                }
                (State::Done, _) => return Err(malformed("trailing characters after the list")),
                (State::KeyString | State::FieldValue | State::InItem, _) => {
                    return Err(malformed("a value was read as a separator"));
                }
            };
            self.state = next;
            if value_starts {
                self.value = Value::default();
                self.value_start = self.at;
            } else {
                self.at += 1;
            }
        }
    }

    /// A value was read whole, from `value_start` to `at`: a key, a field's value, an item.
    fn value_done(&mut self) -> Result<(), Error> {
        let bytes = &self.buf[self.value_start..self.at];
        let decode = |source| Error::Decode {
            what: "list",
            source,
        };
        match self.state {
            State::KeyString => {
                let key: String = serde_json::from_slice(bytes).map_err(decode)?;
                self.key = match key.as_str() {
                    "items" => Key::Items,
                    "metadata" => Key::Metadata,
                    _ => Key::Other,
                };
                let seen = match self.key {
                    Key::Items => Some(std::mem::replace(&mut self.seen_items, true)),
                    Key::Metadata => Some(std::mem::replace(&mut self.seen_metadata, true)),
                    Key::Other => None,
                };
                if seen == Some(true) {
                    return Err(decode(serde_json::Error::custom(format_args!(
                        "duplicate field `{key}`"
                    ))));
                }
                self.state = State::Colon;
            }
            State::FieldValue => {
                match self.key {
                    Key::Metadata => self.meta = serde_json::from_slice(bytes).map_err(decode)?,
                    Key::Items => {
                        // Not an array: `null` is no items, anything else an error.
                        let _: Option<Vec<IgnoredAny>> =
                            serde_json::from_slice(bytes).map_err(decode)?;
                    }
                    Key::Other => {
                        let _: IgnoredAny = serde_json::from_slice(bytes).map_err(decode)?;
                    }
                }
                self.state = State::AfterField;
            }
            State::InItem => {
                self.items.push(self.value_start..self.at);
                self.state = State::AfterItem;
            }
            _ => return Err(malformed("a separator was read as a value")),
        }
        Ok(())
    }
}
