//! Shared test support: the real server started in-process on port 0, and a
//! small HTTP/1.1 client over real sockets.

use std::net::SocketAddr;
use std::sync::Arc;

use registry_proto::http1::{parse_response, write_request, Method};
use registry_server::clock::{Clock, ClockControl};
use registry_server::{run_app, App, Config, Listeners};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running server.
pub struct TestServer {
    pub http_addr: SocketAddr,
    pub grpc_addr: SocketAddr,
    /// The DNS door's address, with `--dns-listen`.
    pub dns_addr: Option<SocketAddr>,
    pub app: Arc<App>,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<anyhow::Result<()>>>,
}

impl TestServer {
    /// Starts a server with the test defaults.
    pub async fn spawn() -> TestServer {
        Self::with(Config::for_test()).await
    }

    /// Starts a server with `config`.
    pub async fn with(config: Config) -> TestServer {
        let listeners = Listeners::bind(&config).expect("bind");
        let app = Arc::new(App::new(config).expect("valid config"));
        Self::serve(app, listeners)
    }

    /// Starts a server with `config` on a clock the test moves forward
    /// (time-driven behaviour without sleeping: see `Clock::adjustable`).
    pub async fn with_clock(config: Config) -> (TestServer, ClockControl) {
        let listeners = Listeners::bind(&config).expect("bind");
        let (clock, control) = Clock::adjustable();
        let app = Arc::new(App::with_clock(config, clock).expect("valid config"));
        (Self::serve(app, listeners), control)
    }

    /// Waits until the sweeper has run a whole pass that started after
    /// this call (so after any clock advance made before it).
    pub async fn swept(&self) {
        let target = self.app.metrics.sweeps.get() + 2;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while self.app.metrics.sweeps.get() < target {
            assert!(
                std::time::Instant::now() < deadline,
                "no sweeper pass within 20 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    fn serve(app: Arc<App>, listeners: Listeners) -> TestServer {
        let http_addr = listeners.http_addr();
        let grpc_addr = listeners.grpc_addr();
        let dns_addr = listeners.dns_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(run_app(app.clone(), listeners, async {
            let _ = stopped.await;
        }));
        TestServer {
            http_addr,
            grpc_addr,
            dns_addr,
            app,
            stop: Some(stop),
            handle: Some(handle),
        }
    }

    /// `http://host:port`.
    pub fn base(&self) -> String {
        format!("http://{}", self.http_addr)
    }

    /// Stops the server and waits for its ordered shutdown.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(h) = self.handle.take() {
            h.await.expect("server task").expect("server result");
        }
    }

    /// One request on a fresh connection.
    pub async fn call(&self, method: Method, target: &str) -> Reply {
        call(self.http_addr, method, target, None).await
    }

    /// One request with a form body.
    pub async fn call_form(&self, method: Method, target: &str, form: &str) -> Reply {
        call(self.http_addr, method, target, Some(form.as_bytes())).await
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// A response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// One request on a fresh connection to `addr`.
pub async fn call(addr: SocketAddr, method: Method, target: &str, form: Option<&[u8]>) -> Reply {
    let mut out = Vec::new();
    let host = addr.to_string();
    write_request(
        &mut out,
        method,
        target,
        &host,
        form.map(|f| ("application/x-www-form-urlencoded", f)),
    );
    raw_expect(addr, &out, 1)
        .await
        .into_iter()
        .next()
        .expect("one response")
}

/// Writes `bytes` and returns the responses expected: `count` of them.
pub async fn raw_expect(addr: SocketAddr, bytes: &[u8], count: usize) -> Vec<Reply> {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(bytes).await.expect("write");
    let mut buf = Vec::new();
    let mut replies = Vec::new();
    let mut chunk = [0u8; 65536];
    while replies.len() < count {
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), s.read(&mut chunk))
            .await
            .expect("response in time")
            .expect("read");
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        while let Ok(Some((r, used))) = parse_response(&buf) {
            replies.push(Reply {
                status: r.status,
                body: String::from_utf8_lossy(&r.body).into_owned(),
            });
            buf.drain(..used);
        }
    }
    replies
}
