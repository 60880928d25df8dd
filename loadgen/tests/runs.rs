//! Every integration test of loadgen, as one test binary: each file under
//! `tests/` is a module of it, and the shared servers (`support::echo`,
//! `support::two_servers`) are compiled once.
//!
//! Why one binary: each test binary compiled its own copy of the embedded
//! registry's and the clients' generics and linked ~70 MB; a dozen of them
//! were a large share of CI's cold build on 2 cores. Run one file's tests
//! with `cargo test -p loadgen --test runs grpc_fleet::`.

mod support {
    pub mod echo;
    pub mod nodes;
    pub mod two_servers;
}

mod bench_http;
mod capacity;
mod cluster_targets;
mod embedded;
mod failing_server;
mod fault;
mod footprint;
mod grpc_failover;
mod grpc_fleet;
mod k8s;
mod real_client_payloads;
mod segments;
mod send_lag;
mod v3_fleet;
