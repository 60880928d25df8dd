//! Making the server's state from its configuration, in the order the
//! parts need each other: the cluster first (its secret keys the access
//! tokens, and with Raft its log replaces the database), then persistence,
//! auth, the [`App`], the namespaces, the cluster's hook and change tap,
//! and last the restore of persistent state.
//!
//! It sits above both the state and the cluster, so that `state` need not
//! know the cluster (it holds it as a `state::ClusterHook`).

use std::sync::Arc;

use crate::auth::Auth;
use crate::clock::Clock;
use crate::cluster::hook::Hook;
use crate::cluster::{Cluster, ClusterConfig};
use crate::config::Config;
use crate::persist::Persist;
use crate::state::App;

impl App {
    /// State for a server with `config`. With `--data-dir` it opens the
    /// database and loads every persistent instance and explicit service
    /// before returning, so nothing is served from a half-loaded store.
    ///
    /// # Errors
    /// When the configuration is invalid, or the data directory or users
    /// file cannot be used.
    pub fn new(config: Config) -> anyhow::Result<App> {
        App::with_clock(config, Clock::start())
    }

    /// [`App::new`] on a given clock: tests pass [`Clock::adjustable`] to
    /// move the server's time forward instead of sleeping.
    ///
    /// # Errors
    /// As [`App::new`].
    pub fn with_clock(config: Config, clock: Clock) -> anyhow::Result<App> {
        config.validate().map_err(anyhow::Error::msg)?;
        let cluster = match ClusterConfig::from_config(&config)? {
            Some(c) => Some(Arc::new(Cluster::new(c)?)),
            None => None,
        };
        // In a cluster, --data-dir holds the Raft log instead: persistent
        // writes are durable once committed there (see `cluster::raft`).
        let raft = cluster.as_ref().is_some_and(|c| c.raft_enabled());
        let persist = match &config.data_dir {
            Some(dir) if !raft => Some(Arc::new(Persist::open(
                dir,
                config.data_cache_bytes,
                config.max_pending_writes,
                config.max_commit_batch,
            )?)),
            _ => None,
        };
        let auth = match &config.auth_users {
            Some(path) => {
                // Cluster members must accept each other's tokens: a
                // relayed request carries the token its client got from
                // another node. The key then derives from the shared secret.
                let cluster_secret = cluster.as_ref().and_then(|c| c.config.secret.as_deref());
                let key = match (&persist, cluster_secret) {
                    (_, Some(secret)) => crate::auth::key_from_secret(secret),
                    (Some(p), None) => p.auth_key()?,
                    (None, None) => crate::auth::random_key()?,
                };
                let auth = Auth::load(
                    path,
                    key,
                    config.auth_token_ttl_secs,
                    config.auth_max_logins,
                )?;
                Some(Arc::new(auth))
            }
            None => None,
        };
        let mut app = App::build(config, clock, persist, auth, raft);
        app.namespaces = Arc::new(
            crate::namespaces::NamespaceBook::open(app.config.data_dir.as_deref())?
                .with_delete_protection(app.config.namespace_delete_protection),
        );
        app.writer = app.writer.clone().with_namespaces(app.namespaces.clone());
        if let Some(c) = cluster {
            // Replication consumes the same change events as the notifier.
            let tap = c.clone();
            app.changes
                .set_tap(Box::new(move |event| tap.changed(event)));
            app.cluster = Some(Arc::new(Hook(c)));
        }
        match &app.persist {
            Some(p) => {
                let targets = &app.health_targets;
                let r = p.restore(&app.store, app.clock.now(), |s| targets.insert(s))?;
                tracing::info!(
                    dir = %p.dir().display(),
                    services = r.services,
                    instances = r.instances,
                    skipped = r.skipped,
                    ms = r.elapsed.as_secs_f64() * 1e3,
                    "recovered persistent state"
                );
            }
            None if raft => tracing::info!(
                "persistent instances and services are replicated by Raft under --data-dir"
            ),
            None => tracing::info!(
                "no --data-dir: persistent instances and services are kept in memory only"
            ),
        }
        Ok(app)
    }
}
