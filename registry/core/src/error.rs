//! The errors of registry operations.
//!
//! Small `Copy` values: they sit on the write path and are turned into Nacos
//! status codes and texts in exactly one place in the server.

use thiserror::Error;

/// Why a registry operation was refused. Nothing was changed when one is
/// returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RegistryError {
    /// The service does not exist. Register an instance or create the
    /// service first.
    #[error("service not found")]
    ServiceNotFound,
    /// The instance does not exist in the service. Register it first.
    #[error("instance not found")]
    InstanceNotFound,
    /// The service has no instance in the requested cluster.
    #[error("cluster not found")]
    ClusterNotFound,
    /// A service with this name already exists; update it instead.
    #[error("service already exists")]
    ServiceExists,
    /// Weights must be finite and within `[0, 10000]`.
    #[error("weight out of range [0, 10000]")]
    InvalidWeight,
    /// Protect thresholds must be finite and within `[0, 1]`.
    #[error("protect threshold out of range [0, 1]")]
    InvalidProtectThreshold,
    /// Metadata keys must be non-empty and no key or value may contain NUL.
    #[error("metadata format incorrect")]
    InvalidMetadata,
    /// A `preserved.*` timeout in the metadata is not a positive number of
    /// milliseconds that fits in 32 bits.
    #[error("metadata {key} must be a positive number of milliseconds")]
    InvalidTimeout {
        /// The metadata key holding the bad value.
        key: &'static str,
    },
    /// Namespace and service names must be non-empty.
    #[error("empty namespace or service name")]
    InvalidName,
    /// The service holds the configured maximum of instances.
    #[error("service holds the maximum of {limit} instances")]
    TooManyInstances {
        /// The configured limit.
        limit: usize,
    },
    /// The registry holds the configured maximum of services.
    #[error("registry holds the maximum of {limit} services")]
    TooManyServices {
        /// The configured limit.
        limit: usize,
    },
}
