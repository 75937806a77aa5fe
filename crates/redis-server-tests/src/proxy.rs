//! A loopback TCP proxy (tokio) in front of a real server: adds latency to every chunk in
//! both directions and can drop every connection, to make Redis slow or flaky on demand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The proxy: its listening port, the latency it adds (ms) and the signal that cuts every
/// connection; the accept loop ends with it.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    latency_ms: Arc<AtomicU64>,
    cut: watch::Sender<u64>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listen on a free loopback port and forward to `127.0.0.1:target`.
    pub async fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let latency_ms = Arc::new(AtomicU64::new(0));
        let (cut, _) = watch::channel(0u64);
        let (lat, cuts) = (Arc::clone(&latency_ms), cut.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
                    continue; // the server is down: the client sees the connection close
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pump(cr, sw, Arc::clone(&lat), cuts.subscribe()));
                tokio::spawn(pump(sr, cw, Arc::clone(&lat), cuts.subscribe()));
            }
        });
        Proxy {
            port,
            latency_ms,
            cut,
            accept,
        }
    }

    /// The URL a client connects to instead of the server's.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Delay every chunk forwarded from now on by `latency` (whole ms) in each direction.
    pub fn set_latency(&self, latency: Duration) {
        // Relaxed: pairs with the relaxed load in `pump`; only the value travels.
        self.latency_ms
            .store(latency.as_millis() as u64, Ordering::Relaxed);
    }

    /// Close every open connection (new ones are accepted again).
    pub fn drop_connections(&self) {
        self.cut.send_modify(|g| *g += 1);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.drop_connections();
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    latency_ms: Arc<AtomicU64>,
    mut cut: watch::Receiver<u64>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let read = tokio::select! {
            r = from.read(&mut buf) => r,
            _ = cut.changed() => return,
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Relaxed: a setting the test changes between phases; pairs with the relaxed store in
        // `set_latency`; a chunk read around the change may see the old delay, which no test
        // depends on.
        let delay = latency_ms.load(Ordering::Relaxed);
        if delay > 0 {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(delay)) => {}
                _ = cut.changed() => return,
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
