//! [`CountingProxy`]: a TCP forwarder on 127.0.0.1 that counts what passes through it, so a test
//! or an example can say how many requests and bytes one client cost a server.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Default)]
struct Counts {
    connections: AtomicU64,
    requests: AtomicU64,
    to_server: AtomicU64,
    to_client: AtomicU64,
}

/// Forwards every connection made to it to `upstream`, counting connections, HTTP/1.1 requests
/// (request heads seen on the way up) and bytes each way. Plain HTTP only: through TLS it
/// counts bytes, not requests. Stops when dropped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use kinformer_test_support::CountingProxy;
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// // An upstream that answers one fixed response.
/// let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let at = upstream.local_addr().unwrap();
/// tokio::spawn(async move {
///     let (mut c, _) = upstream.accept().await.unwrap();
///     let mut buf = [0; 1024];
///     let _ = c.read(&mut buf).await.unwrap();
///     c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await.unwrap();
/// });
/// let proxy = CountingProxy::start(at).await.unwrap();
/// let mut c = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
/// c.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
/// let mut answer = Vec::new();
/// c.read_to_end(&mut answer).await.unwrap();
/// assert!(answer.ends_with(b"ok"));
/// assert_eq!((proxy.requests(), proxy.bytes_to_client()), (1, answer.len() as u64));
/// # }
/// ```
#[derive(Debug)]
pub struct CountingProxy {
    addr: SocketAddr,
    counts: Arc<Counts>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CountingProxy {
    /// Listens on 127.0.0.1, on a port of the system's choosing, forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(Counts::default());
        let task = tokio::spawn({
            let counts = Arc::clone(&counts);
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    counts.connections.fetch_add(1, Ordering::Relaxed);
                    let counts = Arc::clone(&counts);
                    tokio::spawn(async move {
                        if let Ok(server) = TcpStream::connect(upstream).await {
                            forward(client, server, &counts).await;
                        }
                    });
                }
            }
        });
        Ok(Self { addr, counts, task })
    }

    /// Where to connect: `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections accepted.
    pub fn connections(&self) -> u64 {
        self.counts.connections.load(Ordering::Relaxed)
    }

    /// HTTP requests sent up (request heads counted).
    pub fn requests(&self) -> u64 {
        self.counts.requests.load(Ordering::Relaxed)
    }

    /// Bytes sent up to the server.
    pub fn bytes_to_server(&self) -> u64 {
        self.counts.to_server.load(Ordering::Relaxed)
    }

    /// Bytes sent back to the client: what the server's answers cost on the wire.
    pub fn bytes_to_client(&self) -> u64 {
        self.counts.to_client.load(Ordering::Relaxed)
    }
}

async fn forward(client: TcpStream, server: TcpStream, counts: &Counts) {
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    let up = async {
        let mut heads = Heads::default();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match client_rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    counts.to_server.fetch_add(n as u64, Ordering::Relaxed);
                    counts
                        .requests
                        .fetch_add(heads.feed(&buf[..n]), Ordering::Relaxed);
                    if server_tx.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = server_tx.shutdown().await;
    };
    let down = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match server_rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    counts.to_client.fetch_add(n as u64, Ordering::Relaxed);
                    if client_tx.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = client_tx.shutdown().await;
    };
    tokio::join!(up, down);
}

/// Finds HTTP/1.1 request heads in the bytes a client sends: a head ends at a blank line, and
/// a body of `content-length` bytes follows it.
#[derive(Default)]
struct Heads {
    head: Vec<u8>,
    body_left: usize,
}

impl Heads {
    /// Takes the next bytes; returns how many request heads ended in them.
    fn feed(&mut self, mut bytes: &[u8]) -> u64 {
        let mut ended = 0;
        while !bytes.is_empty() {
            if self.body_left > 0 {
                let skip = self.body_left.min(bytes.len());
                self.body_left -= skip;
                bytes = &bytes[skip..];
                continue;
            }
            self.head.push(bytes[0]);
            bytes = &bytes[1..];
            if self.head.ends_with(b"\r\n\r\n") {
                ended += 1;
                self.body_left = content_length(&self.head);
                self.head.clear();
            }
        }
        ended
    }
}

fn content_length(head: &[u8]) -> usize {
    String::from_utf8_lossy(head)
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::Heads;

    #[test]
    fn heads_are_counted_across_reads_and_bodies_skipped() {
        let mut h = Heads::default();
        let two = b"PUT /a HTTP/1.1\r\ncontent-length: 4\r\n\r\n\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
        let (first, rest) = two.split_at(20);
        assert_eq!(h.feed(first) + h.feed(rest), 2);
        assert_eq!(h.feed(b"GET /c HTTP/1.1\r\nhost: x\r"), 0);
        assert_eq!(h.feed(b"\n\r\n"), 1);
    }
}
