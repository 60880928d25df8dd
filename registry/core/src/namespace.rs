//! Namespaces as first-class records: their names, descriptions and quotas.
//!
//! Nacos keeps namespaces (its "tenants") in the config database; the naming
//! side never checks them on an HTTP register, and a namespace is only a
//! string on a service key. Here a namespace is a record every door reads
//! and writes through [`Namespaces`]: created, listed, described, updated and
//! deleted; the default one (`public`, [`DEFAULT_NAMESPACE`]) always exists,
//! cannot be created, changed or deleted, and `""` names it on every door
//! ([`canonical`]).
//!
//! Quotas bound the services and the instances of one namespace. They are
//! checked by the write path before it applies a register ([`Namespaces::admit`]),
//! from counts the caller takes from the store; a namespace without a quota
//! costs that check one relaxed atomic load, so the write paths of a
//! registry that sets none are unchanged. Two concurrent registers into a
//! namespace one short of its quota can both pass (the counts are read
//! before either applies): a quota is an administrative bound, not a lock.
//!
//! Who writes: the doors' namespace endpoints and the console, rarely (a
//! write lock around a small sorted map); readers copy records out.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

use thiserror::Error;

use crate::model::DEFAULT_NAMESPACE;

/// The display name of the default namespace (Nacos `DEFAULT_NAMESPACE_SHOW_NAME`).
pub const DEFAULT_NAMESPACE_NAME: &str = "public";
/// The description of the default namespace (Nacos `DEFAULT_NAMESPACE_DESCRIPTION`).
pub const DEFAULT_NAMESPACE_DESC: &str = "Default Namespace";
/// The `quota` Nacos reports for every namespace (its config-count quota,
/// `DEFAULT_QUOTA`); kept on the wire for clients that read it.
pub const NACOS_REPORTED_QUOTA: u32 = 200;
/// Longest namespace id (Nacos `NAMESPACE_ID_MAX_LENGTH`).
pub const MAX_ID_LEN: usize = 128;

/// The namespace id `id` stands for: `""` is the default namespace.
pub fn canonical(id: &str) -> &str {
    if id.is_empty() {
        DEFAULT_NAMESPACE
    } else {
        id
    }
}

/// Limits on what one namespace holds; `None` is unbounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    /// Most services in the namespace.
    pub max_services: Option<u32>,
    /// Most instances in the namespace, over all its services.
    pub max_instances: Option<u32>,
}

impl Quota {
    fn is_unbounded(&self) -> bool {
        self.max_services.is_none() && self.max_instances.is_none()
    }
}

/// One namespace as the doors describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// Its id (`public` for the default one).
    pub id: String,
    /// Its display name.
    pub name: String,
    /// Its description.
    pub desc: String,
    /// Its limits.
    pub quota: Quota,
}

impl Namespace {
    /// Whether this is the default namespace (Nacos type 0, "global").
    pub fn is_default(&self) -> bool {
        self.id == DEFAULT_NAMESPACE
    }

    fn default_record() -> Namespace {
        Namespace {
            id: DEFAULT_NAMESPACE.to_owned(),
            name: DEFAULT_NAMESPACE_NAME.to_owned(),
            desc: DEFAULT_NAMESPACE_DESC.to_owned(),
            quota: Quota::default(),
        }
    }
}

/// Why a namespace operation was refused; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NamespaceError {
    /// The id is not `[A-Za-z0-9_-]+` of at most 128 bytes. Fix: rename it.
    #[error("namespaceId [{0}] mismatch the pattern")]
    IllegalId(String),
    /// The display name is empty or holds one of `@#$%^&*`. Fix: rename it.
    #[error("namespaceName [{0}] contains illegal char")]
    IllegalName(String),
    /// `public` is built in. Fix: pick another id.
    #[error("namespaceId [{0}] is default namespace id and already exist.")]
    DefaultExists(String),
    /// A namespace with this id exists. Fix: update it, or pick another id.
    #[error("namespaceId [{0}] already exist.")]
    Exists(String),
    /// No namespace has this id. Fix: create it first.
    #[error("namespaceId [ {0} ] not exist")]
    NotFound(String),
    /// The default namespace cannot be changed or deleted.
    #[error("the default namespace [public] cannot be changed or deleted")]
    DefaultImmutable,
    /// The namespace still holds services. Fix: delete them first.
    #[error("namespace [{id}] still holds {services} service(s), delete them first")]
    NotEmpty {
        /// The namespace id.
        id: String,
        /// How many services it holds.
        services: usize,
    },
    /// A register would take the namespace past its quota of services.
    #[error("namespace [{id}] holds its quota of {limit} services")]
    ServiceQuota {
        /// The namespace id.
        id: String,
        /// The quota.
        limit: u32,
    },
    /// A register would take the namespace past its quota of instances.
    #[error("namespace [{id}] holds its quota of {limit} instances")]
    InstanceQuota {
        /// The namespace id.
        id: String,
        /// The quota.
        limit: u32,
    },
}

/// What a register would add to a namespace, for [`Namespaces::admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Growth {
    /// Services in the namespace now.
    pub services: usize,
    /// Instances in the namespace now.
    pub instances: usize,
    /// Whether the register creates its service.
    pub new_service: bool,
    /// Whether the register adds an instance (not an update of one).
    pub new_instance: bool,
}

/// The namespace table (see the module docs).
#[derive(Debug, Default)]
pub struct Namespaces {
    /// Custom namespaces by id; the default one is synthesized.
    custom: RwLock<BTreeMap<String, Namespace>>,
    /// Whether any namespace has a quota: the write path asks this first.
    any_quota: AtomicBool,
}

/// Checks an id the way Nacos's `NamespaceControllerV3` does.
pub fn check_id(id: &str) -> Result<(), NamespaceError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(NamespaceError::IllegalId(id.to_owned()))
    }
}

/// Checks a display name: non-empty, none of `@#$%^&*`.
pub fn check_name(name: &str) -> Result<(), NamespaceError> {
    if name.is_empty() || name.contains(['@', '#', '$', '%', '^', '&', '*']) {
        Err(NamespaceError::IllegalName(name.to_owned()))
    } else {
        Ok(())
    }
}

impl Namespaces {
    /// A table holding only the default namespace.
    pub fn new() -> Namespaces {
        Namespaces::default()
    }

    /// Creates a namespace.
    ///
    /// # Errors
    /// An illegal id or name, `public`, or an id in use.
    pub fn create(&self, ns: Namespace) -> Result<(), NamespaceError> {
        check_id(&ns.id)?;
        check_name(&ns.name)?;
        if ns.id == DEFAULT_NAMESPACE {
            return Err(NamespaceError::DefaultExists(ns.id));
        }
        let mut custom = self.custom.write().unwrap_or_else(|e| e.into_inner());
        if custom.contains_key(&ns.id) {
            return Err(NamespaceError::Exists(ns.id));
        }
        let bounded = !ns.quota.is_unbounded();
        custom.insert(ns.id.clone(), ns);
        if bounded {
            self.any_quota.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Changes a namespace's name, description and quota.
    ///
    /// # Errors
    /// An illegal name, the default namespace, or an unknown id.
    pub fn update(&self, ns: Namespace) -> Result<(), NamespaceError> {
        check_name(&ns.name)?;
        if canonical(&ns.id) == DEFAULT_NAMESPACE {
            return Err(NamespaceError::DefaultImmutable);
        }
        let mut custom = self.custom.write().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = custom.get_mut(&ns.id) else {
            return Err(NamespaceError::NotFound(ns.id));
        };
        *slot = ns;
        let bounded = custom.values().any(|n| !n.quota.is_unbounded());
        self.any_quota.store(bounded, Ordering::Relaxed);
        Ok(())
    }

    /// Deletes a namespace that holds `services` services now.
    ///
    /// # Errors
    /// The default namespace, an unknown id, or one that holds services.
    pub fn delete(&self, id: &str, services: usize) -> Result<Namespace, NamespaceError> {
        if canonical(id) == DEFAULT_NAMESPACE {
            return Err(NamespaceError::DefaultImmutable);
        }
        let mut custom = self.custom.write().unwrap_or_else(|e| e.into_inner());
        if !custom.contains_key(id) {
            return Err(NamespaceError::NotFound(id.to_owned()));
        }
        if services > 0 {
            return Err(NamespaceError::NotEmpty {
                id: id.to_owned(),
                services,
            });
        }
        let removed = custom
            .remove(id)
            .ok_or_else(|| NamespaceError::NotFound(id.to_owned()))?;
        let bounded = custom.values().any(|n| !n.quota.is_unbounded());
        self.any_quota.store(bounded, Ordering::Relaxed);
        Ok(removed)
    }

    /// The namespace `id` names, if it exists (`""` and `public` always do).
    pub fn get(&self, id: &str) -> Option<Namespace> {
        let id = canonical(id);
        if id == DEFAULT_NAMESPACE {
            return Some(Namespace::default_record());
        }
        let custom = self.custom.read().unwrap_or_else(|e| e.into_inner());
        custom.get(id).cloned()
    }

    /// Whether `id` names an existing namespace.
    pub fn exists(&self, id: &str) -> bool {
        let id = canonical(id);
        id == DEFAULT_NAMESPACE
            || self
                .custom
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .contains_key(id)
    }

    /// Every namespace, the default one first, then by id.
    pub fn list(&self) -> Vec<Namespace> {
        let custom = self.custom.read().unwrap_or_else(|e| e.into_inner());
        let mut all = Vec::with_capacity(custom.len() + 1);
        all.push(Namespace::default_record());
        all.extend(custom.values().cloned());
        all
    }

    /// The quota of `id`, if it has one; one atomic load when no
    /// namespace has a quota (the common case, and the hot write path's).
    pub fn quota(&self, id: &str) -> Option<Quota> {
        if !self.any_quota.load(Ordering::Relaxed) {
            return None;
        }
        let custom = self.custom.read().unwrap_or_else(|e| e.into_inner());
        custom
            .get(canonical(id))
            .map(|n| n.quota)
            .filter(|q| !q.is_unbounded())
    }

    /// Whether a register that grows namespace `id` by `growth` stays
    /// within `quota` (from [`Namespaces::quota`]).
    ///
    /// # Errors
    /// The quota of services or of instances that it would pass.
    pub fn admit(id: &str, quota: Quota, growth: Growth) -> Result<(), NamespaceError> {
        if let Some(limit) = quota.max_services {
            if growth.new_service && growth.services >= limit as usize {
                return Err(NamespaceError::ServiceQuota {
                    id: id.to_owned(),
                    limit,
                });
            }
        }
        if let Some(limit) = quota.max_instances {
            if growth.new_instance && growth.instances >= limit as usize {
                return Err(NamespaceError::InstanceQuota {
                    id: id.to_owned(),
                    limit,
                });
            }
        }
        Ok(())
    }

    /// Replaces every custom namespace (loading a saved table).
    pub fn restore(&self, saved: Vec<Namespace>) {
        let mut custom = self.custom.write().unwrap_or_else(|e| e.into_inner());
        custom.clear();
        for ns in saved.into_iter().filter(|n| !n.is_default()) {
            custom.insert(ns.id.clone(), ns);
        }
        let bounded = custom.values().any(|n| !n.quota.is_unbounded());
        self.any_quota.store(bounded, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(id: &str) -> Namespace {
        Namespace {
            id: id.to_owned(),
            name: format!("{id} name"),
            desc: String::new(),
            quota: Quota::default(),
        }
    }

    #[test]
    fn the_default_namespace_always_exists_and_empty_names_it() {
        let t = Namespaces::new();
        assert!(t.exists("") && t.exists("public") && !t.exists("dev"));
        assert_eq!(t.get("").unwrap().id, "public");
        assert_eq!(
            t.create(ns("public")),
            Err(NamespaceError::DefaultExists("public".into()))
        );
        assert_eq!(t.delete("", 0), Err(NamespaceError::DefaultImmutable));
        assert_eq!(
            t.update(ns("public")),
            Err(NamespaceError::DefaultImmutable)
        );
    }

    #[test]
    fn create_list_update_delete() {
        let t = Namespaces::new();
        t.create(ns("dev")).unwrap();
        assert_eq!(
            t.create(ns("dev")),
            Err(NamespaceError::Exists("dev".into()))
        );
        t.create(ns("a-1")).unwrap();
        let ids: Vec<String> = t.list().into_iter().map(|n| n.id).collect();
        assert_eq!(ids, ["public", "a-1", "dev"]);
        let mut changed = ns("dev");
        changed.desc = "the dev one".into();
        t.update(changed).unwrap();
        assert_eq!(t.get("dev").unwrap().desc, "the dev one");
        assert_eq!(
            t.update(ns("nope")),
            Err(NamespaceError::NotFound("nope".into()))
        );
        assert!(matches!(
            t.delete("dev", 2),
            Err(NamespaceError::NotEmpty { services: 2, .. })
        ));
        assert!(t.exists("dev"));
        t.delete("dev", 0).unwrap();
        assert!(!t.exists("dev"));
        assert_eq!(
            t.delete("dev", 0),
            Err(NamespaceError::NotFound("dev".into()))
        );
    }

    #[test]
    fn ids_and_names_are_checked() {
        let t = Namespaces::new();
        assert!(matches!(
            t.create(ns("a b")),
            Err(NamespaceError::IllegalId(_))
        ));
        assert!(matches!(
            t.create(ns("")),
            Err(NamespaceError::IllegalId(_))
        ));
        assert!(matches!(
            t.create(ns(&"x".repeat(129))),
            Err(NamespaceError::IllegalId(_))
        ));
        let mut bad = ns("ok");
        bad.name = "a@b".into();
        assert!(matches!(t.create(bad), Err(NamespaceError::IllegalName(_))));
        assert!(t.list().len() == 1);
    }

    #[test]
    fn quotas_bound_new_services_and_instances_only() {
        let t = Namespaces::new();
        assert_eq!(t.quota("dev"), None);
        let mut q = ns("dev");
        q.quota = Quota {
            max_services: Some(1),
            max_instances: Some(2),
        };
        t.create(q).unwrap();
        t.create(ns("free")).unwrap();
        assert_eq!(t.quota("free"), None);
        let quota = t.quota("dev").unwrap();
        let grow = |services, instances, new_service, new_instance| Growth {
            services,
            instances,
            new_service,
            new_instance,
        };
        assert!(Namespaces::admit("dev", quota, grow(0, 0, true, true)).is_ok());
        assert!(matches!(
            Namespaces::admit("dev", quota, grow(1, 1, true, true)),
            Err(NamespaceError::ServiceQuota { limit: 1, .. })
        ));
        assert!(Namespaces::admit("dev", quota, grow(1, 1, false, true)).is_ok());
        assert!(matches!(
            Namespaces::admit("dev", quota, grow(1, 2, false, true)),
            Err(NamespaceError::InstanceQuota { limit: 2, .. })
        ));
        // An update of an existing instance never grows the namespace.
        assert!(Namespaces::admit("dev", quota, grow(1, 2, false, false)).is_ok());
        t.delete("dev", 0).unwrap();
        assert_eq!(t.quota("dev"), None);
    }
}
