//! Reading requests in the hand-written HTTP servers of hostile-server tests, which answer
//! what no well-behaved server would and so cannot be built on an HTTP library.

use tokio::io::{AsyncRead, AsyncReadExt};

/// The most a request head may take: a test server gives up on a client that sends more.
pub const MAX_HEAD: usize = 64 * 1024;

/// A request's head: its request line and headers, as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// Everything up to and including the blank line, lossily decoded.
    pub text: String,
}

impl RequestHead {
    /// The request target (`/api/v1/pods?watch=true`).
    pub fn target(&self) -> &str {
        self.text.split_whitespace().nth(1).unwrap_or_default()
    }

    /// The target's path, without the query.
    pub fn path(&self) -> &str {
        self.target().split('?').next().unwrap_or_default()
    }
}

/// Reads one request head from `conn`: `None` when the client closes the connection (or it
/// fails) first, or sends more than [`MAX_HEAD`] without ending it. A body is not read.
///
/// ```
/// # tokio_test_block_on(async {
/// use kinformer_test_support::http::read_request_head;
///
/// let mut request: &[u8] = b"GET /api/v1/pods?limit=5 HTTP/1.1\r\nHost: x\r\n\r\n";
/// let head = read_request_head(&mut request).await.unwrap();
/// assert_eq!(head.target(), "/api/v1/pods?limit=5");
/// assert_eq!(head.path(), "/api/v1/pods");
/// assert!(read_request_head(&mut &b"GET / HTTP/1.1\r\n"[..]).await.is_none());
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
pub async fn read_request_head(conn: &mut (impl AsyncRead + Unpin)) -> Option<RequestHead> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return None;
        }
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    Some(RequestHead {
        text: String::from_utf8_lossy(&head).into_owned(),
    })
}
