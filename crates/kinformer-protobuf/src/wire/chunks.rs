//! The chunks of a body pushed and not yet consumed, as the incremental readers keep them.

use std::collections::VecDeque;

use bytes::{Buf as _, Bytes, BytesMut};

/// Chunks pushed and not yet consumed, the first possibly partly consumed.
#[derive(Debug, Default)]
pub(super) struct Chunks {
    queue: VecDeque<Bytes>,
    /// The bytes in `queue`.
    buffered: usize,
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
        let mut taken = BytesMut::with_capacity(n);
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
        taken.freeze()
    }
}
