//! Log levels changed while the server runs: `PUT /v3/admin/ns/ops/log`
//! (`OperatorControllerV3.setLogLevel`, `logName` + `logLevel`).
//!
//! The binary installs its `tracing` filter here ([`install`]: the
//! `REGISTRY_LOG` directives and a way to swap the filter, a
//! `tracing_subscriber` reload handle). [`set`] adds one directive for the
//! named logger and swaps the filter. Nacos's logger names map to our
//! modules (`naming-server` is the whole server, `naming-push` the
//! notifier and UDP pusher, `naming-distro` the cluster, `naming-raft` its
//! Raft group, `naming-event` the change feed, `naming-rt` and
//! `naming-performance` the HTTP door); any other name is taken as a
//! `tracing` target (`registry_server::health`, `openraft`). Levels are
//! logback's: `ALL`, `TRACE`, `DEBUG`, `INFO`, `WARN`, `ERROR`, `OFF`.
//! An embedded server (no filter installed) refuses the change.

use std::sync::{Mutex, OnceLock};

use tracing_subscriber::EnvFilter;

type Reload = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

struct Filter {
    /// The directives in force, `REGISTRY_LOG`'s first.
    directives: Mutex<String>,
    reload: Reload,
}

static FILTER: OnceLock<Filter> = OnceLock::new();

/// Nacos's logger names and the targets they stand for here.
const NACOS_LOGGERS: &[(&str, &[&str])] = &[
    ("naming-server", &["registry_server"]),
    (
        "naming-push",
        &["registry_server::notifier", "registry_server::pusher"],
    ),
    ("naming-distro", &["registry_server::cluster"]),
    (
        "naming-raft",
        &["registry_server::cluster::raft", "openraft"],
    ),
    ("naming-event", &["registry_server::events"]),
    ("naming-rt", &["registry_server::http"]),
    ("naming-performance", &["registry_server::http"]),
];

/// Why a level was not changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LevelError {
    /// No filter to change (an embedded server).
    #[error("this server has no log filter to change (it was not started by the registry binary)")]
    NotInstalled,
    /// Not one of logback's levels.
    #[error("logLevel {0:?} is not one of ALL, TRACE, DEBUG, INFO, WARN, ERROR, OFF")]
    Level(String),
    /// Neither a Nacos logger nor a target name.
    #[error("logName {0:?} is neither a Nacos logger (naming-server, naming-push, ...) nor a module path")]
    Name(String),
    /// The new filter could not be installed.
    #[error("the log filter could not be changed: {0}")]
    Reload(String),
}

/// Installs the filter the binary runs with: its `directives` and how to
/// swap it. Only the first call counts.
pub fn install(
    directives: &str,
    reload: impl Fn(EnvFilter) -> Result<(), String> + Send + Sync + 'static,
) {
    let _ = FILTER.set(Filter {
        directives: Mutex::new(directives.to_owned()),
        reload: Box::new(reload),
    });
}

/// Sets logger `name` to `level`; answers the directives now in force.
///
/// # Errors
/// See [`LevelError`].
pub fn set(name: &str, level: &str) -> Result<String, LevelError> {
    let level = match level.trim().to_ascii_uppercase().as_str() {
        "ALL" | "TRACE" => "trace",
        "DEBUG" => "debug",
        "INFO" => "info",
        "WARN" => "warn",
        "ERROR" => "error",
        "OFF" => "off",
        _ => return Err(LevelError::Level(level.to_owned())),
    };
    let name = name.trim();
    let targets: Vec<&str> = match NACOS_LOGGERS.iter().find(|(n, _)| *n == name) {
        Some((_, targets)) => targets.to_vec(),
        None if !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') =>
        {
            vec![name]
        }
        None => return Err(LevelError::Name(name.to_owned())),
    };
    let filter = FILTER.get().ok_or(LevelError::NotInstalled)?;
    let mut directives = filter.directives.lock().unwrap_or_else(|e| e.into_inner());
    let mut next = directives.clone();
    for t in targets {
        if !next.is_empty() {
            next.push(',');
        }
        next.push_str(&format!("{t}={level}"));
    }
    let parsed = EnvFilter::try_new(&next).map_err(|e| LevelError::Reload(e.to_string()))?;
    (filter.reload)(parsed).map_err(LevelError::Reload)?;
    *directives = next.clone();
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn a_level_set_at_run_time_takes_effect() {
        // Before installing: refused, after the argument checks.
        assert_eq!(
            set("naming-server", "LOUD"),
            Err(LevelError::Level("LOUD".into()))
        );
        assert_eq!(
            set("naming server", "INFO"),
            Err(LevelError::Name("naming server".into()))
        );
        assert_eq!(set("naming-server", "INFO"), Err(LevelError::NotInstalled));

        let (layer, handle) = tracing_subscriber::reload::Layer::new(EnvFilter::new("info"));
        let subscriber = tracing_subscriber::registry().with(layer);
        install("info", move |f| handle.reload(f).map_err(|e| e.to_string()));
        tracing::subscriber::with_default(subscriber, || {
            assert!(!tracing::enabled!(target: "registry_server::notifier", tracing::Level::DEBUG));
            let now = set("naming-push", "debug").unwrap();
            assert_eq!(
                now,
                "info,registry_server::notifier=debug,registry_server::pusher=debug"
            );
            tracing::callsite::rebuild_interest_cache();
            assert!(tracing::enabled!(target: "registry_server::notifier", tracing::Level::DEBUG));
            assert!(!tracing::enabled!(target: "registry_server::http", tracing::Level::DEBUG));
            set("registry_server::http", "TRACE").unwrap();
            tracing::callsite::rebuild_interest_cache();
            assert!(tracing::enabled!(target: "registry_server::http", tracing::Level::TRACE));
        });
    }
}
