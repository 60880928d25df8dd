//! Every integration test of the server, as one test binary: each file under
//! `tests/` is a module of it, and the shared set-up (`binary`, `common`,
//! `cluster_support`, `chaos_support`, `grpc_client`) is compiled once.
//!
//! Why one binary: each test binary compiled the shared modules and its own
//! copies of the client generics (reqwest, tonic, nacos-sdk) again and linked
//! ~60 MB; thirty of them were a large share of CI's cold build on 2 cores.
//! Run one file's tests with `cargo test -p registry-server --test server raft::`.

mod binary;
mod chaos_support;
mod cluster_support;
mod common;
mod grpc_client;

mod auth;
mod bad_input;
mod chaos;
mod ci_recipe;
mod cluster;
mod cluster_grpc;
mod cluster_grpc_random;
mod cluster_namespaces;
mod cluster_readiness;
mod cluster_subscribers;
mod compat;
mod compat_admin;
mod compat_grpc;
mod config_file;
mod console;
mod dns;
mod durability;
mod full_disk;
mod generations;
mod grpc;
mod health;
mod health_mysql;
mod http_api;
mod membership;
mod module_graph;
mod overload;
mod push;
mod raft;
mod raft_random;
mod slow_clients;
mod smoke;
mod users_cli;
mod write_path;
