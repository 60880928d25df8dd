//! A loopback HTTP server that answers every request (anything ending in a blank
//! line) with `200 ok`, pipelined requests in one write: the far end for tests of
//! loadgen's own sending (send lag, `bench-http`), where the server must cost as
//! little as possible.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Starts the server on the current runtime; returns its address.
pub async fn answering_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(answer(s));
        }
    });
    addr
}

async fn answer(mut s: tokio::net::TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending = Vec::new();
    loop {
        let Ok(n) = s.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        pending.extend_from_slice(&buf[..n]);
        let mut out = Vec::new();
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        }
        if s.write_all(&out).await.is_err() {
            return;
        }
    }
}
