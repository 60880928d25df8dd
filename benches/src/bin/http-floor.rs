//! The floor: a minimal HTTP/1.1 server on the registry's own stack (tokio,
//! `registry-proto` framing, one batched write per read) that answers every
//! request with a fixed body, 64 bytes unless `--body-bytes N` says otherwise. The
//! ceiling any handler is measured against, on this machine and any other; a
//! handler with a large answer (an instance list) is judged against a floor that
//! writes as many bytes, so the kernel's copy of the answer is in both.
//!
//! `cargo run --release -p benches --bin http-floor -- --listen 127.0.0.1:8848 [--workers 1] [--body-bytes N]`

use std::net::SocketAddr;

use registry_proto::http1::{parse_request, write_response, ContentType, Limits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The default body's size, as the floor prescribes.
const DEFAULT_BODY_BYTES: usize = 64;

/// A body of exactly `n` bytes: a JSON object `{"floor":"0123..."}` when there
/// is room for one (12 bytes), else `n` digits.
fn body(n: usize) -> Vec<u8> {
    let digits = |k: usize| (0..k).map(|i| b"0123456789abcdef"[i % 16]);
    if n < 12 {
        return digits(n).collect();
    }
    let mut b = Vec::with_capacity(n);
    b.extend_from_slice(b"{\"floor\":\"");
    b.extend(digits(n - 12));
    b.extend_from_slice(b"\"}");
    b
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let listen: SocketAddr = match value("--listen").map(|s| s.parse()) {
        Some(Ok(a)) => a,
        None => "127.0.0.1:8848".parse().expect("literal address"),
        Some(Err(e)) => {
            eprintln!("http-floor: --listen: {e}");
            std::process::exit(2);
        }
    };
    let workers: usize = value("--workers").and_then(|w| w.parse().ok()).unwrap_or(1);
    let body_bytes = match value("--body-bytes").map(|n| n.parse::<usize>()) {
        None => DEFAULT_BODY_BYTES,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("http-floor: --body-bytes: {e}");
            std::process::exit(2);
        }
    };
    // Leaked once: every connection's task shares it for the process's life.
    let body: &'static [u8] = body(body_bytes).leak();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(listen).await.expect("bind");
        println!(
            "http-floor listening on http://{}",
            listener.local_addr().expect("addr")
        );
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(serve(stream, body));
        }
    });
}

async fn serve(mut stream: TcpStream, body: &'static [u8]) {
    let limits = Limits::default();
    let mut rbuf = Vec::with_capacity(16 * 1024);
    let mut wbuf = Vec::with_capacity(16 * 1024);
    loop {
        let mut consumed = 0;
        let mut open = true;
        loop {
            match parse_request(&rbuf[consumed..], &limits) {
                Ok(Some((req, used))) => {
                    consumed += used;
                    write_response(&mut wbuf, 200, ContentType::Json, body, req.keep_alive);
                    if !req.keep_alive {
                        open = false;
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    write_response(
                        &mut wbuf,
                        e.status(),
                        ContentType::Text,
                        b"bad request",
                        false,
                    );
                    open = false;
                    break;
                }
            }
        }
        rbuf.drain(..consumed);
        if !wbuf.is_empty() {
            if stream.write_all(&wbuf).await.is_err() {
                return;
            }
            wbuf.clear();
        }
        if !open {
            return;
        }
        if rbuf.capacity() - rbuf.len() < 4096 {
            rbuf.reserve(16 * 1024);
        }
        match stream.read_buf(&mut rbuf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_has_exactly_the_bytes_asked_for() {
        for n in [0, 1, 11, 12, 13, 64, 4299, 100_000] {
            assert_eq!(body(n).len(), n, "--body-bytes {n}");
        }
    }

    #[test]
    fn the_default_body_is_the_64_byte_json_object() {
        let b = body(DEFAULT_BODY_BYTES);
        let v: serde_json::Value = serde_json::from_slice(&b).expect("JSON");
        assert_eq!(v["floor"].as_str().map(str::len), Some(52));
        assert!(serde_json::from_slice::<serde_json::Value>(&body(4299)).is_ok());
    }
}
