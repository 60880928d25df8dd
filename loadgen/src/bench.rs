//! Raw HTTP generation (`loadgen bench-http`): one fixed GET, as fast as possible or at
//! a fixed rate, recording every latency. It exists to measure the generator itself
//! against `wrk` on the same target (see `scripts/bench-loadgen.sh`), so it uses the
//! same building blocks as a profile run (worker threads with a single-threaded
//! runtime, [`crate::conn::connect`], [`crate::conn::Reader`], per-worker histograms
//! merged at the end) with the least work per request: the request bytes are built
//! once, a connection writes `pipeline` requests in one write and reads their
//! responses (wrk's batch model), and readiness is cleared without a system call once
//! every response is in.
//!
//! Without `--rate` each connection runs closed-loop (like wrk): latency is measured
//! from the write. With `--rate` each connection follows its share of an open-loop
//! schedule (like wrk2): latency is measured from each request's intended time, and a
//! batch that cannot be sent on time is sent late, not skipped.

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use anyhow::Context as _;
use hdrhistogram::Histogram;
use registry_proto::http1::{write_request, Method};
use tokio::io::Interest;

use crate::conn::{clear_readable, connect, Reader};
use crate::recorder::interval_histogram;
use crate::schedule::{Clock, Nanos, Pacer};

/// What `bench-http` runs.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// The server.
    pub target: SocketAddr,
    /// Request path (with query).
    pub path: String,
    /// Connections in total.
    pub connections: u32,
    /// Requests per write (1 = no pipelining).
    pub pipeline: u32,
    /// How long to run.
    pub duration: Duration,
    /// Requests per second in total; `None` = as fast as possible.
    pub rate: Option<f64>,
    /// Worker threads.
    pub workers: u32,
    /// Loopback source addresses to spread connections over (0 = let the OS pick).
    pub source_ips: u8,
}

/// What `bench-http` measured.
#[derive(Debug, Clone)]
pub struct BenchResult {
    /// Responses received.
    pub requests: u64,
    /// Non-2xx responses and broken connections.
    pub errors: u64,
    /// Measured time, seconds.
    pub duration_s: f64,
    /// Latency from the intended send time (equals `uncorrected` without `--rate`), µs.
    pub corrected: Histogram<u64>,
    /// Latency from the write, µs.
    pub uncorrected: Histogram<u64>,
}

impl BenchResult {
    /// Responses per second.
    pub fn rate(&self) -> f64 {
        reports::report::rate(self.requests, self.duration_s)
    }

    /// A wrk-like text summary.
    pub fn render(&self) -> String {
        let mut t =
            reports::table::Table::new(["latency", "p50", "p90", "p99", "p99.9", "p99.99", "max"]);
        for (name, h) in [
            ("corrected", &self.corrected),
            ("uncorrected", &self.uncorrected),
        ] {
            let s = reports::Summary::of(h);
            t.push(
                std::iter::once(name.to_owned()).chain(
                    [
                        s.p50_us, s.p90_us, s.p99_us, s.p999_us, s.p9999_us, s.max_us,
                    ]
                    .map(|us| reports::table::micros(us as f64)),
                ),
            );
        }
        format!(
            "{}  {} requests in {:.2}s, {} errors\nRequests/sec: {:.2}\n",
            t.to_text(),
            self.requests,
            self.duration_s,
            self.errors,
            self.rate()
        )
    }
}

#[derive(Debug)]
struct Tally {
    corrected: Histogram<u64>,
    uncorrected: Histogram<u64>,
    requests: u64,
    errors: u64,
}

/// Runs the benchmark.
pub fn run(cfg: &BenchConfig) -> anyhow::Result<BenchResult> {
    let workers = cfg.workers.clamp(1, cfg.connections.max(1));
    let clock = Clock::start();
    // Connections start, then everyone measures from the same moment.
    let start = clock.now() + 200 * crate::schedule::MILLI;
    let end = start + cfg.duration.as_nanos() as Nanos;
    let mut request = Vec::new();
    write_request(
        &mut request,
        Method::Get,
        &cfg.path,
        &cfg.target.to_string(),
        None,
    );
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let cfg = cfg.clone();
            let request = request.clone();
            std::thread::Builder::new()
                .name(format!("loadgen-b{w}"))
                .spawn(move || -> anyhow::Result<Tally> {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    let local = tokio::task::LocalSet::new();
                    local.block_on(&rt, worker(cfg, w, workers, request, clock, start, end))
                })
                .context("starting a bench worker")
        })
        .collect::<anyhow::Result<_>>()?;
    let mut total = Tally {
        corrected: reports::new_histogram(),
        uncorrected: reports::new_histogram(),
        requests: 0,
        errors: 0,
    };
    for h in handles {
        let t = h
            .join()
            .map_err(|_| anyhow::anyhow!("a bench worker panicked"))??;
        let _ = total.corrected.add(&t.corrected);
        let _ = total.uncorrected.add(&t.uncorrected);
        total.requests += t.requests;
        total.errors += t.errors;
    }
    Ok(BenchResult {
        requests: total.requests,
        errors: total.errors,
        duration_s: cfg.duration.as_secs_f64(),
        corrected: total.corrected,
        uncorrected: total.uncorrected,
    })
}

async fn worker(
    cfg: BenchConfig,
    w: u32,
    workers: u32,
    request: Vec<u8>,
    clock: Clock,
    start: Nanos,
    end: Nanos,
) -> anyhow::Result<Tally> {
    let tally = Rc::new(RefCell::new(Tally {
        corrected: interval_histogram(),
        uncorrected: interval_histogram(),
        requests: 0,
        errors: 0,
    }));
    let depth = cfg.pipeline.max(1) as usize;
    let batch: Rc<Vec<u8>> = Rc::new(request.repeat(depth));
    let mut tasks = Vec::new();
    for c in (w..cfg.connections).step_by(workers as usize) {
        let source = (cfg.source_ips > 0).then(|| {
            IpAddr::V4(Ipv4Addr::new(
                127,
                0,
                0,
                1 + (c % u32::from(cfg.source_ips)) as u8,
            ))
        });
        let pacer = cfg
            .rate
            .map(|r| Pacer::for_worker(start, r, None, c, cfg.connections));
        tasks.push(tokio::task::spawn_local(connection(
            cfg.target,
            source,
            batch.clone(),
            depth,
            pacer,
            clock,
            start,
            end,
            tally.clone(),
        )));
    }
    for t in tasks {
        t.await.context("a bench connection task failed")??;
    }
    let t = Rc::try_unwrap(tally)
        .map_err(|_| anyhow::anyhow!("bench tally still shared"))?
        .into_inner();
    Ok(t)
}

#[allow(clippy::too_many_arguments)]
async fn connection(
    target: SocketAddr,
    source: Option<IpAddr>,
    batch: Rc<Vec<u8>>,
    depth: usize,
    mut pacer: Option<Pacer>,
    clock: Clock,
    start: Nanos,
    end: Nanos,
    tally: Rc<RefCell<Tally>>,
) -> anyhow::Result<()> {
    let stream = connect(target, source)
        .await
        .with_context(|| format!("connecting to {target}"))?;
    let mut reader = Reader::new();
    let mut intended: Vec<Nanos> = Vec::with_capacity(depth);
    tokio::time::sleep_until(clock.instant(start)).await;
    loop {
        intended.clear();
        if let Some(p) = pacer.as_mut() {
            for _ in 0..depth {
                intended.push(p.peek().unwrap_or(end));
                let _ = p.next_due(Nanos::MAX);
            }
            if intended[0] > clock.now() {
                tokio::time::sleep_until(clock.instant(intended[0])).await;
            }
        }
        let sent = clock.now();
        if sent >= end {
            return Ok(());
        }
        let mut pos = 0;
        while pos < batch.len() {
            match stream.try_write(&batch[pos..]) {
                Ok(n) => pos += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    stream.writable().await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut got = 0;
        while got < depth {
            stream.ready(Interest::READABLE).await?;
            loop {
                match reader.read(&stream) {
                    Ok(0) => {
                        tally.borrow_mut().errors += (depth - got) as u64;
                        anyhow::bail!("the server closed the connection");
                    }
                    Ok(_) => {
                        let done = clock.now();
                        let mut t = tally.borrow_mut();
                        let t = &mut *t;
                        let counted = done < end;
                        reader
                            .drain(|resp| {
                                if counted {
                                    let from = intended.get(got).copied().unwrap_or(sent);
                                    let _ = t.corrected.record(done.saturating_sub(from) / 1000);
                                    let _ = t.uncorrected.record((done - sent) / 1000);
                                    t.requests += 1;
                                    if !(200..300).contains(&resp.status) {
                                        t.errors += 1;
                                    }
                                }
                                got += 1;
                                got < depth
                            })
                            .map_err(|e| anyhow::anyhow!("bad response: {e}"))?;
                        if got >= depth {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        // Every response is in and nothing is outstanding: no read can find more.
        clear_readable(&stream);
        if clock.now() >= end {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny HTTP server answering every request with "ok", for the bench's own test.
    async fn floor(listener: tokio::net::TcpListener) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
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
                    while let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..i + 4);
                        out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                    }
                    if s.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    }

    #[test]
    fn measures_a_local_server_plain_and_pipelined_and_paced() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let target = listener.local_addr().unwrap();
        rt.spawn(floor(listener));
        for (pipeline, rate) in [(1, None), (8, None), (2, Some(2000.0))] {
            let r = run(&BenchConfig {
                target,
                path: "/".into(),
                connections: 4,
                pipeline,
                duration: Duration::from_millis(300),
                rate,
                workers: 2,
                source_ips: 2,
            })
            .unwrap();
            assert!(r.requests > 100, "{pipeline}: {}", r.requests);
            assert_eq!(r.errors, 0);
            assert_eq!(r.corrected.len(), r.requests);
            if let Some(rate) = rate {
                let want = rate * 0.3;
                assert!(
                    (r.requests as f64) > want * 0.8 && (r.requests as f64) < want * 1.2,
                    "paced: {} vs {want}",
                    r.requests
                );
            }
            assert!(r.render().contains("Requests/sec"));
        }
    }
}
