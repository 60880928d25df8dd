//! `--config registry.toml` through the real binary: every flag a key of a
//! group, flags and `REGISTRY_*` variables over the file over defaults,
//! `registry config print` naming each value's origin (and printing a file
//! that starts the same server), bad keys and values refused at start with
//! the key and the reason, and a 3-node Raft cluster started from files made
//! of `examples/registry.toml`.

use crate::binary;
use crate::chaos_support;
use crate::cluster_support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use chaos_support::netns::Net;
use chaos_support::NsNode;
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

/// The one line a refused start prints, checked: exit 2, nothing served,
/// the flag and address that are exposed, and both ways out.
fn assert_refused(out: &Output, listener: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{listener}: {}", text(out));
    assert!(out.stdout.is_empty(), "{listener}: {}", text(out));
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for w in [
        listener,
        "not loopback",
        "--auth-users",
        "--allow-unauthenticated",
    ] {
        assert!(err.contains(w), "{listener}: stderr lacks {w:?}: {err}");
    }
}

// Nacos 3 requires a login for its admin and console APIs out of the box
// (distribution/conf/application.properties: nacos.core.auth.admin.enabled
// and nacos.core.auth.console.enabled are true; NacosServerAuthConfig.java
// defaults them to true). Ours keeps auth off on loopback and refuses to
// serve anything else open unless told so.
#[test]
fn an_exposed_listener_without_auth_is_refused_in_one_line() {
    let lo = [
        "--udp-listen",
        "127.0.0.1:0",
        "--grpc-listen",
        "127.0.0.1:0",
    ];
    let cases: &[(&[&str], &str)] = &[
        (&["--listen", "0.0.0.0:0"], "--listen 0.0.0.0:0"),
        (&["--listen", "[::]:0"], "--listen [::]:0"),
        (&["--listen", "192.0.2.7:0"], "--listen 192.0.2.7:0"),
    ];
    for (args, listener) in cases {
        let mut all: Vec<&str> = args.to_vec();
        all.extend_from_slice(&lo);
        assert_refused(&registry(&all, &[]), listener);
    }
    // gRPC and UDP listeners count too, and so does the gRPC port derived
    // from an exposed HTTP address.
    let http = ["--listen", "127.0.0.1:0"];
    let out = registry(
        &[
            http[0],
            http[1],
            "--grpc-listen",
            "0.0.0.0:0",
            "--udp-listen",
            "127.0.0.1:0",
        ],
        &[],
    );
    assert_refused(&out, "--grpc-listen 0.0.0.0:0");
    let out = registry(
        &[
            http[0],
            http[1],
            "--grpc-listen",
            "127.0.0.1:0",
            "--udp-listen",
            "0.0.0.0:0",
        ],
        &[],
    );
    assert_refused(&out, "--udp-listen 0.0.0.0:0");
    // From the environment and from the file; the file's key is named.
    let out = registry(&lo, &[("REGISTRY_LISTEN", "0.0.0.0:0")]);
    assert_refused(&out, "--listen 0.0.0.0:0");
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "open.toml",
        "[listen]\nhttp = \"0.0.0.0:0\"\nudp = \"127.0.0.1:0\"\ngrpc = \"127.0.0.1:0\"\n",
    );
    let out = registry(&["--config", file.to_str().unwrap()], &[]);
    assert_refused(&out, "--listen 0.0.0.0:0");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("listen.http"),
        "{}",
        text(&out)
    );
    // `config print` validates the same way, and accepts the explicit
    // choice from a flag, a variable or the file's auth.allow_unauthenticated.
    let f = file.to_str().unwrap();
    let by_flag = registry(
        &["config", "print", "--config", f, "--allow-unauthenticated"],
        &[],
    );
    let by_env = registry(
        &["config", "print", "--config", f],
        &[("REGISTRY_ALLOW_UNAUTHENTICATED", "true")],
    );
    for (out, origin) in [(by_flag, "# flag"), (by_env, "# env")] {
        assert!(out.status.success(), "{}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = printed(&stdout, "auth", "allow_unauthenticated");
        assert!(
            line.starts_with("allow_unauthenticated = \"true\"") && line.contains(origin),
            "{line}"
        );
    }
    let open = write(
        dir.path(),
        "open-on-purpose.toml",
        "[listen]\nhttp = \"0.0.0.0:0\"\nudp = \"127.0.0.1:0\"\ngrpc = \"127.0.0.1:0\"\n\
         [auth]\nallow_unauthenticated = true\n",
    );
    let out = registry(
        &["config", "print", "--config", open.to_str().unwrap()],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
}

/// Starts the binary in its own network namespace bound to every address
/// there (the namespace's only interfaces are its loopback and the test's
/// link), and returns what an unauthenticated list answers over the link.
async fn start_exposed(net: &Net, dir: &Path, name: &str, extra: &[&str]) -> u16 {
    let port = 8848;
    let mut args: Vec<String> = [
        "--listen",
        &format!("0.0.0.0:{port}"),
        "--udp-listen",
        "0.0.0.0:0",
        "--grpc-listen",
        &format!("0.0.0.0:{}", port + 1000),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let addr = std::net::SocketAddr::new(std::net::IpAddr::V4(net.addr(0)), port);
    let log = dir.join(format!("{name}.log"));
    let mut node = NsNode::start(net.ns(0), addr, args, &log).await;
    let answer = until_answer(addr).await;
    node.kill9().await;
    answer
}

async fn until_answer(addr: std::net::SocketAddr) -> u16 {
    let target = "/nacos/v1/ns/instance/list?serviceName=exposed";
    for _ in 0..50 {
        if let Some((status, _)) = chaos_support::call(addr, Method::Get, target).await {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no answer from {addr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exposed_listener_starts_with_the_flag_or_with_auth() {
    // Loopback needs neither.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("loopback.log");
    let reg = binary::Registry::start_bare(
        &["--listen", "127.0.0.1:0", "--udp-listen", "127.0.0.1:0"],
        &[],
        &log,
    )
    .await;
    let (status, _) = reg
        .call(Method::Get, "/nacos/v1/ns/instance/list?serviceName=a")
        .await;
    assert_eq!(status, 200, "loopback serves open, as before");
    reg.terminate().await;
    // Anything else is bound only inside a namespace this test creates.
    let net = match Net::create(1) {
        Ok(n) => n,
        Err(why) if std::env::var_os("REGISTRY_TESTS_UNPRIVILEGED").is_some() => {
            eprintln!("SKIPPED (REGISTRY_TESTS_UNPRIVILEGED): binding off loopback needs a network namespace: {why}");
            return;
        }
        Err(why) => panic!(
            "this test needs a network namespace (root) and cannot create one here: {why}; \
             set REGISTRY_TESTS_UNPRIVILEGED=1 to skip it"
        ),
    };
    let open = start_exposed(&net, dir.path(), "open", &["--allow-unauthenticated"]).await;
    assert_eq!(open, 200, "served open, as the operator asked");
    let users = dir.path().join("users");
    let hash = registry_server::auth::hash_password(
        "a long test password",
        registry_server::auth::MIN_ITERATIONS,
    )
    .expect("hash");
    std::fs::write(&users, format!("alice:{hash}\n")).unwrap();
    let users = users.to_str().unwrap().to_owned();
    let guarded = start_exposed(&net, dir.path(), "auth", &["--auth-users", &users]).await;
    // Nacos's AuthFilter answers 403 to a call without a token.
    assert_eq!(guarded, 403, "served, and a call without a token refused");
}
