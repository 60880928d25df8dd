//! `--config registry.toml` through the real binary: every flag a key of a
//! group, flags and `REGISTRY_*` variables over the file over defaults,
//! `registry config print` naming each value's origin (and printing a file
//! that starts the same server), bad keys and values refused at start with
//! the key and the reason, and a 3-node Raft cluster started from files made
//! of `examples/registry.toml`.

use crate::binary;
use crate::cluster_support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use cluster_support::{free_addrs, until, Node};
use registry_proto::http1::Method;

fn registry(args: &[&str], env: &[(&str, &str)]) -> Output {
    // A clean environment: no REGISTRY_* of the caller leaks in.
    std::process::Command::new(env!("CARGO_BIN_EXE_registry"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("run registry")
}

fn text(out: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).expect("write config");
    p
}

/// The printed line of `group.key`, found under its `[group]` header.
fn printed<'a>(out: &'a str, group: &str, key: &str) -> &'a str {
    let header = format!("[{group}]");
    let mut in_group = false;
    for line in out.lines() {
        if line.starts_with('[') {
            in_group = line == header;
        } else if in_group
            && line
                .trim_start_matches("# ")
                .starts_with(&format!("{key} = "))
        {
            return line;
        }
    }
    panic!("no {group}.{key} in:\n{out}")
}

#[test]
fn config_print_names_where_each_value_came_from_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "registry.toml",
        "[listen]\nhttp = \"127.0.0.1:0\"\n\
         [limits]\nmax_connections = 123\nmax_inflight = 50\n\
         [raft]\nheartbeat_ms = 150\n\
         [cluster]\nmembers = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\n",
    );
    let out = registry(
        &[
            "config",
            "print",
            "--config",
            file.to_str().unwrap(),
            "--max-inflight",
            "60",
        ],
        &[("REGISTRY_RAFT_HEARTBEAT_MS", "170")],
    );
    assert!(out.status.success(), "{}", text(&out));
    let s = String::from_utf8(out.stdout).unwrap();
    let cases = [
        (
            "listen",
            "http",
            "http = \"127.0.0.1:0\"  # file (--listen, REGISTRY_LISTEN)",
        ),
        ("limits", "max_connections", "max_connections = 123  # file"),
        ("limits", "max_inflight", "max_inflight = 60  # flag"),
        ("raft", "heartbeat_ms", "heartbeat_ms = 170  # env"),
        ("server", "shards", "shards = 64  # default"),
        ("data", "dir", "# dir = unset  # unset"),
        (
            "cluster",
            "members",
            "members = [\"127.0.0.1:1\", \"127.0.0.1:2\"]  # file",
        ),
    ];
    for (group, key, want) in cases {
        let line = printed(&s, group, key);
        assert!(
            line.starts_with(want),
            "{group}.{key}: {line:?}, want {want:?}"
        );
    }
    // The printout is itself a config file giving the same settings.
    let again = write(dir.path(), "printed.toml", &s);
    let out2 = registry(
        &["config", "print", "--config", again.to_str().unwrap()],
        &[],
    );
    assert!(out2.status.success(), "{}", text(&out2));
    let s2 = String::from_utf8(out2.stdout).unwrap();
    for (group, key, value) in [
        ("limits", "max_inflight", "max_inflight = 60  # file"),
        ("raft", "heartbeat_ms", "heartbeat_ms = 170  # file"),
        ("server", "shards", "shards = 64  # file"),
    ] {
        let line = printed(&s2, group, key);
        assert!(line.starts_with(value), "{line:?}");
    }
}

#[test]
fn bad_files_are_refused_at_start_with_the_key_and_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str])] = &[
        (
            "[limits]\nmax_conections = 5\n",
            &["unknown key limits.max_conections", "max_connections"],
        ),
        (
            "[raft]\nelection_timeout_ms = \"soon\"\n",
            &["raft.election_timeout_ms", "invalid value 'soon'"],
        ),
        (
            "[raft]\nhttp = \"127.0.0.1:1\"\n",
            &["unknown key raft.http", "did you mean listen.http"],
        ),
        (
            "[storage]\ndir = \"x\"\n",
            &["unknown group [storage]", "raft"],
        ),
        (
            "[limits]\nmax_connections = 0\n",
            &["must be positive", "limits.max_connections"],
        ),
        (
            "[listen]\nhttp = \"localhost\"\n",
            &["listen.http", "invalid value 'localhost'"],
        ),
        (
            "[limits]\nmax_inflight = [1, {a = 1}]\n",
            &["limits.max_inflight", "expected a string"],
        ),
        ("listen = \"127.0.0.1:0\"\n", &["`listen` must be a table"]),
        ("[limits\n", &["not valid TOML"]),
    ];
    for (i, (body, wanted)) in cases.iter().enumerate() {
        let file = write(dir.path(), &format!("bad{i}.toml"), body);
        let out = registry(&["--config", file.to_str().unwrap()], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{body:?}: {}", text(&out));
        assert!(
            out.stdout.is_empty(),
            "{body:?} must not serve: {}",
            text(&out)
        );
        for w in *wanted {
            assert!(err.contains(w), "{body:?}: stderr lacks {w:?}: {err}");
        }
    }
    let out = registry(
        &[
            "--config",
            dir.path().join("missing.toml").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing.toml"),
        "{}",
        text(&out)
    );
    // The example production file is accepted as it stands.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/registry.toml");
    let out = registry(
        &["config", "print", "--config", example.to_str().unwrap()],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_values_reach_the_server_and_variables_override_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "registry.toml",
        "[listen]\nhttp = \"127.0.0.1:9\"\nudp = \"127.0.0.1:0\"\ngrpc = \"127.0.0.1:0\"\n\
         [limits]\nmax_url_bytes = 256\n",
    );
    // The variable moves the node off the file's (unbindable) port.
    let log = dir.path().join("node.log");
    let reg = binary::Registry::start_bare(
        &["--config", file.to_str().unwrap()],
        &[("REGISTRY_LISTEN", "127.0.0.1:0")],
        &log,
    )
    .await;
    let short = "/nacos/v1/ns/instance/list?serviceName=a";
    assert_eq!(reg.call(Method::Get, short).await.0, 200);
    let long = format!("/nacos/v1/ns/instance/list?serviceName={}", "a".repeat(300));
    let (status, _) = reg.call(Method::Get, &long).await;
    assert_eq!(status, 414, "the file's 256-byte URL limit is in force");
}

/// `examples/registry.toml` with this test's loopback addresses, data dir
/// and short Raft timings; auth and the secret are left out so the test can
/// talk to it plainly.
fn node_file(
    me: usize,
    http: &[std::net::SocketAddr],
    grpc: std::net::SocketAddr,
    data: &Path,
) -> String {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/registry.toml");
    let mut t: toml::Table = std::fs::read_to_string(example).unwrap().parse().unwrap();
    let set = |t: &mut toml::Table, group: &str, key: &str, v: toml::Value| {
        t.get_mut(group)
            .and_then(|g| g.as_table_mut())
            .expect(group)
            .insert(key.into(), v);
    };
    let s = |v: &str| toml::Value::String(v.to_owned());
    set(&mut t, "listen", "http", s(&http[me].to_string()));
    set(&mut t, "listen", "grpc", s(&grpc.to_string()));
    set(&mut t, "listen", "udp", s("127.0.0.1:0"));
    let members = http.iter().map(|a| s(&a.to_string())).collect();
    set(&mut t, "cluster", "members", toml::Value::Array(members));
    set(&mut t, "cluster", "advertise", s(&http[me].to_string()));
    set(
        &mut t,
        "cluster",
        "probe_interval_ms",
        toml::Value::Integer(200),
    );
    t["cluster"].as_table_mut().unwrap().remove("secret_file");
    t.remove("auth");
    set(&mut t, "data", "dir", s(data.to_str().unwrap()));
    set(&mut t, "server", "log_format", s("text"));
    set(&mut t, "server", "workers", toml::Value::Integer(1));
    set(
        &mut t,
        "raft",
        "election_timeout_ms",
        toml::Value::Integer(800),
    );
    set(&mut t, "raft", "heartbeat_ms", toml::Value::Integer(100));
    t.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_start_from_example_style_files_and_replicate() {
    let dir = tempfile::tempdir().unwrap();
    let http = free_addrs(3);
    let grpc = free_addrs(3);
    let mut nodes = Vec::new();
    for i in 0..3 {
        let data = dir.path().join(format!("data{i}"));
        let file = write(
            dir.path(),
            &format!("node{i}.toml"),
            &node_file(i, &http, grpc[i], &data),
        );
        let log = dir.path().join(format!("node{i}.log"));
        nodes.push(Node::start_from_config(http[i], grpc[i], &file, &log).await);
    }
    until(
        Duration::from_secs(30),
        "every node ready with 3 members UP",
        || async {
            for n in &nodes {
                let m = n.members().await;
                if !n.ready().await || m.len() != 3 || m.iter().any(|(_, s)| s != "UP") {
                    return false;
                }
            }
            true
        },
    )
    .await;
    let target =
        "/nacos/v1/ns/instance?serviceName=from-files&ip=127.0.0.1&port=7001&ephemeral=false";
    until(
        Duration::from_secs(20),
        "a persistent write acknowledged",
        || async {
            matches!(nodes[0].try_call(Method::Post, target).await, Some((200, b)) if b == "ok")
        },
    )
    .await;
    until(
        Duration::from_secs(10),
        "the write on every node",
        || async {
            for n in &nodes {
                if n.ports("from-files").await != Some(vec![7001]) {
                    return false;
                }
            }
            true
        },
    )
    .await;
}
