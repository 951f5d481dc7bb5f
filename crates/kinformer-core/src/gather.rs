//! A buffer for the lines and frames of a stream that arrive split across chunks.
//!
//! A watch body comes in chunks of a few kilobytes, and an event often straddles two of them.
//! Such an event must be copied into one buffer before it is decoded. A new buffer each time
//! costs an allocation and a free of the event's size, and under glibc an allocation that large
//! also sweeps the allocator's small free chunks. [`GatherBuffer`] hands the last buffer out
//! again instead, once nothing holds the event that went out in it. Every decoder in kinformer
//! copies what it keeps (the typed path, and both compact forms), so all their events are
//! gathered into the same buffer; a caller that held on to an event's bytes would get a new
//! buffer for the next one, as before, and never see its bytes written over.

use bytes::{Bytes, BytesMut};

/// The largest buffer kept for the next event: a rare huge event is not held on to.
pub const KEEP_AT_MOST: usize = 1 << 20;

/// Hands out buffers to gather split events in, reusing the last one when it is free.
///
/// ```
/// use kinformer_core::gather::GatherBuffer;
///
/// let mut gather = GatherBuffer::default();
/// let mut buffer = gather.start(8);
/// buffer.extend_from_slice(b"first ");
/// buffer.extend_from_slice(b"event");
/// let event = gather.finish(buffer);
/// assert_eq!(&event[..], b"first event");
/// let at = event.as_ptr();
///
/// // Once the event is dropped, the next one is gathered where it was.
/// drop(event);
/// let mut buffer = gather.start(5);
/// buffer.extend_from_slice(b"again");
/// assert_eq!(gather.finish(buffer).as_ptr(), at);
/// ```
#[derive(Debug, Default)]
pub struct GatherBuffer {
    /// The whole of the last buffer handed out, while it may come back.
    last: Option<Bytes>,
}

impl GatherBuffer {
    /// An empty buffer with room for `capacity` bytes: the last one handed out when nothing
    /// else holds it any more and it has the room, else a new one.
    pub fn start(&mut self, capacity: usize) -> BytesMut {
        if let Some(last) = self.last.take()
            && let Ok(mut buffer) = last.try_into_mut()
            && buffer.capacity() >= capacity
        {
            buffer.clear();
            return buffer;
        }
        BytesMut::with_capacity(capacity)
    }

    /// The gathered event, to hand on; its buffer is kept for [`start`](Self::start) unless it
    /// is over [`KEEP_AT_MOST`].
    pub fn finish(&mut self, gathered: BytesMut) -> Bytes {
        let event = gathered.freeze();
        self.last = (event.len() <= KEEP_AT_MOST).then(|| event.clone());
        event
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gathered(gather: &mut GatherBuffer, bytes: &[u8]) -> Bytes {
        let mut buffer = gather.start(bytes.len());
        buffer.extend_from_slice(bytes);
        gather.finish(buffer)
    }

    #[test]
    fn an_event_still_held_is_never_written_over() {
        let mut gather = GatherBuffer::default();
        let first = gathered(&mut gather, b"first");
        let second = gathered(&mut gather, b"other");
        assert_eq!((&first[..], &second[..]), (&b"first"[..], &b"other"[..]));
        assert_ne!(first.as_ptr(), second.as_ptr());
        // A slice of the event holds the buffer as much as the event does.
        let second_at = second.as_ptr();
        let part = second.slice(1..3);
        drop(second);
        let third = gathered(&mut gather, b"third");
        assert_eq!((&part[..], &third[..]), (&b"th"[..], &b"third"[..]));
        assert_ne!(third.as_ptr(), second_at);
    }

    #[test]
    fn a_free_buffer_is_used_again_while_it_has_the_room() {
        let mut gather = GatherBuffer::default();
        let first = gathered(&mut gather, b"twelve bytes");
        let at = first.as_ptr();
        drop(first);
        let second = gathered(&mut gather, b"short");
        assert_eq!((second.as_ptr(), &second[..]), (at, &b"short"[..]));
        drop(second);
        // Longer than the buffer: a new one.
        let third = gathered(&mut gather, b"longer than twelve");
        assert_eq!(&third[..], b"longer than twelve");
    }

    #[test]
    fn a_huge_buffer_is_not_kept() {
        let mut gather = GatherBuffer::default();
        drop(gathered(&mut gather, &vec![7; KEEP_AT_MOST + 1]));
        assert!(gather.last.is_none());
        drop(gathered(&mut gather, &vec![7; KEEP_AT_MOST]));
        assert!(gather.last.is_some());
    }
}
