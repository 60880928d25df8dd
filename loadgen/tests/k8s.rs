//! The Kubernetes example (`examples/k8s/loadgen-segments.yaml`, issue 36 item 7),
//! run here as Kubernetes would run it, on one machine: the manifest rendered as
//! its header says (envsubst of the variables it names), parsed as YAML, the
//! Indexed Job checked for one pod a segment, its container's command run as two
//! processes (the real `loadgen` binary, JOB_COMPLETION_INDEX 0 and 1, the
//! container's environment only, its volumes as local directories) against one
//! registry on loopback, then the merge Job's command. The merge step's `report`
//! calls are recorded by a stand-in and then run through `reports::cli`, the code
//! of the `report` binary (which this package cannot build); the merged report's
//! histograms must be exactly the sums of the segments'.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use reports::Report;
use serde::Deserialize as _;
use serde_json::Value;

const MANIFEST: &str = include_str!("../../examples/k8s/loadgen-segments.yaml");

const PROFILE: &str = r#"
name = "k8s"
[fleet]
services = 6
instances = 40
subscribers = 4
watched_services = 2
beat_interval = "1s"
[load]
rate = 200
[steady]
duration = "1s"
query_rate = 40
[drain]
enabled = false
[subscribers]
poll_interval = "1s"
[connections]
count = 2
[generator]
workers = 1
settle_timeout = "10s"
"#;

/// The variables the header's `envsubst '${A} ${B} ...'` line names.
fn envsubst_names(manifest: &str) -> Vec<String> {
    let line = manifest
        .lines()
        .find(|l| {
            l.trim_start_matches('#')
                .trim_start()
                .starts_with("envsubst '")
        })
        .expect("the header shows the envsubst command");
    let list = line.split('\'').nth(1).expect("a quoted variable list");
    list.split_whitespace()
        .map(|v| {
            v.strip_prefix("${")
                .and_then(|v| v.strip_suffix('}'))
                .unwrap_or_else(|| panic!("{v} is not ${{NAME}}"))
                .to_owned()
        })
        .collect()
}

/// What `envsubst '${A} ...'` makes of the manifest: each named variable's
/// `${NAME}` replaced. The names must be exactly `vars`' and appear nowhere as a
/// bare `$NAME` (which envsubst would replace too, inside the scripts).
fn render(manifest: &str, vars: &BTreeMap<&str, String>) -> String {
    let names = envsubst_names(manifest);
    let given: Vec<&str> = vars.keys().copied().collect();
    let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    assert_eq!(sorted, given, "the variables the header names");
    let mut out = manifest.to_owned();
    for name in &names {
        let bare = format!("${name}");
        let bare_uses = out.match_indices(&bare).filter(|(i, _)| {
            let next = out[i + bare.len()..].chars().next();
            !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        assert_eq!(bare_uses.count(), 0, "{bare} would be replaced in a script");
        out = out.replace(&format!("${{{name}}}"), &vars[name.as_str()]);
    }
    assert!(
        !out.contains("${"),
        "a variable the header does not name is left"
    );
    out
}

/// Every YAML document of the manifest, as JSON values.
fn documents(text: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// A pod's volumes as local directories: a ConfigMap's data written out, a
/// claim an empty directory shared by every pod (as ReadWriteMany is).
fn volumes(docs: &[Value], pod: &Value, dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut mounts = BTreeMap::new();
    let container = &pod["containers"][0];
    for mount in container["volumeMounts"].as_array().expect("volume mounts") {
        let name = mount["name"].as_str().unwrap();
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .expect("each mount's volume");
        let local = if let Some(map) = volume["configMap"]["name"].as_str() {
            let local = dir.join("configmaps").join(map);
            std::fs::create_dir_all(&local).unwrap();
            let data = find(docs, "ConfigMap", map)["data"].as_object().unwrap();
            for (file, text) in data {
                std::fs::write(local.join(file), text.as_str().unwrap()).unwrap();
            }
            local
        } else {
            let claim = volume["persistentVolumeClaim"]["claimName"]
                .as_str()
                .unwrap();
            let pvc = find(docs, "PersistentVolumeClaim", claim);
            assert_eq!(pvc["spec"]["accessModes"][0], "ReadWriteMany");
            let local = dir.join("claims").join(claim);
            std::fs::create_dir_all(&local).unwrap();
            local
        };
        mounts.insert(mount["mountPath"].as_str().unwrap().to_owned(), local);
    }
    mounts
}

/// `text` with a leading mount path replaced by its local directory.
fn local(text: &str, mounts: &BTreeMap<String, PathBuf>) -> String {
    for (path, dir) in mounts {
        if let Some(rest) = text.strip_prefix(path.as_str()) {
            return format!("{}{rest}", dir.display());
        }
    }
    text.to_owned()
}

/// The pod's container as a local process: its command, its environment alone
/// (plus `extra`), `bin` first on PATH.
fn container(pod: &Value, mounts: &BTreeMap<String, PathBuf>, bin: &Path) -> Command {
    let c = &pod["containers"][0];
    let argv: Vec<String> = c["command"]
        .as_array()
        .expect("a command")
        .iter()
        .map(|a| local(a.as_str().unwrap(), mounts))
        .collect();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()));
    for e in c["env"].as_array().expect("env") {
        let value = local(e["value"].as_str().expect("a literal value"), mounts);
        cmd.env(e["name"].as_str().unwrap(), value);
    }
    cmd
}

/// `loadgen` (the binary under test) and a `report` that records its
/// arguments, one call a line, for [`replay`].
fn binaries(dir: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_loadgen"), bin.join("loadgen")).unwrap();
    let record = dir.join("report-calls");
    let stand_in = format!(
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\t' \"$a\"; done >>'{}'\necho >>'{}'\n",
        record.display(),
        record.display()
    );
    std::fs::write(bin.join("report"), stand_in).unwrap();
    std::fs::set_permissions(bin.join("report"), std::fs::Permissions::from_mode(0o755)).unwrap();
    (bin, record)
}

/// Runs the recorded `report` calls through the `report` binary's code, in order.
fn replay(record: &Path) -> Vec<Vec<String>> {
    let calls: Vec<Vec<String>> = std::fs::read_to_string(record)
        .expect("the merge step ran report")
        .lines()
        .map(|l| {
            l.trim_end_matches('\t')
                .split('\t')
                .map(str::to_owned)
                .collect()
        })
        .collect();
    for call in &calls {
        let argv = std::iter::once("report".to_owned()).chain(call.iter().cloned());
        assert_eq!(reports::cli::status(argv), 0, "report {call:?}");
    }
    calls
}

fn registry() -> registry_server::Embedded {
    use clap::Parser as _;
    let mut config = registry_server::Config::parse_from(["registry"]);
    config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.udp_listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.workers = 1;
    registry_server::Embedded::start(config).unwrap()
}

/// The merged report holds exactly what the segments' hold, added up.
fn assert_merged_exactly(merged: &Report, segments: &[Report]) {
    assert_eq!(merged.segment, None, "the merge is the whole run");
    assert!(!merged.operations.is_empty());
    for op in &merged.operations {
        let parts: Vec<_> = segments
            .iter()
            .filter_map(|s| s.operation(&op.name))
            .collect();
        let sum = |f: fn(&reports::Operation) -> u64| parts.iter().map(|p| f(p)).sum::<u64>();
        assert_eq!(op.count, sum(|o| o.count), "{} count", op.name);
        assert_eq!(op.errors, sum(|o| o.errors), "{} errors", op.name);
        for block in ["corrected", "uncorrected"] {
            let of = |o: &reports::Operation| match block {
                "corrected" => o.corrected.clone(),
                _ => o.uncorrected.clone(),
            };
            let mut added = reports::new_histogram();
            for p in &parts {
                added.add(of(p).histogram().unwrap()).unwrap();
            }
            let got = of(op).histogram().unwrap();
            assert_eq!(got.len(), added.len(), "{} {block} count", op.name);
            assert_eq!(of(op).summary.count, added.len(), "{} {block}", op.name);
            assert!(
                got == added,
                "{} {block}: the sum of the segments'",
                op.name
            );
        }
    }
    let registered: u64 = segments
        .iter()
        .map(|s| s.operation("register").unwrap().count)
        .sum();
    assert_eq!(
        registered, 40,
        "the segments together register the fleet once"
    );
}

#[test]
fn the_indexed_job_runs_as_two_local_segments_merged_exactly() {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("k8s-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("k8s.toml"), PROFILE).unwrap();
    let server = registry();
    let start = SystemTime::now() + Duration::from_secs(4);
    let vars = BTreeMap::from([
        ("SEGMENTS", "2".to_owned()),
        ("RUN", "run-test".to_owned()),
        ("IMAGE", "loadgen:test".to_owned()),
        ("TARGET", format!("http://{}", server.http_addr)),
        ("PROFILE", dir.join("k8s.toml").display().to_string()),
        ("START_AT", reports::rfc3339_utc(start)),
    ]);
    let docs = documents(&render(MANIFEST, &vars));
    let job = find(&docs, "Job", "loadgen-run-test");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(job["spec"]["completions"], 2);
    assert_eq!(job["spec"]["parallelism"], 2);
    let pod = &job["spec"]["template"]["spec"];
    let mounts = volumes(&docs, pod, &dir);
    let (bin, record) = binaries(&dir);

    let pods: Vec<_> = (0..2)
        .map(|index| {
            let mut cmd = container(pod, &mounts, &bin);
            cmd.env("JOB_COMPLETION_INDEX", index.to_string());
            cmd.current_dir(&dir).spawn().expect("start a segment")
        })
        .collect();
    let codes: Vec<i32> = pods
        .into_iter()
        .map(|mut p| p.wait().unwrap().code().expect("exited"))
        .collect();
    // 4 (the generator fell behind) still leaves a report: a shared 2-core
    // machine may do that to a segment; the merge must say so in its exit code.
    for code in &codes {
        assert!([0, 4].contains(code), "segment exit codes {codes:?}");
    }

    let merge = find(&docs, "Job", "loadgen-merge-run-test");
    let merge_pod = &merge["spec"]["template"]["spec"];
    let merge_mounts = volumes(&docs, merge_pod, &dir);
    let out = container(merge_pod, &merge_mounts, &bin)
        .current_dir(&dir)
        .output()
        .unwrap();
    let expected = codes.iter().copied().find(|c| *c != 0).unwrap_or(0);
    assert_eq!(
        out.status.code(),
        Some(expected),
        "merge step: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls = replay(&record);
    assert_eq!(calls[0][0], "merge", "{calls:?}");

    let run_dir = merge_pod["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "RUN_DIR")
        .and_then(|e| e["value"].as_str())
        .map(|v| PathBuf::from(local(v, &merge_mounts)))
        .expect("the merge step's RUN_DIR");
    let segments: Vec<Report> = (1..=2)
        .map(|i| {
            let seg = run_dir.join(format!("segment-{i}"));
            let json = std::fs::read_dir(&seg)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| p.extension().is_some_and(|x| x == "json"))
                .expect("a segment's report");
            Report::load(json).unwrap()
        })
        .collect();
    assert_eq!(segments[0].segment.as_deref(), Some("1/2"));
    assert_eq!(segments[1].segment.as_deref(), Some("2/2"));
    let merged = Report::load(run_dir.join("merged.json")).expect("the merged report");
    reports::validate_against_schema(&serde_json::to_value(&merged).unwrap()).unwrap();
    assert_merged_exactly(&merged, &segments);
    let v = merged.verification.as_ref().expect("verified");
    assert!(v.ok, "verification: {}", v.detail);
    server.stop().unwrap();
}
