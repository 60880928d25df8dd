//! `PUT /health/instance` (v1 `HealthController`, v2 `HealthControllerV2`,
//! v3 `HealthControllerV3`): set the health of a persistent instance whose
//! cluster has no active health check.
//!
//! Parameters: `namespaceId` (`public`), `serviceName`* (with `groupName`),
//! `clusterName` (`DEFAULT`), `ip`*, `port`*, `healthy`* (v1 also reads the
//! legacy `valid`). Nacos answers `ok` (v1) or the envelope's `"ok"`; an
//! instance it cannot find is `instance not found` (v1: 400 text; v2/v3:
//! 21003... Nacos's `NacosException` becomes `{30000}` there, which says
//! less; the server maps it to 21003 `instance not found`).

use super::instance::InstanceKey;
use super::ParseLimits;
use crate::error::ProtoError;
use crate::params::{parse_bool, Params};

/// A health update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthUpdate<'a> {
    /// The instance.
    pub key: InstanceKey<'a>,
    /// `healthy`.
    pub healthy: bool,
}

impl<'a> HealthUpdate<'a> {
    /// Reads a health update.
    pub fn parse(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ProtoError> {
        let key = InstanceKey::parse(params, limits)?;
        let healthy = params
            .optional("healthy")
            .or_else(|| params.optional("valid"))
            .ok_or(ProtoError::Required("healthy"))?;
        Ok(HealthUpdate {
            key,
            healthy: parse_bool(healthy),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_is_required() {
        let l = ParseLimits::default();
        let p = Params::parse("serviceName=a&ip=1.1.1.1&port=80&healthy=false", None).unwrap();
        let h = HealthUpdate::parse(&p, &l).unwrap();
        assert!(!h.healthy);
        assert_eq!(h.key.port, 80);
        let p = Params::parse("serviceName=a&ip=1.1.1.1&port=80&valid=true", None).unwrap();
        assert!(HealthUpdate::parse(&p, &l).unwrap().healthy);
        let p = Params::parse("serviceName=a&ip=1.1.1.1&port=80", None).unwrap();
        assert_eq!(
            HealthUpdate::parse(&p, &l),
            Err(ProtoError::Required("healthy"))
        );
    }
}
