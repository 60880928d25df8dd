//! The one write path: every change to the registry, whichever door or
//! task makes it, is a [`Command`] applied by [`Writer::apply`].
//!
//! A door (1.x HTTP, 2.x gRPC, the v2/v3 HTTP APIs) builds a command from
//! its own wire format, hands it to [`Writer::apply`], and renders the
//! [`Outcome`] or [`WriteError`] in its own format; so does every task that
//! writes (Distro's apply, the sweeper, the health checker, the Raft state
//! machine). Applying a command:
//!
//! 1. decides its durability: ephemeral data is in memory only; persistent
//!    data (instances with `ephemeral=false`, services, health verdicts of
//!    persistent instances) is durable in the `--data-dir` database on a
//!    single node, or in the Raft log in a cluster ([`Log`]);
//! 2. on a single node reserves its place in the next group commit
//!    (a 503 when too many writes wait), before touching the store;
//! 3. writes the store; the core's change event goes straight into an
//!    [`Unpublished`], whose only way out is being published to the change
//!    feed (the notifier and replication), so a write that forgets to
//!    publish does not compile;
//! 4. registers the service with the health checker when it holds a
//!    persistent instance;
//! 5. submits the change to the group commit and answers once durable, or
//!    (in a Raft cluster) proposes the command instead of steps 2-4: every
//!    node then applies it with [`Writer::apply_committed`] once committed.
//!
//! Namespace changes are commands too (`Command::Namespace*`): checked
//! first (a delete while the namespace holds services is refused), then
//! logged in a Raft cluster like any durable write, else applied to the
//! namespace table, which saves itself and is exchanged by the cluster.
//!
//! Beats are not writes: a renewal touches one lease and publishes nothing,
//! and stays on its own path in the doors; only a beat that revives an
//! instance publishes, through [`Writer::publish_revived`].
//!
//! # Layout
//! - this file: the command, the outcome and error, the writer;
//! - [`wire`]: the Raft log's form of a command (`registry_proto::raft`),
//!   both ways, and the core's errors as the log carries them;
//! - `targets`: the services the health checker visits ([`Targets`]);
//! - [`legacy`]: format-1 log commands (1.x query strings) as typed writes,
//!   for logs written before typed commands and for older leaders.

pub mod legacy;
mod targets;
pub mod wire;

pub use targets::Targets;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use registry_core::namespace::{check_id, check_name, NamespaceError};
use registry_core::{
    ChangeEvent, ExpirePass, ExpireReport, InstanceAddr, InstancePatch, InstanceSpec, Metadata,
    Millis, Namespace, OverrideEdit, RegistryError, Replica, ServiceKey, ServiceRef, ServiceSpec,
    Store,
};

use crate::events::ChangeFeed;
use crate::persist::{Change, Journal, PersistError};

/// A change to the registry, protocol-neutral. Borrowed from the door's
/// decoded request, so building one costs no allocation.
#[derive(Clone, Copy, Debug)]
pub enum Command<'a> {
    /// Register (upsert) an instance; `strict` refuses one that does not
    /// exist (Nacos's `PUT /instance` from Java clients ≥ 1.0.0).
    Register {
        /// The service.
        service: ServiceRef<'a>,
        /// The instance.
        instance: &'a InstanceSpec<'a>,
        /// Refuse an unknown instance instead of registering it.
        strict: bool,
    },
    /// Replace a connection's ephemeral instances of a service (2.x batch
    /// register, and a single 2.x register with `stale` empty): the
    /// instances all or none, then the connection's `stale` ones removed.
    Replace {
        /// The service.
        service: ServiceRef<'a>,
        /// The instances the connection holds now.
        instances: &'a [InstanceSpec<'a>],
        /// The connection's instances of the service it no longer holds.
        stale: &'a [InstanceAddr<'a>],
    },
    /// Deregister an instance; nothing to remove is not an error.
    Deregister {
        /// The service.
        service: ServiceRef<'a>,
        /// The instance.
        addr: InstanceAddr<'a>,
        /// Which of the two instances at the address.
        ephemeral: bool,
    },
    /// Change only the given fields. Without `ephemeral`, the ephemeral
    /// instance at the address if there is one, else the persistent one.
    Patch {
        /// The service.
        service: ServiceRef<'a>,
        /// The instance.
        addr: InstanceAddr<'a>,
        /// Which of the two instances at the address, if the caller said.
        ephemeral: Option<bool>,
        /// The fields.
        patch: &'a InstancePatch,
    },
    /// Create a service explicitly.
    ServiceCreate {
        /// The service.
        service: ServiceRef<'a>,
        /// Its settings.
        spec: &'a ServiceSpec,
    },
    /// Replace a service's threshold and, when given, metadata and selector.
    ServiceUpdate {
        /// The service.
        service: ServiceRef<'a>,
        /// Protect threshold.
        protect_threshold: f32,
        /// New metadata.
        metadata: Option<&'a Metadata>,
        /// New selector JSON.
        selector: Option<&'a Arc<str>>,
    },
    /// Delete a service and its instances.
    ServiceDelete {
        /// The service.
        service: ServiceRef<'a>,
    },
    /// A health verdict (the health checker's, or a Raft leader's).
    Health {
        /// The service.
        service: ServiceRef<'a>,
        /// The instance.
        addr: InstanceAddr<'a>,
        /// Which of the two instances at the address.
        ephemeral: bool,
        /// The verdict.
        healthy: bool,
    },
    /// Set (or, with `remove`, delete) metadata keys of several instances
    /// of a service (Nacos's `/instance/metadata/batch`); instances not
    /// found are skipped.
    Metadata {
        /// The service.
        service: ServiceRef<'a>,
        /// The instances.
        addrs: &'a [InstanceAddr<'a>],
        /// Which of the two instances at each address.
        ephemeral: bool,
        /// The pairs to set, or whose keys to remove.
        metadata: &'a Metadata,
        /// Remove the keys instead of setting them.
        remove: bool,
    },
    /// Edit the operator's layer at each address (Nacos 2.x/3.x's
    /// instance metadata: v2/v3 instance updates and the metadata batch),
    /// laid over what the clients register (`registry_core::overrides`).
    Override {
        /// The service.
        service: ServiceRef<'a>,
        /// The addresses.
        addrs: &'a [InstanceAddr<'a>],
        /// The edit, the same at each.
        edit: OverrideEdit<'a>,
    },
    /// A peer's replicated state of a service (Distro): in memory only.
    Replica {
        /// The service.
        service: ServiceRef<'a>,
        /// The state.
        replica: &'a Replica<'a>,
    },
    /// Drop a service whose replicated state its writer removed (Distro):
    /// in memory only, unlike [`Command::ServiceDelete`].
    Drop {
        /// The service.
        service: ServiceRef<'a>,
    },
    /// Create a namespace (cluster-wide: see [`Writer::apply`]).
    NamespaceCreate {
        /// The namespace.
        namespace: &'a Namespace,
    },
    /// Change a namespace's name, description and quotas.
    NamespaceUpdate {
        /// The namespace.
        namespace: &'a Namespace,
    },
    /// Delete a namespace; refused while it holds services.
    NamespaceDelete {
        /// The namespace id.
        id: &'a str,
    },
}

/// Where a command's change becomes durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Durability {
    /// Memory only (ephemeral data, replicas).
    Memory,
    /// Recomputed after a restart on a single node (health verdicts);
    /// in the log in a Raft cluster, where every node must agree.
    LogOnly,
    /// The `--data-dir` database, or the Raft log.
    Durable,
}

impl Command<'_> {
    fn durability(&self, store: &Store) -> Durability {
        let durable = |persistent: bool| {
            if persistent {
                Durability::Durable
            } else {
                Durability::Memory
            }
        };
        match *self {
            Command::Register { instance, .. } => durable(!instance.ephemeral),
            Command::Deregister { ephemeral, .. } | Command::Metadata { ephemeral, .. } => {
                durable(!ephemeral)
            }
            Command::Patch {
                service,
                addr,
                ephemeral,
                ..
            } => durable(patches_persistent(store, service, addr, ephemeral)),
            Command::ServiceCreate { .. }
            | Command::ServiceUpdate { .. }
            | Command::ServiceDelete { .. }
            | Command::Override { .. } => Durability::Durable,
            Command::Health { ephemeral, .. } if !ephemeral => Durability::LogOnly,
            // In the log with Raft, else in `namespaces.json` and
            // replicated by the cluster (see `Writer::namespace`).
            Command::NamespaceCreate { .. }
            | Command::NamespaceUpdate { .. }
            | Command::NamespaceDelete { .. } => Durability::LogOnly,
            Command::Health { .. }
            | Command::Replace { .. }
            | Command::Replica { .. }
            | Command::Drop { .. } => Durability::Memory,
        }
    }

    /// The change record the `--data-dir` writer persists the state of
    /// (after the store write).
    fn change(&self, store: &Store) -> Option<Change> {
        let one = |service: ServiceRef<'_>, addr: InstanceAddr<'_>| Change::Instance {
            service: ServiceKey::new(service.namespace, service.name),
            cluster: Arc::from(addr.cluster),
            ip: addr.ip,
            port: addr.port,
        };
        let settings = |service: ServiceRef<'_>, settings: bool| Change::Service {
            service: ServiceKey::new(service.namespace, service.name),
            settings,
        };
        Some(match *self {
            Command::Register {
                service, instance, ..
            } => one(service, instance.addr),
            Command::Deregister { service, addr, .. } | Command::Patch { service, addr, .. } => {
                one(service, addr)
            }
            Command::ServiceCreate { service, .. } | Command::ServiceUpdate { service, .. } => {
                settings(service, true)
            }
            Command::ServiceDelete { service } => settings(service, false),
            Command::Override { service, .. } => Change::Overrides {
                service: ServiceKey::new(service.namespace, service.name),
            },
            // Several instances: reconcile the service's persistent part,
            // keeping its settings stored exactly when it is explicit.
            Command::Metadata { service, .. } => {
                let explicit = store.snapshot(service).is_some_and(|s| s.is_explicit());
                settings(service, explicit)
            }
            _ => return None,
        })
    }

    /// The service the command writes; for a namespace command, the
    /// namespace with an empty service name.
    pub fn service(&self) -> ServiceRef<'_> {
        match *self {
            Command::NamespaceCreate { namespace } | Command::NamespaceUpdate { namespace } => {
                ServiceRef::new(&namespace.id, "")
            }
            Command::NamespaceDelete { id } => ServiceRef::new(id, ""),
            Command::Register { service, .. }
            | Command::Replace { service, .. }
            | Command::Deregister { service, .. }
            | Command::Patch { service, .. }
            | Command::ServiceCreate { service, .. }
            | Command::ServiceUpdate { service, .. }
            | Command::ServiceDelete { service }
            | Command::Health { service, .. }
            | Command::Metadata { service, .. }
            | Command::Override { service, .. }
            | Command::Replica { service, .. }
            | Command::Drop { service } => service,
        }
    }
}

/// Whether a patch targets the persistent instance at `addr`: when the
/// caller did not say, only if there is no ephemeral instance there and
/// there is a persistent one (the store then patches that one).
fn patches_persistent(
    store: &Store,
    service: ServiceRef<'_>,
    addr: InstanceAddr<'_>,
    ephemeral: Option<bool>,
) -> bool {
    match ephemeral {
        Some(e) => !e,
        None => store
            .read(service, |s| {
                s.find(addr, true).is_none() && s.find(addr, false).is_some()
            })
            .unwrap_or(false),
    }
}

/// What a command did, once applied (and durable where it had to be).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// The service's revision after the write (0 when nothing changed).
    pub revision: u64,
    /// Whether readers see a change (an event was published).
    pub changed: bool,
    /// A replica older than what this node holds from its writer: nothing
    /// was applied.
    pub stale: bool,
}

/// The rest of a write that becomes durable later. Owns what it needs.
pub type Pending = Pin<Box<dyn Future<Output = Result<Applied, WriteError>> + Send>>;

/// What [`Writer::apply`] answers.
#[must_use = "a write's outcome must be answered: a persistent write is only acknowledged once durable"]
pub enum Outcome {
    /// Applied, published, and durable where it had to be.
    Done(Applied),
    /// Applied or proposed; durable (or refused) when this resolves.
    Later(Pending),
}

/// Why a write was not applied or not acknowledged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The store refused it; each door renders it with its own names.
    #[error(transparent)]
    Store(#[from] RegistryError),
    /// The `--data-dir` group commit refused it or failed.
    #[error(transparent)]
    Persist(#[from] PersistError),
    /// The Raft log did not take it (no leader, not committed in time,
    /// shutting down); the text says what happened to the write.
    #[error("{0}")]
    Log(String),
    /// The namespace table refused the change (or could not save it).
    #[error(transparent)]
    Namespace(#[from] crate::namespaces::BookError),
    /// Bigger than one log entry may be.
    #[error("a persistent write of {bytes} bytes exceeds the cluster log's limit of {limit} bytes per write")]
    TooLarge {
        /// The command's size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A command that cannot be applied (a format-1 log command whose
    /// parameters do not parse); the text says why.
    #[error("{0}")]
    Invalid(String),
}

/// A replicated log that makes persistent writes durable in a cluster
/// (Raft; see `crate::cluster::raft`).
pub trait Log: Send + Sync {
    /// Proposes `command` (on the leader) or hands it to the leader (on a
    /// follower); resolves once it is committed and applied on the
    /// leader, with the leader's outcome. Enqueues before returning, so a
    /// caller that does not wait (the health checker) still proposes.
    fn submit(self: Arc<Self>, command: registry_proto::raft::Command) -> Pending;
}

/// A store write's change event, still to be published. The only way to
/// be rid of one is [`Unpublished::publish`].
#[must_use = "a change must be published, or subscribers and peers never hear of it"]
struct Unpublished(Option<ChangeEvent>, u64);

impl Unpublished {
    fn of(w: registry_core::Written) -> Unpublished {
        Unpublished(w.event, w.revision)
    }

    fn publish(self, feed: &ChangeFeed) -> Applied {
        let changed = self.0.is_some();
        feed.publish(self.0);
        Applied {
            revision: self.1,
            changed,
            stale: false,
        }
    }
}

/// The refusal (Nacos's text) of a register whose kind is not its
/// service's: Nacos 2.x/3.x give a service one kind of instance, and its
/// 2.x and v2/v3 doors refuse the other (`EphemeralClientOperationServiceImpl`
/// and `PersistentClientOperationServiceImpl.registerInstance`). Ours is the
/// kind of the instances the service holds; an empty or unknown service
/// takes either. Those doors ask before they apply and render the refusal
/// in their own format; the 1.x door keeps Nacos 1.x's rule (a service
/// holds both kinds).
pub fn kind_conflict(store: &Store, service: ServiceRef<'_>, ephemeral: bool) -> Option<String> {
    store
        .read(service, |s| s.holds_other_kind(ephemeral))
        .unwrap_or(false)
        .then(|| registry_proto::naming::instance::kind_conflict(service.name, ephemeral))
}

/// What the write path touches, and nothing else: every door and writing
/// task holds one (cheap to clone), none needs the whole server state.
#[derive(Clone)]
pub struct Writer {
    store: Arc<Store>,
    feed: Arc<ChangeFeed>,
    targets: Arc<Targets>,
    /// Where persistent changes become durable on a single node: the
    /// `--data-dir` database, or memory in the benches.
    persist: Option<Arc<dyn Journal>>,
    /// `None` without Raft; set once the engine has started.
    log: Option<Arc<OnceLock<Arc<dyn Log>>>>,
    /// The namespaces whose quotas a register must stay within; checked
    /// by [`Writer::apply`] (a door's write), never on a committed log
    /// entry, which every node must apply alike.
    namespaces: Option<Arc<crate::namespaces::NamespaceBook>>,
}

impl Writer {
    /// The write path over these parts; `raft` when persistent data is
    /// replicated by a log installed later ([`Writer::set_log`]).
    pub fn new(
        store: Arc<Store>,
        feed: Arc<ChangeFeed>,
        targets: Arc<Targets>,
        persist: Option<Arc<dyn Journal>>,
        raft: bool,
    ) -> Writer {
        Writer {
            store,
            feed,
            targets,
            persist,
            log: raft.then(Arc::default),
            namespaces: None,
        }
    }

    /// This writer, refusing registers past a namespace's quota.
    pub fn with_namespaces(mut self, book: Arc<crate::namespaces::NamespaceBook>) -> Writer {
        self.namespaces = Some(book);
        self
    }

    /// A register's namespace quota (one relaxed load when no namespace
    /// has a quota). The refusal is [`WriteError::Invalid`], a 400 with
    /// the quota's text on every door. When the namespace has a quota, the
    /// returned gate is held until the store write, so concurrent
    /// registers are checked one after the other. (With Raft the write is
    /// applied at commit, after the gate is released: there two registers
    /// proposed at once may still both pass.)
    fn admit(
        &self,
        command: &Command<'_>,
    ) -> Result<Option<parking_lot::MutexGuard<'_, ()>>, WriteError> {
        let Some(book) = &self.namespaces else {
            return Ok(None);
        };
        let gate = match *command {
            Command::Register { service, .. } | Command::Replace { service, .. } => {
                match book.gate(service.namespace) {
                    Some(g) => g,
                    None => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        let check = |service: ServiceRef<'_>, spec: &InstanceSpec<'_>| {
            book.admit(&self.store, service, spec.addr, spec.ephemeral)
                .map_err(|e| WriteError::Invalid(e.to_string()))
        };
        match *command {
            Command::Register {
                service, instance, ..
            } => check(service, instance),
            Command::Replace {
                service, instances, ..
            } => instances.iter().try_for_each(|i| check(service, i)),
            _ => Ok(()),
        }?;
        Ok(Some(gate))
    }

    /// A namespace command's checks before it is applied or proposed
    /// (`None` for every other command). They are the door's: a delete
    /// is refused while this node's store, which holds every member's
    /// services through replication, has a service in the namespace; a
    /// committed or replicated change is applied without them, so every
    /// node ends with the same table. With Raft the command is then
    /// proposed like any logged write; without, applied here and the
    /// cluster (if any) exchanges the table (see `crate::namespaces`).
    fn namespace(&self, command: &Command<'_>) -> Option<Result<(), WriteError>> {
        let refused = |e: NamespaceError| WriteError::Namespace(e.into());
        let book = match *command {
            Command::NamespaceCreate { .. }
            | Command::NamespaceUpdate { .. }
            | Command::NamespaceDelete { .. } => match &self.namespaces {
                Some(book) => book,
                None => return Some(Err(WriteError::Invalid("no namespace table".into()))),
            },
            _ => return None,
        };
        let table = book.table();
        Some(match *command {
            Command::NamespaceCreate { namespace: n } => check_id(&n.id)
                .and_then(|()| check_name(&n.name))
                .and_then(|()| match n.id.as_str() {
                    registry_core::DEFAULT_NAMESPACE => {
                        Err(NamespaceError::DefaultExists(n.id.clone()))
                    }
                    id if table.exists(id) => Err(NamespaceError::Exists(n.id.clone())),
                    _ => Ok(()),
                })
                .map_err(refused),
            Command::NamespaceUpdate { namespace: n } => check_name(&n.name)
                .and_then(|()| match registry_core::namespace::canonical(&n.id) {
                    registry_core::DEFAULT_NAMESPACE => Err(NamespaceError::DefaultImmutable),
                    id if !table.exists(id) => Err(NamespaceError::NotFound(n.id.clone())),
                    _ => Ok(()),
                })
                .map_err(refused),
            Command::NamespaceDelete { id } => book.deletable(id, &self.store).map_err(refused),
            _ => Ok(()),
        })
    }

    /// Applies a namespace command to the table (checked, or committed).
    fn namespace_write(&self, command: Command<'_>) -> Result<Applied, WriteError> {
        let Some(book) = &self.namespaces else {
            return Err(WriteError::Invalid("no namespace table".into()));
        };
        match command {
            Command::NamespaceCreate { namespace } => book.create(namespace.clone()),
            Command::NamespaceUpdate { namespace } => book.update(namespace.clone()),
            Command::NamespaceDelete { id } => book.remove(id),
            _ => return Err(WriteError::Invalid("not a namespace command".into())),
        }?;
        Ok(Applied {
            changed: true,
            ..Applied::default()
        })
    }

    /// Installs the Raft log once its engine has started.
    pub fn set_log(&self, log: Arc<dyn Log>) {
        if let Some(slot) = &self.log {
            let _ = slot.set(log);
        }
    }

    /// The store written.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Applies `command` at `now`: see the module header for the steps.
    ///
    /// # Errors
    /// The store's refusal, a full commit queue (before anything is
    /// written), or no log to propose to while the Raft engine starts.
    pub fn apply(&self, command: Command<'_>, now: Millis) -> Result<Outcome, WriteError> {
        if let Some(checked) = self.namespace(&command) {
            checked?;
        }
        // Held to the end of this call: past the store write below.
        let _quota_gate = self.admit(&command)?;
        let durability = command.durability(&self.store);
        if durability == Durability::Memory {
            return self.write(command, now).map(Outcome::Done);
        }
        if let Some(log) = &self.log {
            let Some(log) = log.get() else {
                return Err(WriteError::Log(
                    "server is starting: the Raft engine has not loaded the persistent state yet"
                        .into(),
                ));
            };
            let Some(logged) = wire::to_log(&command) else {
                // Memory-only commands returned above; none is left.
                return self.write(command, now).map(Outcome::Done);
            };
            return Ok(Outcome::Later(log.clone().submit(logged)));
        }
        let ticket = match (&self.persist, durability) {
            (Some(p), Durability::Durable) => Some(p.reserve()?),
            _ => None,
        };
        let applied = self.write(command, now)?;
        let (Some(ticket), Some(change)) = (ticket, command.change(&self.store)) else {
            return Ok(Outcome::Done(applied));
        };
        let committed = ticket.submit(change);
        Ok(Outcome::Later(Box::pin(async move {
            committed
                .await
                .map(|()| applied)
                .map_err(WriteError::Persist)
        })))
    }

    /// Applies a command the Raft log committed: store, publish, health
    /// targets; the log is its durable record.
    ///
    /// # Errors
    /// The store's refusal (the same on every node).
    pub fn apply_committed(
        &self,
        command: Command<'_>,
        now: Millis,
    ) -> Result<Applied, WriteError> {
        self.write(command, now)
    }

    /// Publishes the event of a beat that turned an unhealthy instance
    /// healthy (a beat's only change readers see).
    pub fn publish_revived(&self, event: ChangeEvent) {
        self.feed.publish(Some(event));
    }

    /// Drops the operator's layers whose addresses stayed empty past
    /// their time to live (`Store::sweep_overrides`), and, on a single
    /// node, their stored records with them. Nothing is published:
    /// readers see no change. In a Raft cluster every node sweeps its own
    /// copy alike (the log's records of a layer are dropped with the log).
    pub fn sweep_overrides(&self, now: Millis) -> usize {
        let changed = self.store.sweep_overrides(now);
        if let (Some(p), None) = (&self.persist, &self.log) {
            for service in &changed {
                match p.reserve() {
                    // Durable at the next commit; nobody waits for it.
                    Ok(ticket) => drop(ticket.submit(Change::Overrides {
                        service: service.clone(),
                    })),
                    // Kept on disk until a later edit or sweep: a restart
                    // then lays the layer back for another time to live.
                    Err(e) => tracing::debug!(error = %e, "expired layers stay stored for now"),
                }
            }
        }
        changed.len()
    }

    /// Publishes what a store write made outside a command (a Raft
    /// snapshot's layers laid back).
    pub fn publish_written(&self, written: registry_core::Written) {
        self.feed.publish(written.event);
    }

    /// One bounded step of a lease sweep (see
    /// [`Store::expire_step_owned`]), its events published at once.
    pub fn expire_step(
        &self,
        pass: &mut ExpirePass,
        budget: usize,
        report: &mut ExpireReport,
        owned: Option<&dyn Fn(&ServiceKey) -> bool>,
    ) -> bool {
        let more = match owned {
            None => self.store.expire_step(pass, budget, report),
            Some(owned) => self.store.expire_step_owned(pass, budget, report, owned),
        };
        for event in report.events.drain(..) {
            self.feed.publish(Some(event));
        }
        more
    }

    /// Steps 3 and 4: the store, the change feed, the health targets.
    ///
    /// A table of one arm per command, each one store call: longer than
    /// 80 lines as the command enum is, not logic to split.
    fn write(&self, command: Command<'_>, now: Millis) -> Result<Applied, WriteError> {
        let store = &*self.store;
        let written = match command {
            Command::Register {
                service,
                instance,
                strict,
            } => {
                let w = if strict {
                    store.update(service, instance, now)
                } else {
                    store.register(service, instance, now)
                };
                let applied = Unpublished::of(w?).publish(&self.feed);
                if !instance.ephemeral {
                    self.targets.insert(service);
                }
                return Ok(applied);
            }
            Command::Replace {
                service,
                instances,
                stale,
            } => return self.replace(service, instances, stale, now),
            Command::Deregister {
                service,
                addr,
                ephemeral,
            } => store.deregister(service, addr, ephemeral, now)?,
            Command::Patch {
                service,
                addr,
                ephemeral,
                patch,
            } => store.patch(service, addr, ephemeral, patch, now)?,
            Command::ServiceCreate { service, spec } => store.create_service(service, spec, now)?,
            Command::ServiceUpdate {
                service,
                protect_threshold,
                metadata,
                selector,
            } => store.update_service(
                service,
                protect_threshold,
                metadata.cloned(),
                selector.cloned(),
                now,
            )?,
            Command::ServiceDelete { service } | Command::Drop { service } => {
                store.delete_service(service)?
            }
            Command::Health {
                service,
                addr,
                ephemeral,
                healthy,
            } => store.set_health(service, addr, ephemeral, healthy, now)?,
            Command::Metadata {
                service,
                addrs,
                ephemeral,
                metadata,
                remove,
            } => return self.metadata(service, addrs, ephemeral, metadata, remove, now),
            Command::Override {
                service,
                addrs,
                edit,
            } => return self.edit_override(service, addrs, edit, now),
            Command::NamespaceCreate { .. }
            | Command::NamespaceUpdate { .. }
            | Command::NamespaceDelete { .. } => return self.namespace_write(command),
            Command::Replica { service, replica } => {
                return match store.apply_replica(service, replica, now)? {
                    registry_core::Applied::Written(w) => {
                        Ok(Unpublished::of(w).publish(&self.feed))
                    }
                    registry_core::Applied::Unchanged => Ok(Applied::default()),
                    registry_core::Applied::Stale => Ok(Applied {
                        stale: true,
                        ..Applied::default()
                    }),
                };
            }
        };
        Ok(Unpublished::of(written).publish(&self.feed))
    }

    fn replace(
        &self,
        service: ServiceRef<'_>,
        instances: &[InstanceSpec<'_>],
        stale: &[InstanceAddr<'_>],
        now: Millis,
    ) -> Result<Applied, WriteError> {
        let written = self.store.register_held(service, instances, now)?;
        let mut applied = Unpublished::of(written).publish(&self.feed);
        for addr in stale {
            // Deregistering cannot fail for a well-formed key; a missing
            // instance is a no-op.
            if let Ok(w) = self.store.deregister(service, *addr, true, now) {
                let a = Unpublished::of(w).publish(&self.feed);
                applied.changed |= a.changed;
                applied.revision = applied.revision.max(a.revision);
            }
        }
        Ok(applied)
    }

    /// Every address's layer edited: one revision each (the addresses of
    /// one request are few), the service's check up front so that an
    /// unknown service changes nothing.
    fn edit_override(
        &self,
        service: ServiceRef<'_>,
        addrs: &[InstanceAddr<'_>],
        edit: OverrideEdit<'_>,
        now: Millis,
    ) -> Result<Applied, WriteError> {
        if self.store.snapshot(service).is_none() {
            return Err(RegistryError::ServiceNotFound.into());
        }
        let mut applied = Applied::default();
        for addr in addrs {
            let w = self.store.edit_override(service, *addr, edit, now, false)?;
            let a = Unpublished::of(w).publish(&self.feed);
            applied.changed |= a.changed;
            applied.revision = applied.revision.max(a.revision);
        }
        Ok(applied)
    }

    fn metadata(
        &self,
        service: ServiceRef<'_>,
        addrs: &[InstanceAddr<'_>],
        ephemeral: bool,
        metadata: &Metadata,
        remove: bool,
        now: Millis,
    ) -> Result<Applied, WriteError> {
        let mut applied = Applied::default();
        for addr in addrs {
            let Some(current) = self
                .store
                .read(service, |s| {
                    s.find(*addr, ephemeral).map(|i| i.metadata.clone())
                })
                .flatten()
            else {
                continue;
            };
            let merged = if remove {
                Metadata::from_pairs(current.iter().filter(|(k, _)| metadata.get(k).is_none()))?
            } else {
                let kept = current.iter().filter(|(k, _)| metadata.get(k).is_none());
                Metadata::from_pairs(kept.chain(metadata.iter()))?
            };
            let patch = InstancePatch {
                metadata: Some(merged),
                ..InstancePatch::default()
            };
            let w = self
                .store
                .patch(service, *addr, Some(ephemeral), &patch, now)?;
            let a = Unpublished::of(w).publish(&self.feed);
            applied.changed |= a.changed;
            applied.revision = applied.revision.max(a.revision);
        }
        Ok(applied)
    }
}
