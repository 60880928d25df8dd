//! The operator's configuration file (`--config registry.toml`) and where
//! each effective setting came from.
//!
//! Every flag of [`Config`] is a key of one group table (`[listen]`,
//! `[limits]`, `[cluster]`, `[raft]`, `[auth]`, ...; [`PLACES`] says which).
//! The file only fills what neither a flag nor a `REGISTRY_*` variable set,
//! so the precedence is flag > environment > file > default. Each file value
//! goes through the flag's own clap parser, so it is checked exactly as the
//! flag would be; an unknown group or key, a value of the wrong shape or one
//! the parser refuses is an error naming the key.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory as _, FromArgMatches as _};

use super::Config;

/// Where each flag lives in the file: `(flag id, group, key)`. A flag added
/// to [`Config`] without a row here is placed in `[server]` under its own
/// name, so it is never unreachable from the file.
pub const PLACES: &[(&str, &str, &str)] = &[
    ("listen", "listen", "http"),
    ("udp_listen", "listen", "udp"),
    ("grpc_listen", "listen", "grpc"),
    ("dns_listen", "listen", "dns"),
    ("dns_domain", "dns", "domain"),
    ("dns_ttl", "dns", "ttl"),
    ("shards", "server", "shards"),
    ("workers", "server", "workers"),
    ("shutdown_grace_ms", "server", "shutdown_grace_ms"),
    ("log_format", "server", "log_format"),
    ("beat_interval_ms", "leases", "beat_interval_ms"),
    ("beat_timeout_ms", "leases", "beat_timeout_ms"),
    ("delete_timeout_ms", "leases", "delete_timeout_ms"),
    ("sweep_interval_ms", "leases", "sweep_interval_ms"),
    ("empty_service_ttl_ms", "leases", "empty_service_ttl_ms"),
    (
        "max_instances_per_service",
        "limits",
        "max_instances_per_service",
    ),
    ("max_services", "limits", "max_services"),
    (
        "namespace_delete_protection",
        "limits",
        "namespace_delete_protection",
    ),
    ("max_connections", "limits", "max_connections"),
    ("max_inflight", "limits", "max_inflight"),
    ("max_url_bytes", "limits", "max_url_bytes"),
    ("max_header_bytes", "limits", "max_header_bytes"),
    ("max_body_bytes", "limits", "max_body_bytes"),
    ("max_metadata_bytes", "limits", "max_metadata_bytes"),
    ("idle_timeout_ms", "limits", "idle_timeout_ms"),
    ("head_timeout_ms", "limits", "head_timeout_ms"),
    ("body_timeout_ms", "limits", "body_timeout_ms"),
    ("write_timeout_ms", "limits", "write_timeout_ms"),
    ("max_buffered_bytes", "limits", "max_buffered_bytes"),
    ("list_cache_bytes", "limits", "list_cache_bytes"),
    ("list_cache_idle_ms", "limits", "list_cache_idle_ms"),
    ("max_subscribers_per_ip", "limits", "max_subscribers_per_ip"),
    ("max_subscribers", "limits", "max_subscribers"),
    ("max_pending_acks", "limits", "max_pending_acks"),
    ("push_window_ms", "push", "window_ms"),
    ("push_ack_timeout_ms", "push", "ack_timeout_ms"),
    ("subscriber_lease_ms", "push", "subscriber_lease_ms"),
    ("grpc_max_body_bytes", "grpc", "max_body_bytes"),
    ("grpc_max_connections", "grpc", "max_connections"),
    ("grpc_max_sockets", "grpc", "max_sockets"),
    (
        "grpc_max_subscriptions_per_connection",
        "grpc",
        "max_subscriptions_per_connection",
    ),
    ("grpc_idle_ms", "grpc", "idle_ms"),
    ("grpc_detect_timeout_ms", "grpc", "detect_timeout_ms"),
    ("data_dir", "data", "dir"),
    ("max_pending_writes", "data", "max_pending_writes"),
    ("max_commit_batch", "data", "max_commit_batch"),
    ("data_cache_bytes", "data", "cache_bytes"),
    ("data_min_free_bytes", "data", "min_free_bytes"),
    ("health_check_interval_ms", "health", "interval_ms"),
    ("health_check_timeout_ms", "health", "timeout_ms"),
    ("health_check_concurrency", "health", "concurrency"),
    ("health_check_threshold", "health", "threshold"),
    ("health_checker", "health", "checker"),
    ("auth_users", "auth", "users"),
    ("allow_unauthenticated", "auth", "allow_unauthenticated"),
    ("auth_token_ttl_secs", "auth", "token_ttl_secs"),
    ("auth_max_logins", "auth", "max_logins"),
    ("members", "cluster", "members"),
    ("members_file", "cluster", "members_file"),
    ("advertise", "cluster", "advertise"),
    ("cluster_join", "cluster", "join"),
    ("cluster_probe_interval_ms", "cluster", "probe_interval_ms"),
    ("cluster_probe_failures", "cluster", "probe_failures"),
    ("cluster_relay_timeout_ms", "cluster", "relay_timeout_ms"),
    ("distro_sync_window_ms", "cluster", "distro_sync_window_ms"),
    (
        "distro_verify_interval_ms",
        "cluster",
        "distro_verify_interval_ms",
    ),
    ("cluster_secret_file", "cluster", "secret_file"),
    (
        "client_expire_grace_ms",
        "cluster",
        "client_expire_grace_ms",
    ),
    (
        "client_verify_interval_ms",
        "cluster",
        "client_verify_interval_ms",
    ),
    ("raft_election_timeout_ms", "raft", "election_timeout_ms"),
    ("raft_heartbeat_ms", "raft", "heartbeat_ms"),
    ("raft_snapshot_logs", "raft", "snapshot_logs"),
    ("raft_write_timeout_ms", "raft", "write_timeout_ms"),
];

/// The flag naming the file itself: not a key of it.
const CONFIG_ID: &str = "config_file";

/// Where an effective setting came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The flag's built-in default.
    Default,
    /// The `--config` file.
    File,
    /// A `REGISTRY_*` environment variable.
    Env,
    /// A command-line flag.
    Flag,
    /// Nothing set it and it has no default.
    Unset,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Default => "default",
            Source::File => "file",
            Source::Env => "env",
            Source::Flag => "flag",
            Source::Unset => "unset",
        })
    }
}

/// One effective setting.
#[derive(Clone, Debug)]
pub struct Setting {
    /// Its group in the file.
    pub group: &'static str,
    /// Its key within the group.
    pub key: &'static str,
    /// The flag, without dashes (`raft-heartbeat-ms`).
    pub flag: String,
    /// Its environment variable.
    pub env: Option<String>,
    /// Its values as given (several for a list), empty when unset.
    pub values: Vec<String>,
    /// Where they came from.
    pub source: Source,
}

/// The effective configuration and the origin of each setting.
#[derive(Debug)]
pub struct Loaded {
    /// The configuration to run with.
    pub config: Config,
    /// Every setting but `--config`, in [`PLACES`] order.
    pub settings: Vec<Setting>,
    /// The file read, if any.
    pub file: Option<PathBuf>,
}

/// Why the configuration could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// A flag or environment variable clap refused (or `--help`): the
    /// caller prints it the clap way and exits with its code.
    Args(clap::Error),
    /// The file is unreadable or holds a bad key or value.
    File(String),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Args(e) => write!(f, "{e}"),
            LoadError::File(m) => f.write_str(m),
        }
    }
}

/// Reads the command line (`args`, program name first), the environment
/// and the `--config` file, and merges them.
///
/// # Errors
/// [`LoadError::Args`] for a bad flag or variable, [`LoadError::File`] for
/// an unreadable file or a bad key or value in it.
pub fn load<I, T>(args: I) -> Result<Loaded, LoadError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut argv: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let first = Config::command()
        .try_get_matches_from(&argv)
        .map_err(LoadError::Args)?;
    let file = first.get_one::<PathBuf>(CONFIG_ID).cloned();
    let mut from_file = Vec::new();
    if let Some(path) = &file {
        for (id, values) in read_file(path)? {
            // A flag or variable wins over the file.
            if matches!(
                first.value_source(id),
                None | Some(ValueSource::DefaultValue)
            ) {
                argv.extend(values.iter().map(|v| flag_arg(id, v)));
                from_file.push(id);
            }
        }
    }
    let matches = Config::command()
        .try_get_matches_from(&argv)
        .map_err(LoadError::Args)?;
    let config = Config::from_arg_matches(&matches).map_err(LoadError::Args)?;
    let settings = settings(&first, &matches, &from_file);
    Ok(Loaded {
        config,
        settings,
        file,
    })
}

/// `--flag=value` for one value (the `=` keeps a value starting with `-`
/// from reading as a flag).
fn flag_arg(id: &str, value: &str) -> OsString {
    format!("--{}={value}", long_of(id)).into()
}

fn long_of(id: &str) -> String {
    Config::command()
        .get_arguments()
        .find(|a| a.get_id() == id)
        .and_then(|a| a.get_long().map(str::to_owned))
        .unwrap_or_else(|| id.replace('_', "-"))
}

/// The file's settings as `(flag id, values)`, each value already checked
/// by its flag's parser.
fn read_file(path: &Path) -> Result<Vec<(&'static str, Vec<String>)>, LoadError> {
    let name = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| LoadError::File(format!("--config {name}: {e}")))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| LoadError::File(format!("--config {name}: not valid TOML: {e}")))?;
    let places = places();
    let mut out = Vec::new();
    for (group, body) in &table {
        let toml::Value::Table(keys) = body else {
            return Err(LoadError::File(format!(
                "--config {name}: `{group}` must be a table such as [{group}]; every setting belongs to a group"
            )));
        };
        if !places.iter().any(|p| p.1 == group) {
            return Err(LoadError::File(format!(
                "--config {name}: unknown group [{group}] (groups: {})",
                group_names(&places).join(", ")
            )));
        }
        for (key, value) in keys {
            let id = id_of(&places, group, key)
                .ok_or_else(|| unknown_key(&name, &places, group, key))?;
            let values = toml_values(value).ok_or_else(|| {
                LoadError::File(format!(
                    "--config {name}: {group}.{key}: expected a string, number, boolean or list of them, got {}",
                    value.type_str()
                ))
            })?;
            for v in &values {
                check_value(id, v).map_err(|why| {
                    LoadError::File(format!("--config {name}: {group}.{key}: {why}"))
                })?;
            }
            out.push((id, values));
        }
    }
    Ok(out)
}

/// Runs one value through its flag's parser alone, so the error names
/// this key and no other.
fn check_value(id: &str, value: &str) -> Result<(), String> {
    let cmd = Config::command();
    match cmd.try_get_matches_from([OsString::from("registry"), flag_arg(id, value)]) {
        Ok(_) => Ok(()),
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            Err(first.trim_start_matches("error: ").to_owned())
        }
    }
}

fn unknown_key(name: &impl fmt::Display, places: &[Place], group: &str, key: &str) -> LoadError {
    let elsewhere: Vec<String> = places
        .iter()
        .filter(|p| p.2 == key || p.0 == key)
        .map(|p| format!("{}.{}", p.1, p.2))
        .collect();
    let hint = if elsewhere.is_empty() {
        let keys: Vec<&str> = places
            .iter()
            .filter(|p| p.1 == group)
            .map(|p| p.2)
            .collect();
        format!("keys of [{group}]: {}", keys.join(", "))
    } else {
        format!("did you mean {}?", elsewhere.join(" or "))
    };
    LoadError::File(format!(
        "--config {name}: unknown key {group}.{key} ({hint})"
    ))
}

/// A TOML value as flag values: scalars as one, arrays as one each.
fn toml_values(value: &toml::Value) -> Option<Vec<String>> {
    match value {
        toml::Value::Array(items) => items.iter().map(scalar).collect::<Option<Vec<String>>>(),
        other => scalar(other).map(|s| vec![s]),
    }
}

fn scalar(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `(flag id, group, key)`, owned where a flag has no [`PLACES`] row.
type Place = (&'static str, &'static str, &'static str);

/// Every flag of [`Config`] but `--config` with its place, in [`PLACES`]
/// order, unplaced flags last under `[server]`.
fn places() -> Vec<Place> {
    let cmd = Config::command();
    let ids: Vec<String> = cmd
        .get_arguments()
        .map(|a| a.get_id().as_str().to_owned())
        .filter(|id| id != CONFIG_ID && id != "help" && id != "version")
        .collect();
    let mut out: Vec<Place> = PLACES
        .iter()
        .copied()
        .filter(|p| ids.iter().any(|id| id == p.0))
        .collect();
    for id in ids {
        if !PLACES.iter().any(|p| p.0 == id) {
            // Leaked once per unplaced flag per load: a handful of bytes,
            // and it keeps `Setting` free of lifetimes.
            let id: &'static str = Box::leak(id.into_boxed_str());
            out.push((id, "server", id));
        }
    }
    out
}

fn group_names(places: &[Place]) -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = Vec::new();
    for p in places {
        if !groups.contains(&p.1) {
            groups.push(p.1);
        }
    }
    groups
}

fn id_of(places: &[Place], group: &str, key: &str) -> Option<&'static str> {
    places
        .iter()
        .find(|p| p.1 == group && p.2 == key)
        .map(|p| p.0)
}

/// Each setting's effective values and origin. `first` is the parse
/// without the file: what it says came from flags or the environment.
fn settings(first: &ArgMatches, merged: &ArgMatches, from_file: &[&str]) -> Vec<Setting> {
    let cmd = Config::command();
    places()
        .into_iter()
        .map(|(id, group, key)| {
            let arg = cmd.get_arguments().find(|a| a.get_id() == id);
            let values: Vec<String> = merged
                .get_raw(id)
                .map(|raw| raw.map(|v| v.to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            let source = if from_file.contains(&id) {
                Source::File
            } else {
                match first.value_source(id) {
                    Some(ValueSource::CommandLine) => Source::Flag,
                    Some(ValueSource::EnvVariable) => Source::Env,
                    Some(ValueSource::DefaultValue) => Source::Default,
                    _ if values.is_empty() => Source::Unset,
                    _ => Source::Default,
                }
            };
            Setting {
                group,
                key,
                flag: long_of(id),
                env: arg.and_then(|a| a.get_env().map(|e| e.to_string_lossy().into_owned())),
                values,
                source,
            }
        })
        .collect()
}

impl Loaded {
    /// The effective configuration as a TOML file that starts the same
    /// server, each line commented with its origin, flag and variable.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Some(f) = &self.file {
            out.push_str(&format!(
                "# effective configuration; file: {}\n",
                f.display()
            ));
        } else {
            out.push_str("# effective configuration; no --config file\n");
        }
        let mut group = "";
        for s in &self.settings {
            if s.group != group {
                group = s.group;
                out.push_str(&format!("\n[{group}]\n"));
            }
            let env = s
                .env
                .as_deref()
                .map(|e| format!(", {e}"))
                .unwrap_or_default();
            let origin = format!("# {} (--{}{env})", s.source, s.flag);
            if s.values.is_empty() {
                out.push_str(&format!("# {} = unset  {origin}\n", s.key));
            } else {
                out.push_str(&format!("{} = {}  {origin}\n", s.key, toml_literal(s)));
            }
        }
        out
    }

    /// The file keys (`group.key`) of the settings the file gave, whose
    /// flag a message names: to point a validation error at the file.
    pub fn file_keys_named_in(&self, message: &str) -> Vec<String> {
        self.settings
            .iter()
            .filter(|s| s.source == Source::File && message.contains(&format!("--{}", s.flag)))
            .map(|s| format!("{}.{}", s.group, s.key))
            .collect()
    }
}

/// A setting as a TOML value: numbers bare, anything else a string, a
/// list flag (`--members`) an array.
fn toml_literal(s: &Setting) -> String {
    let one = |v: &String| -> String {
        if v.parse::<i64>().is_ok() {
            v.clone()
        } else {
            toml::Value::String(v.clone()).to_string()
        }
    };
    let list = Config::command()
        .get_arguments()
        .find(|a| a.get_long() == Some(s.flag.as_str()))
        .is_some_and(|a| matches!(a.get_action(), clap::ArgAction::Append));
    if list {
        let items: Vec<String> = s.values.iter().map(one).collect();
        format!("[{}]", items.join(", "))
    } else {
        s.values.first().map(one).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_has_one_place_and_every_place_a_flag() {
        let cmd = Config::command();
        let ids: Vec<String> = cmd
            .get_arguments()
            .map(|a| a.get_id().as_str().to_owned())
            .collect();
        for (id, group, key) in PLACES {
            assert!(ids.iter().any(|i| i == id), "{id} in PLACES is no flag");
            let same = PLACES
                .iter()
                .filter(|p| p.1 == *group && p.2 == *key)
                .count();
            assert_eq!(same, 1, "{group}.{key} placed twice");
        }
        // A new flag needs its row: the `[server]` fallback is for safety,
        // not a place to put things.
        for id in &ids {
            if !matches!(id.as_str(), CONFIG_ID | "help" | "version") {
                assert!(
                    PLACES.iter().any(|p| p.0 == id),
                    "--{id} has no row in PLACES"
                );
            }
        }
    }

    #[test]
    fn scalars_and_lists_become_flag_values() {
        let v: toml::Value = toml::Value::Array(vec![
            toml::Value::String("a:1".into()),
            toml::Value::Integer(7),
        ]);
        assert_eq!(
            toml_values(&v),
            Some(vec!["a:1".to_owned(), "7".to_owned()])
        );
        assert_eq!(toml_values(&toml::Value::Table(toml::Table::new())), None);
    }
}
