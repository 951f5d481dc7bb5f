//! The chunks of a body pushed and not yet consumed, as the incremental readers keep them.

use std::collections::VecDeque;

use bytes::{Buf as _, Bytes};
use kinformer_core::gather::GatherBuffer;

/// Chunks pushed and not yet consumed, the first possibly partly consumed.
#[derive(Debug, Default)]
pub(super) struct Chunks {
    queue: VecDeque<Bytes>,
    /// The bytes in `queue`.
    buffered: usize,
    /// Where a frame split across chunks is gathered.
    gather: GatherBuffer,
}

impl Chunks {
    /// Adds a chunk at the end; an empty one is ignored.
    pub(super) fn push(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        self.buffered += chunk.len();
        self.queue.push_back(chunk);
    }

    /// The bytes buffered.
    pub(super) fn len(&self) -> usize {
        self.buffered
    }

    /// Drops every buffered byte.
    pub(super) fn clear(&mut self) {
        self.queue.clear();
        self.buffered = 0;
    }

    /// Copies the first bytes buffered into `out`, as many as fit, and says how many.
    pub(super) fn peek(&self, out: &mut [u8]) -> usize {
        let mut filled = 0;
        for chunk in &self.queue {
            let n = (out.len() - filled).min(chunk.len());
            out[filled..filled + n].copy_from_slice(&chunk[..n]);
            filled += n;
            if filled == out.len() {
                break;
            }
        }
        filled
    }

    /// Drops the first `n` buffered bytes, or all of them if fewer are buffered.
    pub(super) fn consume(&mut self, mut n: usize) {
        n = n.min(self.buffered);
        self.buffered -= n;
        while n > 0 {
            let Some(front) = self.queue.front_mut() else {
                return;
            };
            if front.len() > n {
                front.advance(n);
                return;
            }
            n -= front.len();
            self.queue.pop_front();
        }
    }

    /// Takes the first `n` buffered bytes (`n <= len()`): a slice of the first chunk when it
    /// holds them all, else a copy gathered from the chunks.
    pub(super) fn take(&mut self, n: usize) -> Bytes {
        debug_assert!(n <= self.buffered);
        if let Some(front) = self.queue.front_mut()
            && front.len() >= n
        {
            let taken = front.split_to(n);
            if front.is_empty() {
                self.queue.pop_front();
            }
            self.buffered -= n;
            return taken;
        }
        let mut taken = self.gather.start(n);
        let mut left = n;
        while left > 0 {
            let Some(front) = self.queue.front_mut() else {
                break;
            };
            let k = left.min(front.len());
            taken.extend_from_slice(&front[..k]);
            left -= k;
            if k == front.len() {
                self.queue.pop_front();
            } else {
                front.advance(k);
            }
        }
        self.buffered -= n - left;
        self.gather.finish(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `chunks` pushed in order.
    fn pushed(chunks: &[&'static [u8]]) -> Chunks {
        let mut queue = Chunks::default();
        for chunk in chunks {
            queue.push(Bytes::from_static(chunk));
        }
        queue
    }

    #[test]
    fn a_frame_split_across_chunks_is_gathered_and_one_within_a_chunk_is_sliced() {
        let first = Bytes::from_static(b"abc");
        let mut queue = Chunks::default();
        queue.push(first.clone());
        queue.push(Bytes::from_static(b"def"));
        let inside = queue.take(2);
        assert_eq!((&inside[..], inside.as_ptr()), (&b"ab"[..], first.as_ptr()));
        assert_eq!(&queue.take(3)[..], b"cde");
        assert_eq!(queue.len(), 1);
    }

    #[test]
    fn split_frames_are_gathered_in_one_buffer_once_each_is_dropped() {
        let mut queue = pushed(&[b"abc", b"def", b"ghi", b"jkl", b"mno", b"pqr"]);
        let first = queue.take(5);
        let at = first.as_ptr();
        // Held: the next split frame goes elsewhere, and the first is intact.
        let second = queue.take(5);
        assert_eq!((&first[..], &second[..]), (&b"abcde"[..], &b"fghij"[..]));
        assert_ne!(second.as_ptr(), at);
        drop(second);
        drop(first);
        let third = queue.take(5);
        assert_eq!(&third[..], b"klmno");
        assert_eq!(queue.len(), 3);
    }
}
