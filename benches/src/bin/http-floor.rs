//! The floor: a minimal HTTP/1.1 server on the registry's own stack (tokio,
//! `registry-proto` framing, one batched write per read) that answers every
//! request with a fixed 64-byte body. The ceiling any handler is measured
//! against, on this machine and any other.
//!
//! `cargo run --release -p benches --bin http-floor -- --listen 127.0.0.1:8848 [--workers 1]`

use std::net::SocketAddr;

use registry_proto::http1::{parse_request, write_response, ContentType, Limits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// 64 bytes, as the floor prescribes.
const BODY: &[u8; 64] = b"{\"floor\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123\"}";

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
            tokio::spawn(serve(stream));
        }
    });
}

async fn serve(mut stream: TcpStream) {
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
                    write_response(&mut wbuf, 200, ContentType::Json, BODY, req.keep_alive);
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
