//! An open-loop load generator for Nacos-1.x-compatible service registries.
//!
//! `loadgen` simulates hundreds of thousands of heartbeating instances and UDP push
//! subscribers against one server (an embedded registry by default, or any
//! `--target`), on a fixed schedule that does not wait for responses (wrk2's model):
//! every operation has an intended send time, latency is measured from it (corrected
//! for coordinated omission) and from the actual send (uncorrected), and the
//! generator's own lag is recorded so a run knows when it, not the server, was the
//! bottleneck. Results are HdrHistograms per worker, merged losslessly into a
//! versioned JSON report (`reports` crate) and a 1 s interval `.hlog`.
//!
//! # Layout
//!
//! - [`profile`]: load profiles (TOML, built-ins compiled in), CLI overrides, validation.
//! - [`plan`]: the phases of a run (load, steady, settle, drain) and their rates.
//! - [`schedule`]: the run clock, open-loop intended send times ([`schedule::Pacer`])
//!   and sending on time ([`schedule::wait_until`]).
//! - [`wheel`]: the hashed timing wheel that holds the simulated clients.
//! - [`fleet`]: instances, subscribers, naming, change logs and expected sets.
//! - [`template`]: request bytes built once, with holes for the service number and IP.
//! - [`dialect`]: the HTTP fleet's API generations (1.x, the v3 client API): each
//!   operation's request and what its answer means.
//! - [`conn`]: keep-alive, pipelined HTTP/1.1 client connections over `127.0.0.x`.
//! - [`subscriber`]: UDP push receivers: decode, ack, fingerprint.
//! - [`grpc`]: the Nacos 2.x fleet (`protocol = "grpc"`): a worker's lane is one
//!   simulated client's gRPC connection ([`grpc::lane`]), pushes come on its
//!   stream, and its requests ([`grpc::request`]) are the real clients' field for
//!   field.
//! - [`worker`]: one thread per core driving its share of the fleet, whichever
//!   protocol it speaks: the one driver of every fleet.
//! - [`recorder`]: per-worker histograms and counters.
//! - [`target`]: the server under test (embedded or external) and the runner's client.
//! - [`verify`]: end-of-phase checks against the server.
//! - [`threshold`]: `beat.p99<5ms`-style gates.
//! - [`output`]: progress bar, timeline, interval log and terminal summary.
//! - [`capacity`]: `loadgen capacity`, the highest multiple of a profile within SLOs.
//! - [`bench`]: raw HTTP generation (`loadgen bench-http`) for efficiency comparisons.
//! - [`metrics`]: `--metrics-listen`, loadgen's own Prometheus metrics while it runs.
//! - [`host`]: file-descriptor limit and `/proc` readings.
//! - [`jitter`]: the machine's own timer wake-up lateness, measured during the run.
//! - [`segment`]: `--segment I/N`, one slice of a profile for one of N processes.
//! - [`start`]: `--start-at`, when the load begins.
//! - [`cli`]: the command line.
//!
//! [`run`] executes one profile and returns its report; [`exit_code`] maps a report
//! to the documented exit codes.

// Denied, not forbidden: `schedule::Waiter` registers its timerfd with tokio's
// reactor, which only an `unsafe` call can do (its one allowance says why it is sound).
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod bench;
pub mod capacity;
pub mod cli;
pub mod conn;
pub mod dialect;
pub mod fault;
pub mod fleet;
pub mod grpc;
pub mod host;
pub mod jitter;
pub mod metrics;
pub mod output;
pub mod plan;
pub mod profile;
pub mod recorder;
pub mod schedule;
pub mod segment;
pub mod start;
pub mod subscriber;
pub mod target;
pub mod template;
pub mod threshold;
pub mod verify;
pub mod wheel;
pub mod worker;

mod runner;

pub use runner::{exit_code, run, RunConfig, UsageError};

/// Exit codes of `loadgen` (documented in `--help`).
pub mod exit {
    /// The run completed and every check passed.
    pub const OK: u8 = 0;
    /// The run could not be carried out (server unreachable, I/O error, …).
    pub const ERROR: u8 = 1;
    /// Bad command line or profile.
    pub const USAGE: u8 = 2;
    /// At least one threshold failed.
    pub const THRESHOLDS: u8 = 3;
    /// The generator fell behind its own schedule (latencies partly measure loadgen), or
    /// skipped slots of it (the planned load was not offered): the run is not valid.
    pub const FELL_BEHIND: u8 = 4;
    /// The server's final state differs from what loadgen registered, or subscribers
    /// did not converge.
    pub const VERIFICATION: u8 = 5;
}
