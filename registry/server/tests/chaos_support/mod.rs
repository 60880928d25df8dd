//! The chaos harness: registry processes in their own network namespaces
//! ([`netns`]), a seeded random schedule of faults (partitions as links
//! taken down, `kill -9`, `SIGSTOP`, restarts), a workload that records
//! every client operation with its outcome, and the checker that judges the
//! history once the faults are healed.
//!
//! What the checker holds the cluster to:
//! - every acknowledged persistent write is on every node after healing,
//!   and nothing whose delete was acknowledged comes back;
//! - no node acknowledges a write while it is cut off from the majority
//!   (it could not have committed it), and it refuses such writes with a
//!   clear error, not silence;
//! - a write refused as "not applied" is absent after healing: the
//!   server's word is held to, not read as "maybe";
//! - the majority side acknowledges at least [`MAJORITY_SHARE`] of the
//!   writes sent to it while no fault began or ended;
//! - a beat answered "unknown instance" (20404) is tolerated only when the
//!   service's owner itself rejoined less than [`REJOIN_BOUND`] before, at
//!   most [`TOLERATED_PER_REJOIN`] times per rejoin;
//! - an ephemeral instance that keeps beating through the majority side is
//!   never absent there;
//! - every node converges to the same persistent state within
//!   [`CONVERGE`] of the healing.
//!
//! A failure prints the seed (rerun with `CHAOS_SEED`) and the history.

pub mod netns;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use registry_proto::http1::Method;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::binary::Conn;

/// How long after the last fault is healed every node must agree.
pub const CONVERGE: Duration = Duration::from_secs(20);

/// The least share of writes the majority side acknowledges while no fault
/// begins or ends. Writes sent during an election (a killed or stopped
/// leader: ~1-2 s with the test's 800 ms election timeout) are refused, and
/// in the CI schedule faults are held 1.5-4 s with gaps of 1-2.5 s: runs
/// measured 0.77-0.82 here (25 s and 90 s schedules); a cluster that
/// refused most writes would not be highly available, whatever it kept.
pub const MAJORITY_SHARE: f64 = 0.4;

/// How long after a member rejoins its peers' hand-over may still be on
/// the way, so it may not know an ephemeral instance yet.
pub const REJOIN_BOUND: u64 = 5_000;

/// "Unknown instance" answers one rejoin may explain: the client registers
/// again at the first (as Nacos clients do), so a second is a beat already
/// on the way.
pub const TOLERATED_PER_REJOIN: usize = 2;

/// A small seeded generator (SplitMix64): the schedule is a function of
/// the seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

/// One registry process in namespace `ns`.
pub struct NsNode {
    pub addr: SocketAddr,
    ns: String,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
    pub pid: u32,
}

impl NsNode {
    pub async fn start(ns: String, addr: SocketAddr, args: Vec<String>, log: &Path) -> NsNode {
        let mut n = NsNode {
            addr,
            ns,
            args,
            log: log.to_path_buf(),
            child: None,
            pid: 0,
        };
        n.spawn().await;
        n
    }

    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open log");
        // `ip netns exec` execs the binary: the child's pid is the registry's.
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns, env!("CARGO_BIN_EXE_registry")])
            .args(&self.args)
            // CHAOS_LOG: more detail for a failure being chased.
            .env(
                "REGISTRY_LOG",
                std::env::var("CHAOS_LOG").unwrap_or_else(|_| "info,openraft=warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("start the registry in its namespace");
        self.pid = child.id().expect("pid");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("registry started within 30 s")
            .expect("read stdout");
        assert!(
            line.as_deref()
                .is_some_and(|l| l.starts_with("registry listening")),
            "unexpected start: {line:?}\n{}",
            self.log_text()
        );
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.child = Some(child);
    }

    pub async fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
    }

    pub async fn restart(&mut self) {
        self.kill9().await;
        self.spawn().await;
    }

    /// Sends `SIG<name>`; a signal that was not delivered fails the test,
    /// as the schedule would otherwise judge a fault that never happened.
    pub fn signal(&self, name: &str) {
        if let Err(why) = send_signal(self.pid, name) {
            panic!("{why}");
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `kill -<name> <pid>`, an error unless the signal was delivered.
pub fn send_signal(pid: u32, name: &str) -> Result<(), String> {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("run kill: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "kill -{name} {pid} failed ({status}): the fault did not happen"
        ))
    }
}

/// One request with bounds on connect and answer; `None` when there is no
/// answer.
pub async fn call(addr: SocketAddr, method: Method, target: &str) -> Option<(u16, String)> {
    tokio::time::timeout(Duration::from_secs(4), async {
        Conn::open(addr).await.ok()?.call(method, target).await.ok()
    })
    .await
    .ok()
    .flatten()
}

/// A persistent write's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Register,
    Deregister,
}

/// A client operation's outcome.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// 200 `ok`.
    Ack,
    /// Another status, with its text.
    Refused(u16, String),
    /// No answer (timeout, connection refused or reset).
    Unknown,
}

/// One recorded persistent write.
#[derive(Clone, Debug)]
pub struct Op {
    pub start_ms: u64,
    pub end_ms: u64,
    pub node: usize,
    pub kind: Kind,
    pub port: u16,
    pub outcome: Outcome,
    /// The node was cut off from the majority from before the write was
    /// sent until after its answer.
    pub isolated_throughout: bool,
    /// The node was on the majority side and no fault began or ended from
    /// before the write was sent until after its answer.
    pub majority_steady: bool,
}

/// Which nodes are faulted now, as the schedule sets it.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Nodes cut off from the majority, with the epoch of the cut.
    pub isolated: BTreeMap<usize, u64>,
    /// Nodes killed or stopped (not answering).
    pub down: BTreeSet<usize>,
    /// When each node last rejoined the majority (healed, restarted, resumed).
    pub rejoined_ms: BTreeMap<usize, u64>,
    epoch: u64,
    /// Faults begun or ended so far.
    pub changes: u64,
}

impl Faults {
    pub fn healthy(&self, i: usize) -> bool {
        !self.isolated.contains_key(&i) && !self.down.contains(&i)
    }
}

/// Everything that happened, for the checker and for failure reports.
#[derive(Default)]
pub struct History {
    pub ops: Vec<Op>,
    pub events: Vec<(u64, String)>,
    pub violations: Vec<String>,
    /// Answers the checker let pass, each with the rejoin (node, time)
    /// that explains it.
    pub tolerated: Vec<(usize, u64, String)>,
}

/// The shared record of a run.
#[derive(Clone)]
pub struct Run {
    pub seed: u64,
    started: Instant,
    pub history: Arc<Mutex<History>>,
    pub faults: Arc<Mutex<Faults>>,
}

impl Run {
    pub fn new(seed: u64) -> Run {
        Run {
            seed,
            started: Instant::now(),
            history: Arc::default(),
            faults: Arc::default(),
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub fn event(&self, text: String) {
        let t = self.now_ms();
        eprintln!("chaos [{t:>6} ms] {text}");
        self.history.lock().unwrap().events.push((t, text));
    }

    pub fn violation(&self, text: String) {
        let t = self.now_ms();
        self.history
            .lock()
            .unwrap()
            .violations
            .push(format!("[{t} ms] {text}"));
    }

    pub fn isolate(&self, i: usize) {
        let mut f = self.faults.lock().unwrap();
        f.epoch += 1;
        f.changes += 1;
        let e = f.epoch;
        f.isolated.insert(i, e);
    }

    pub fn rejoin(&self, i: usize) {
        let t = self.now_ms();
        let mut f = self.faults.lock().unwrap();
        f.isolated.remove(&i);
        f.down.remove(&i);
        f.rejoined_ms.insert(i, t);
        f.changes += 1;
    }

    pub fn set_down(&self, i: usize) {
        let mut f = self.faults.lock().unwrap();
        f.down.insert(i);
        f.changes += 1;
    }

    /// Lets an answer pass because `node` rejoined at `rejoined_ms`.
    pub fn tolerate(&self, node: usize, rejoined_ms: u64, text: String) {
        let t = self.now_ms();
        eprintln!("chaos [{t:>6} ms] tolerated: {text}");
        self.history.lock().unwrap().tolerated.push((
            node,
            rejoined_ms,
            format!("[{t} ms] {text}"),
        ));
    }

    /// The run's seed, events and operations, for a failure message.
    pub fn report(&self) -> String {
        let h = self.history.lock().unwrap();
        let mut s = format!(
            "chaos seed {} (rerun: CHAOS_SEED={})\n",
            self.seed, self.seed
        );
        let _ = writeln!(s, "violations:");
        for v in &h.violations {
            let _ = writeln!(s, "  {v}");
        }
        let _ = writeln!(s, "tolerated ({}):", h.tolerated.len());
        for (_, _, t) in &h.tolerated {
            let _ = writeln!(s, "  {t}");
        }
        let _ = writeln!(s, "faults:");
        for (t, e) in &h.events {
            let _ = writeln!(s, "  [{t:>6} ms] {e}");
        }
        let _ = writeln!(s, "operations ({}):", h.ops.len());
        for o in &h.ops {
            let _ = writeln!(
                s,
                "  [{:>6}-{:>6} ms] node {} {:?} {} -> {:?}{}",
                o.start_ms,
                o.end_ms,
                o.node,
                o.kind,
                o.port,
                o.outcome,
                if o.isolated_throughout {
                    " (isolated)"
                } else {
                    ""
                }
            );
        }
        s
    }
}

/// The persistent state the history allows after healing: ports that must
/// be present and ports that must be absent (the rest may go either way).
pub fn expected(ops: &[Op]) -> (BTreeSet<u16>, BTreeSet<u16>) {
    let mut present = BTreeSet::new();
    let mut absent = BTreeSet::new();
    let mut register_acked = BTreeSet::new();
    let mut deregister_tried = BTreeSet::new();
    for o in ops {
        match (o.kind, &o.outcome) {
            (Kind::Register, Outcome::Ack) => {
                register_acked.insert(o.port);
            }
            // The server said it did not apply it: it must not be there.
            (Kind::Register, Outcome::Refused(_, t)) if not_applied(t) => {
                absent.insert(o.port);
            }
            // Nor did this delete happen.
            (Kind::Deregister, Outcome::Refused(_, t)) if not_applied(t) => {}
            (Kind::Deregister, Outcome::Ack) => {
                absent.insert(o.port);
                deregister_tried.insert(o.port);
            }
            (Kind::Deregister, _) => {
                deregister_tried.insert(o.port);
            }
            _ => {}
        }
    }
    // Ports are never registered twice, so a port registered and never
    // (maybe) deleted must be there.
    for p in register_acked {
        if !deregister_tried.contains(&p) {
            present.insert(p);
        }
    }
    (present, absent)
}

/// Whether a refusal promises the write was not applied (the texts of
/// `cluster/raft/client.rs` and `mod.rs`: no leader, a former leader, a
/// leader never reached), rather than "not acknowledged", which may still
/// commit.
pub fn not_applied(text: &str) -> bool {
    text.contains("was not applied")
}

/// The share of majority-side writes sent while no fault began or ended
/// that were acknowledged, with the count (`None` when there were none).
pub fn majority_share(ops: &[Op]) -> Option<(f64, usize)> {
    let steady: Vec<&Op> = ops.iter().filter(|o| o.majority_steady).collect();
    let acked = steady
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Ack))
        .count();
    (!steady.is_empty()).then(|| (acked as f64 / steady.len() as f64, steady.len()))
}

/// Rejoins that explain more "unknown instance" answers than one rejoin
/// can: each as (node, rejoined at, count).
pub fn over_tolerated(tolerated: &[(usize, u64, String)]) -> Vec<(usize, u64, usize)> {
    let mut per: BTreeMap<(usize, u64), usize> = BTreeMap::new();
    for (node, at, _) in tolerated {
        *per.entry((*node, *at)).or_default() += 1;
    }
    per.into_iter()
        .filter(|(_, n)| *n > TOLERATED_PER_REJOIN)
        .map(|((node, at), n)| (node, at, n))
        .collect()
}

/// Whether a refusal says why, in words a client can act on.
pub fn clear_refusal(status: u16, text: &str) -> bool {
    status >= 400
        && [
            "majority",
            "leader",
            "Raft",
            "not committed",
            "try again",
            "retry",
        ]
        .iter()
        .any(|w| text.contains(w))
}
