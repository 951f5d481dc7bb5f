//! Response bodies as the bytes the client asked for: the `Content-Encoding` of an answer is
//! checked against the request's `Accept-Encoding`, and gzip is undone here, as the bytes arrive
//! and in bounded steps, rather than by the HTTP library whatever was asked.

use std::fmt;
use std::io::Write as _;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf as _, Bytes};
use flate2::write::GzDecoder;
use futures_util::{Stream, StreamExt as _};
use reqwest::header::{CONTENT_ENCODING, HeaderMap};

use crate::Error;

/// An encoding the client asks for (`Accept-Encoding`) and accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// The bytes as they are.
    Identity,
    /// gzip, which the API server uses for large answers.
    Gzip,
}

impl Encoding {
    /// The `Accept-Encoding` value that asks for this encoding.
    pub(crate) fn header_value(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::Gzip => "gzip",
        }
    }
}

/// The encoding of an answer to a request that asked for `asked`: none (or `identity`) is
/// always accepted; gzip only when it was asked for; anything else is
/// [`Error::UnexpectedEncoding`].
pub(crate) fn encoding_of(headers: &HeaderMap, asked: Encoding) -> Result<Encoding, Error> {
    let mut found = Encoding::Identity;
    for value in headers.get_all(CONTENT_ENCODING) {
        for coding in String::from_utf8_lossy(value.as_bytes()).split(',') {
            let coding = coding.trim().to_ascii_lowercase();
            match coding.as_str() {
                "" | "identity" => {}
                "gzip" | "x-gzip" if asked == Encoding::Gzip && found == Encoding::Identity => {
                    found = Encoding::Gzip;
                }
                _ => {
                    let all: Vec<_> = headers
                        .get_all(CONTENT_ENCODING)
                        .iter()
                        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                        .collect();
                    return Err(Error::UnexpectedEncoding {
                        encoding: all.join(", "),
                        asked: asked.header_value(),
                    });
                }
            }
        }
    }
    Ok(found)
}

/// A failure while reading a body: the transport's, or the gzip data's.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Reading from the connection failed.
    Transport(reqwest::Error),
    /// The gzip data is corrupt, cut short, or followed by other bytes.
    Gzip(std::io::Error),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Transport(e) => fmt::Display::fmt(e, f),
            Self::Gzip(e) => write!(f, "cannot gunzip the response body: {e}"),
        }
    }
}

impl std::error::Error for BodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Transport(e) => e.source(),
            Self::Gzip(e) => e.source(),
        }
    }
}

/// A response body as a stream of decoded chunks.
pub(crate) type Body = Pin<Box<dyn Stream<Item = Result<Bytes, BodyError>> + Send>>;

/// The body of `response`, decoded from `encoding` (as [`encoding_of`] found it).
pub(crate) fn decoded(response: reqwest::Response, encoding: Encoding) -> Body {
    let raw = response
        .bytes_stream()
        .map(|r| r.map_err(BodyError::Transport));
    match encoding {
        Encoding::Identity => Box::pin(raw),
        Encoding::Gzip => Box::pin(Gunzip::new(raw)),
    }
}

/// gzip undone as the compressed chunks arrive. Each step writes compressed bytes into the
/// decoder until it has produced some output, which is handed on at once: the decoder's own
/// buffer is 32 KiB, so a chunk handed on is at most a few tens of KiB, however well the data
/// compresses (a gzip bomb costs the reader's bounds, not this stream's memory).
pub(crate) struct Gunzip<S> {
    inner: S,
    decoder: GzDecoder<Vec<u8>>,
    /// Compressed bytes not yet written into the decoder.
    input: Bytes,
    done: bool,
}

impl<S> Gunzip<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            decoder: GzDecoder::new(Vec::new()),
            input: Bytes::new(),
            done: false,
        }
    }

    /// What the decoder has produced, if anything.
    fn take_output(&mut self) -> Option<Bytes> {
        let out = self.decoder.get_mut();
        (!out.is_empty()).then(|| Bytes::from(std::mem::take(out)))
    }

    fn fail(&mut self, e: std::io::Error) -> Poll<Option<Result<Bytes, BodyError>>> {
        self.done = true;
        Poll::Ready(Some(Err(BodyError::Gzip(e))))
    }
}

impl<S> Stream for Gunzip<S>
where
    S: Stream<Item = Result<Bytes, BodyError>> + Unpin,
{
    type Item = Result<Bytes, BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            if !this.input.is_empty() {
                match this.decoder.write(&this.input) {
                    // The gzip stream is complete, and more bytes follow it.
                    Ok(0) => {
                        return this.fail(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            "bytes after the end of the gzip data",
                        ));
                    }
                    Ok(n) => this.input.advance(n),
                    Err(e) => return this.fail(e),
                }
                if let Some(out) = this.take_output() {
                    return Poll::Ready(Some(Ok(out)));
                }
                continue;
            }
            // Everything received is written: hand on what the decoder holds before waiting,
            // so that an event is not kept back until the next chunk comes.
            if let Err(e) = this.decoder.flush() {
                return this.fail(e);
            }
            if let Some(out) = this.take_output() {
                return Poll::Ready(Some(Ok(out)));
            }
            match ready!(this.inner.poll_next_unpin(cx)) {
                Some(Ok(chunk)) => this.input = chunk,
                Some(Err(e)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
                None => {
                    if let Err(e) = this.decoder.try_finish() {
                        return this.fail(std::io::Error::new(
                            e.kind(),
                            format!("the gzip data ended early ({e})"),
                        ));
                    }
                    this.done = true;
                    return Poll::Ready(this.take_output().map(Ok));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    /// Feeds `compressed` in chunks of `size` and collects the output, or the error's message.
    fn gunzip(compressed: &[u8], size: usize) -> (Result<Vec<u8>, String>, usize) {
        let chunks: Vec<_> = compressed
            .chunks(size.max(1))
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let mut stream = Gunzip::new(futures_util::stream::iter(chunks));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let (mut out, mut largest) = (Vec::new(), 0);
        loop {
            match Pin::new(&mut stream).poll_next(&mut cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    largest = largest.max(chunk.len());
                    out.extend_from_slice(&chunk);
                }
                Poll::Ready(Some(Err(e))) => return (Err(e.to_string()), largest),
                Poll::Ready(None) => return (Ok(out), largest),
                Poll::Pending => panic!("a ready stream was pending"),
            }
        }
    }

    #[test]
    fn gunzips_at_any_chunking_in_bounded_steps() {
        let data: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let compressed = gzip(&data);
        for size in [1, 7, 100, 4096, compressed.len()] {
            let (out, largest) = gunzip(&compressed, size);
            assert_eq!(out.unwrap(), data, "chunks of {size}");
            assert!(
                largest <= 64 * 1024,
                "chunks of {size}: a step of {largest} bytes"
            );
        }
        // A bomb: 64 MiB of newlines from a few tens of KiB, handed on in small steps.
        let bomb = gzip(&vec![b'\n'; 64 << 20]);
        assert!(bomb.len() < 128 * 1024, "{}", bomb.len());
        let (out, largest) = gunzip(&bomb, bomb.len());
        assert_eq!(out.unwrap().len(), 64 << 20);
        assert!(largest <= 64 * 1024, "a step of {largest} bytes");
    }

    #[test]
    fn corrupt_cut_or_trailing_gzip_is_an_error() {
        let compressed = gzip(b"{\"kind\":\"PodList\"}");
        let cut = &compressed[..compressed.len() - 3];
        assert!(gunzip(cut, 5).0.unwrap_err().contains("ended early"));
        let mut trailing = compressed.clone();
        trailing.extend_from_slice(b"junk");
        assert!(
            gunzip(&trailing, 1000)
                .0
                .unwrap_err()
                .contains("after the end")
        );
        let mut corrupt = compressed.clone();
        corrupt[12] ^= 0xff;
        assert!(gunzip(&corrupt, 1000).0.is_err());
        assert!(gunzip(b"not gzip at all", 4).0.is_err());
        assert!(gunzip(b"", 4).0.unwrap_err().contains("ended early"));
    }

    #[test]
    fn encodings_not_asked_for_are_refused() {
        let headers = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(CONTENT_ENCODING, HeaderValue::from_str(v).unwrap());
            }
            h
        };
        use Encoding::{Gzip, Identity};
        #[rustfmt::skip]
        let cases: &[(&[&str], Encoding, Option<Encoding>)] = &[
            (&[], Identity, Some(Identity)),
            (&[], Gzip, Some(Identity)),
            (&["identity"], Identity, Some(Identity)),
            (&["gzip"], Gzip, Some(Gzip)),
            (&["GZip"], Gzip, Some(Gzip)),
            (&["x-gzip"], Gzip, Some(Gzip)),
            (&["identity, gzip"], Gzip, Some(Gzip)),
            (&["gzip"], Identity, None),
            (&["br"], Gzip, None),
            (&["deflate"], Gzip, None),
            (&["gzip, gzip"], Gzip, None),
            (&["gzip", "br"], Gzip, None),
        ];
        for (values, asked, want) in cases {
            match (encoding_of(&headers(values), *asked), want) {
                (Ok(got), Some(want)) => assert_eq!(got, *want, "{values:?}"),
                (Err(Error::UnexpectedEncoding { encoding, asked: a }), None) => {
                    assert_eq!(encoding, values.join(", "));
                    assert_eq!(a, asked.header_value());
                }
                (got, _) => panic!("{values:?} asked {asked:?}: {got:?}"),
            }
        }
    }
}
