//! Raw HTTP generation (`loadgen bench-http`): one fixed GET, as fast as possible or at
//! a fixed rate, recording every latency. It exists to measure the generator itself
//! against `wrk` on the same target (see `scripts/bench-loadgen.sh`).
//!
//! Why it is not a protocol of the fleet driver ([`crate::worker::drive`]): it is a
//! different tool. The driver simulates a fleet (instances with lives, beats on a
//! wheel, subscribers, phases, verification) and every request it sends is one
//! simulated client's; `bench-http` has no fleet and no phases, only connections
//! that repeat one request in wrk's batch model, so that the floor it measures is
//! the cost of a request and a response and nothing else. Putting it under the
//! driver would add the fleet's bookkeeping to exactly the figure it exists to
//! isolate. What it shares with the driver it takes from the same place: worker
//! threads ([`crate::worker::thread`]), connections and source addresses
//! ([`crate::conn::connect`], [`crate::conn::loopback_source`]), response framing
//! ([`crate::conn::Reader`]), pacing ([`crate::schedule::Pacer`]) and histograms.
//! Its own part is the least work per request: the request bytes are built once, a
//! connection writes `pipeline` requests in one write and reads their responses, and
//! readiness is cleared without a system call once every response is in.
//!
//! Without `--rate` each connection runs closed-loop (like wrk): latency is measured
//! from the write. With `--rate` each connection follows its share of an open-loop
//! schedule (like wrk2): latency is measured from each request's intended time, and a
//! batch that cannot be sent on time is sent late, not skipped.

use std::cell::RefCell;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use anyhow::Context as _;
use hdrhistogram::Histogram;
use registry_proto::http1::{write_request, Method};
use tokio::io::Interest;

use crate::conn::{clear_readable, connect, loopback_source, Reader};
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
            crate::worker::thread(format!("loadgen-b{w}"), move || {
                worker(cfg, w, workers, request, clock, start, end)
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
        let source = (cfg.source_ips > 0).then(|| loopback_source(c, cfg.source_ips));
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
            pace_batch(p, depth, &mut intended, clock, end).await;
        }
        let sent = clock.now();
        if sent >= end {
            return Ok(());
        }
        write_all(&stream, &batch).await?;
        let batch = Batch {
            depth,
            intended: &intended,
            sent,
            end,
        };
        read_batch(&stream, &mut reader, &batch, clock, &tally).await?;
        // Every response is in and nothing is outstanding: no read can find more.
        clear_readable(&stream);
        if clock.now() >= end {
            return Ok(());
        }
    }
}

/// Takes the next `depth` slots of the connection's schedule into `intended` and
/// sleeps until the first is due (a late batch goes out at once, not skipped).
async fn pace_batch(
    pacer: &mut Pacer,
    depth: usize,
    intended: &mut Vec<Nanos>,
    clock: Clock,
    end: Nanos,
) {
    for _ in 0..depth {
        intended.push(pacer.peek().unwrap_or(end));
        let _ = pacer.next_due(Nanos::MAX);
    }
    if intended[0] > clock.now() {
        tokio::time::sleep_until(clock.instant(intended[0])).await;
    }
}

/// Writes all of `bytes`, waiting for the socket when it is full.
async fn write_all(stream: &tokio::net::TcpStream, bytes: &[u8]) -> anyhow::Result<()> {
    let mut pos = 0;
    while pos < bytes.len() {
        match stream.try_write(&bytes[pos..]) {
            Ok(n) => pos += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                stream.writable().await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// One written batch, as its responses are measured.
struct Batch<'a> {
    /// Requests in it.
    depth: usize,
    /// Their intended times (empty when closed-loop: measured from the write).
    intended: &'a [Nanos],
    /// When it was written.
    sent: Nanos,
    /// The end of the measured time: later responses are not counted.
    end: Nanos,
}

/// Reads the batch's responses, recording each one's latency into `tally`.
async fn read_batch(
    stream: &tokio::net::TcpStream,
    reader: &mut Reader,
    batch: &Batch<'_>,
    clock: Clock,
    tally: &RefCell<Tally>,
) -> anyhow::Result<()> {
    let depth = batch.depth;
    let mut got = 0;
    while got < depth {
        stream.ready(Interest::READABLE).await?;
        loop {
            match reader.read(stream) {
                Ok(0) => {
                    tally.borrow_mut().errors += (depth - got) as u64;
                    anyhow::bail!("the server closed the connection");
                }
                Ok(_) => {
                    let done = clock.now();
                    let mut t = tally.borrow_mut();
                    let t = &mut *t;
                    let counted = done < batch.end;
                    reader
                        .drain(|resp| {
                            if counted {
                                let from = batch.intended.get(got).copied().unwrap_or(batch.sent);
                                let _ = t.corrected.record(done.saturating_sub(from) / 1000);
                                let _ = t.uncorrected.record((done - batch.sent) / 1000);
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
    Ok(())
}
