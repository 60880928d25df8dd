//! The registry's pure core: the Nacos naming data model in a sharded store
//! of lock-free copy-on-write snapshots, with heartbeat leases and expiry.
//!
//! No sockets, no async runtime, no JSON, no globals, no clock: time comes in
//! as [`Millis`]. The server builds all I/O around [`Store`].
//!
//! # Layout
//! - [`model`]: service keys, instances, identity, defaults, `preserved.*` timeouts.
//! - [`metadata`]: the compact immutable metadata map.
//! - [`shared_str`]: the one-pointer shared string instances hold.
//! - [`snapshot`]: immutable revisioned service state and the query views.
//! - [`instance_list`]: a snapshot's sorted instances, a B+tree shared
//!   between revisions, with their digest.
//! - [`store`]: shards, every operation, expiry; who writes what; with the
//!   cluster's writes (applying a replicated state, lease takeover).
//! - [`lease`]: the per-shard slab of heartbeat deadlines.
//! - `service_index`: service names sorted per namespace and group, so a
//!   page of `/service/list` costs the page, not the registry.
//! - [`event`]: change events for the notifier.
//! - [`coalesce`]: merging change events per service within a window.
//! - [`subscribers`]: push subscriptions, their leases and limits.
//! - [`clients`]: Nacos 2.x client sets (native and synced) and the holders
//!   of each connection-held instance across the cluster.
//! - [`error`]: what an operation can refuse.
//! - [`namespace`]: namespaces as records, with their quotas.
//!
//! # Who writes what
//! Each shard has one writer lock; all changes to its services happen under
//! it. Readers only load `Arc<ServiceSnapshot>`s and never wait. Beats write
//! one atomic deadline in the lease slab and nothing else.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod clients;
pub mod coalesce;
pub mod error;
pub mod event;
pub mod instance_list;
mod intern;
pub mod lease;
pub mod metadata;
pub mod model;
pub mod namespace;
pub mod overrides;
mod service_index;
pub mod shared_str;
pub mod snapshot;
pub mod store;
pub mod subscribers;

pub use clients::{ClientInstance, ClientState, Clients, Effect, Place, Replaced};
pub use coalesce::{Coalescer, Due};
pub use error::RegistryError;
pub use event::ChangeEvent;
pub use instance_list::InstanceList;
pub use metadata::Metadata;
pub use model::{
    Instance, InstanceAddr, InstancePatch, InstanceSpec, LeaseTimeouts, Millis, ServiceKey,
    ServiceRef, ServiceSpec, DEFAULT_CLUSTER, DEFAULT_GROUP, DEFAULT_NAMESPACE,
};
pub use namespace::{Namespace, NamespaceError, Namespaces, Quota};
pub use overrides::{InstanceOverride, OverrideEdit, OverrideView};
pub use shared_str::SharedStr;
pub use snapshot::{Origin, Selection, ServiceSnapshot, View};
pub use store::{
    Applied, BeatOutcome, ExpirePass, ExpireReport, Replica, ServicePage, Store, StoreConfig,
    StoreStats, Written, EXPIRE_STEP_BUDGET,
};
pub use subscribers::{
    Subscribed, Subscriber, SubscriberConfig, SubscriberView, Subscribers, Subscription,
};
