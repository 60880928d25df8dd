//! The writes of the v2 and v3 doors: each builds the typed [`Command`] of
//! the one write path ([`crate::write`]) from its form and renders the
//! outcome in the envelope (the v2 `PATCH` and beat answer raw, as Nacos's
//! do). The metadata batch and health handlers are every door's
//! ([`crate::http::writes`]).

use registry_core::{
    BeatOutcome, InstanceAddr, InstanceOverride, InstanceSpec, OverrideEdit, ServiceRef,
    ServiceSpec,
};
use registry_proto::naming::beat::{beat_not_found, beat_ok, BeatRequest};
use registry_proto::naming::instance::{InstanceKey, InstanceRequest};
use registry_proto::naming::route::Route;
use registry_proto::naming::service::{Selector, ServiceRequest};
use registry_proto::openapi::envelope::{self, ApiError, ErrorCode};
use registry_proto::openapi::instance::{bind_instance_form, heart_beat};
use registry_proto::params::parse_bool;
use registry_proto::ProtoError;

use super::api;
use crate::http::error::{self, Failure};
use crate::http::operator::SwitchRefusal;
use crate::http::writes::{apply, health, metadata_batch, refused, Door};
use crate::http::{later, Done, Exchange, Reply, Scratch};
use crate::write::{Command, Outcome};

/// Answers a v2/v3 write route.
pub(crate) fn handle(
    ex: &Exchange<'_>,
    route: Route,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    match route {
        Route::V3ClientRegister if heart_beat(&ex.params) => heartbeat(ex, scratch),
        Route::V2InstanceRegister | Route::V3InstanceRegister | Route::V3ClientRegister => {
            register(ex, scratch)
        }
        Route::V2InstanceDeregister | Route::V3InstanceDeregister | Route::V3ClientDeregister => {
            deregister(ex, scratch)
        }
        Route::V2InstanceUpdate | Route::V3InstanceUpdate => update(ex, scratch),
        Route::V2InstancePatch => patch_v2(ex),
        Route::V3InstancePartial => partial_v3(ex, scratch),
        Route::V2InstanceBeat => beat_v2(ex, scratch),
        Route::V2ServiceCreate | Route::V3ServiceCreate => service_create(ex, scratch),
        Route::V2ServiceUpdate | Route::V3ServiceUpdate => service_update(ex, scratch),
        Route::V2ServiceDelete | Route::V3ServiceDelete => service_delete(ex, scratch),
        Route::V2HealthUpdate | Route::V3HealthUpdate => health(ex, scratch, Door::Envelope),
        Route::V2MetadataBatchUpdate | Route::V3MetadataBatchUpdate => {
            metadata_batch(ex, scratch, false, Door::Envelope)
        }
        Route::V2MetadataBatchDelete | Route::V3MetadataBatchDelete => {
            metadata_batch(ex, scratch, true, Door::Envelope)
        }
        Route::V2SwitchesUpdate | Route::V3SwitchesUpdate => {
            let entry = ex
                .params
                .optional("entry")
                .ok_or_else(|| api(ApiError::missing("entry")))?;
            let value = ex
                .params
                .optional("value")
                .ok_or_else(|| api(ApiError::missing("value")))?;
            // OperatorControllerV3.updateSwitch turns SwitchManager's
            // IllegalArgumentException into 500 / 30000.
            crate::http::operator::update_switch(ex.app, entry, value).map_err(|e| {
                api(match e {
                    SwitchRefusal::Invalid(t) => ApiError::new(500, ErrorCode::ServerError, t),
                    SwitchRefusal::Refused(t) => {
                        ApiError::new(400, ErrorCode::ParameterValidate, t)
                    }
                })
            })?;
            ok(scratch)
        }
        other => Err(api(ApiError::new(
            404,
            ErrorCode::ResourceNotFound,
            format!("no such api: {}", other.name()),
        ))),
    }
}

fn ok(scratch: &mut Scratch) -> Result<Reply, Failure> {
    envelope::success_str(&mut scratch.body, "ok");
    Ok(Reply::Json)
}

/// The quota check of a register, in the envelope with its own code
/// (the write path checks it again for every door).
fn admit(ex: &Exchange<'_>, svc: ServiceRef<'_>, spec: &InstanceSpec<'_>) -> Result<(), Failure> {
    ex.app
        .namespaces
        .admit(&ex.app.store, svc, spec.addr, spec.ephemeral)
        .map_err(|e| error::quota(&e, true))
}

/// `POST /instance` (`InstanceControllerV2.register`,
/// `InstanceControllerV3.register`, `InstanceOpenApiController.register`).
fn register(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    bind_instance_form(&ex.params).map_err(api)?;
    let req = InstanceRequest::parse(&ex.params, &ex.app.parse_limits).map_err(api)?;
    let spec = crate::convert::instance_spec(&req, true).map_err(api)?;
    let grouped = req.key.service.grouped();
    let svc = ServiceRef::new(req.key.namespace_id, &grouped);
    admit(ex, svc, &spec)?;
    // 400 {30000, "server error", the exception's text}
    // (NacosApiExceptionHandler.handleNacosRuntimeException).
    if let Some(text) = crate::write::kind_conflict(&ex.app.store, svc, spec.ephemeral) {
        return Err(api(ApiError::new(400, ErrorCode::ServerError, text)));
    }
    let command = Command::Register {
        service: svc,
        instance: &spec,
        strict: false,
    };
    apply(ex, command, Door::Envelope, scratch)
}

/// v3 client `POST /instance?heartBeat=true`: renews only; an unknown
/// instance is HTTP 200 `{21003, "instance not found", null}`
/// (`InstanceOpenApiController.register`), never registered.
fn heartbeat(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let key = InstanceKey::parse(&ex.params, &ex.app.parse_limits).map_err(api)?;
    let grouped = key.service.grouped();
    let addr = InstanceAddr {
        cluster: key.cluster,
        ip: crate::convert::ip(key.ip).map_err(api)?,
        port: key.port,
    };
    match ex
        .app
        .store
        .beat(ServiceRef::new(key.namespace_id, &grouped), addr, ex.now)
    {
        BeatOutcome::Renewed { .. } => {}
        BeatOutcome::Revived { event, .. } => ex.app.writer.publish_revived(event),
        BeatOutcome::NotFound => {
            envelope::failure_null(&mut scratch.body, ErrorCode::InstanceNotFound);
            return Ok(Reply::Json);
        }
    }
    ex.app.metrics.beats.inc();
    ok(scratch)
}

/// `DELETE /instance`: `ok` even when nothing was there.
fn deregister(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    bind_instance_form(&ex.params).map_err(api)?;
    let key = InstanceKey::parse(&ex.params, &ex.app.parse_limits).map_err(api)?;
    let grouped = key.service.grouped();
    let addr = InstanceAddr {
        cluster: key.cluster,
        ip: crate::convert::ip(key.ip).map_err(api)?,
        port: key.port,
    };
    let command = Command::Deregister {
        service: ServiceRef::new(key.namespace_id, &grouped),
        addr,
        ephemeral: key.ephemeral.unwrap_or(true),
    };
    apply(ex, command, Door::Envelope, scratch)
}

/// `PUT /instance` (`InstanceControllerV2.update`, `InstanceControllerV3.update`,
/// `InstanceOperatorClientImpl.updateInstance`): the form's weight,
/// enabled and metadata (defaults 1.0, true, empty) become the operator's
/// layer of the address, laid over what the client registers now and
/// later; an address without an instance keeps it for when one comes.
fn update(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    bind_instance_form(&ex.params).map_err(api)?;
    let req = InstanceRequest::parse(&ex.params, &ex.app.parse_limits).map_err(api)?;
    let grouped = req.key.service.grouped();
    let addr = InstanceAddr {
        cluster: req.key.cluster,
        ip: crate::convert::ip(req.key.ip).map_err(api)?,
        port: req.key.port,
    };
    let service = ServiceRef::new(req.key.namespace_id, &grouped);
    if ex.app.store.snapshot(service).is_none() {
        return Err(api(unknown_for_update(
            &req.key.service,
            req.key.namespace_id,
            req.key.ephemeral,
        )));
    }
    let layer = InstanceOverride {
        weight: req.weight,
        enabled: req.enabled,
        metadata: crate::convert::metadata(&req.metadata).map_err(api)?,
    };
    let command = Command::Override {
        service,
        addrs: &[addr],
        edit: OverrideEdit::Replace(&layer),
    };
    apply(ex, command, Door::Envelope, scratch)
}

/// `updateInstance`'s refusal of a service that does not exist: 400
/// `INSTANCE_ERROR` naming the service as `Service.toString` writes it.
fn unknown_for_update(
    service: &registry_proto::naming::ServiceName<'_>,
    namespace: &str,
    ephemeral: Option<bool>,
) -> ApiError {
    ApiError::new(
        400,
        ErrorCode::InstanceError,
        format!(
            "service not found, namespace: {namespace}, service: Service{{namespace='{namespace}', \
             group='{}', name='{}', ephemeral={}, revision=0}}",
            service.group,
            service.name,
            ephemeral.unwrap_or(true)
        ),
    )
}

/// `patchInstance`'s lookup first (`InstanceOperatorClientImpl.getInstance0`):
/// 404 `RESOURCE_NOT_FOUND` when the service has no instance, or none at
/// the address.
fn patchable(
    ex: &Exchange<'_>,
    service: ServiceRef<'_>,
    addr: InstanceAddr<'_>,
) -> Result<(), ApiError> {
    let not_found = |text: String| ApiError::new(404, ErrorCode::ResourceNotFound, text);
    let found = ex.app.store.read(service, |s| {
        (!s.instances().is_empty()).then(|| s.find_any(addr).is_some())
    });
    match found.flatten() {
        None => Err(not_found(format!(
            "no ips found for cluster {} in service {}",
            addr.cluster, service.name
        ))),
        Some(false) => Err(not_found("no matched ip found!".to_owned())),
        Some(true) => Ok(()),
    }
}

/// v2 `PATCH /instance` (`InstanceControllerV2.patch`): `serviceName`,
/// `ip`, `port`, `weight`, `enabled`, `metadata` required, `cluster`
/// (`DEFAULT`); answers a raw `ok`. The given fields go into the
/// operator's layer (`patchInstance`), which needs an instance there.
fn patch_v2(ex: &Exchange<'_>) -> Result<Reply, Failure> {
    let p = &ex.params;
    for name in ["serviceName", "ip", "port", "weight", "enabled", "metadata"] {
        if p.get(name).is_none() {
            return Err(api(ApiError::missing(name)));
        }
    }
    let key = InstanceKey::parse(p, &ex.app.parse_limits).map_err(api)?;
    let cluster = p.optional_or("cluster", key.cluster);
    let grouped = key.service.grouped();
    let weight =
        registry_proto::naming::parse_weight(p.get("weight").unwrap_or_default()).map_err(api)?;
    let metadata = match p.optional("metadata") {
        Some(m) => Some(
            crate::convert::metadata(
                &registry_proto::naming::Metadata::parse(m, &ex.app.parse_limits).map_err(api)?,
            )
            .map_err(api)?,
        ),
        None => None,
    };
    let addr = InstanceAddr {
        cluster,
        ip: crate::convert::ip(key.ip).map_err(api)?,
        port: key.port,
    };
    let service = ServiceRef::new(key.namespace_id, &grouped);
    patchable(ex, service, addr).map_err(api)?;
    let command = Command::Override {
        service,
        addrs: &[addr],
        edit: OverrideEdit::Patch {
            weight: Some(weight),
            enabled: p.get("enabled").map(parse_bool),
            metadata: metadata.as_ref(),
        },
    };
    let mut ignored = Scratch::default();
    apply(ex, command, Door::Text, &mut ignored)
}

/// v3 `PUT /instance/partial` (`InstanceControllerV3.partialUpdateInstance`):
/// as Nacos's form fills its defaults first, an omitted weight or enabled
/// is reset to 1.0 or true; metadata only when given. Into the operator's
/// layer (`patchInstance`), which needs an instance there.
fn partial_v3(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    bind_instance_form(&ex.params).map_err(api)?;
    let req = InstanceRequest::parse(&ex.params, &ex.app.parse_limits).map_err(api)?;
    let grouped = req.key.service.grouped();
    let metadata = match ex.params.optional("metadata") {
        Some(_) => Some(crate::convert::metadata(&req.metadata).map_err(api)?),
        None => None,
    };
    let addr = InstanceAddr {
        cluster: req.key.cluster,
        ip: crate::convert::ip(req.key.ip).map_err(api)?,
        port: req.key.port,
    };
    let service = ServiceRef::new(req.key.namespace_id, &grouped);
    patchable(ex, service, addr).map_err(api)?;
    let command = Command::Override {
        service,
        addrs: &[addr],
        edit: OverrideEdit::Patch {
            weight: Some(req.weight),
            enabled: Some(req.enabled),
            metadata: metadata.as_ref(),
        },
    };
    apply(ex, command, Door::Envelope, scratch)
}

/// v2 `PUT /instance/beat` (`InstanceControllerV2.beat`): v1's form and
/// raw answer (`{clientBeatInterval, code, lightBeatEnabled}`); an unknown
/// instance with a `beat` body is registered from it.
fn beat_v2(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let app = ex.app;
    // InstanceControllerV2.beat: `NamingUtils.checkServiceNameFormat` on the
    // name as sent, so it must be `group@@service` (the reader refuses
    // `G@@` and `@@s` itself); that IllegalArgumentException is 400 / 20002,
    // not the 21000 of the other doors.
    let format = |e: ProtoError| ApiError::new(400, ErrorCode::ParameterValidate, e.to_string());
    let name = ex.params.optional("serviceName");
    if name.is_some_and(|n| !n.contains(registry_proto::naming::GROUP_SEPARATOR)) {
        return Err(api(format(ProtoError::ServiceNameFormat)));
    }
    let req = BeatRequest::parse(&ex.params, &app.parse_limits).map_err(|e| match e {
        ProtoError::ServiceNameFormat | ProtoError::GroupNameEmpty => api(format(e)),
        e => api(e),
    })?;
    let grouped = req.service.grouped();
    let svc = ServiceRef::new(req.namespace_id, &grouped);
    let addr = InstanceAddr {
        cluster: &req.cluster,
        ip: crate::convert::ip(&req.ip).map_err(api)?,
        port: req.port,
    };
    let interval = u64::from(app.config.beat_interval_ms);
    match app.store.beat(svc, addr, ex.now) {
        BeatOutcome::Renewed { interval_ms } => {
            beat_ok(&mut scratch.body, u64::from(interval_ms), true);
        }
        BeatOutcome::Revived { interval_ms, event } => {
            app.writer.publish_revived(event);
            beat_ok(&mut scratch.body, u64::from(interval_ms), true);
        }
        BeatOutcome::NotFound => {
            let Some(body) = &req.beat else {
                beat_not_found(&mut scratch.body, interval);
                return Ok(Reply::Json);
            };
            let info = body.info(&app.parse_limits).map_err(api)?;
            let spec = InstanceSpec {
                weight: info.weight,
                ephemeral: info.ephemeral,
                metadata: crate::convert::metadata(&info.metadata).map_err(api)?,
                ..InstanceSpec::new(addr.cluster, addr.ip, addr.port)
            };
            admit(ex, svc, &spec)?;
            let command = Command::Register {
                service: svc,
                instance: &spec,
                strict: false,
            };
            let mut body = Vec::new();
            beat_ok(&mut body, interval, true);
            return match app.writer.apply(command, ex.now) {
                Ok(Outcome::Done(_)) => {
                    scratch.body = body;
                    Ok(Reply::Json)
                }
                Ok(Outcome::Later(pending)) => {
                    let (g, n) = (grouped.clone(), req.namespace_id.to_owned());
                    Ok(later(pending, Done::Json(body), move |e| {
                        refused(e, &g, &n)
                    }))
                }
                Err(e) => Err(refused(e, &grouped, req.namespace_id)),
            };
        }
    }
    app.metrics.beats.inc();
    Ok(Reply::Json)
}

fn selector_text(selector: &Selector) -> Option<std::sync::Arc<str>> {
    match selector {
        Selector::None => None,
        other => serde_json::to_string(other).ok().map(std::sync::Arc::from),
    }
}

/// `POST /service` (`ServiceControllerV2.create`, `ServiceControllerV3.create`).
fn service_create(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let req = ServiceRequest::parse_create(&ex.params, &ex.app.parse_limits).map_err(api)?;
    let grouped = req.key.service.grouped();
    let spec = ServiceSpec {
        protect_threshold: req.protect_threshold,
        metadata: crate::convert::metadata(&req.metadata).map_err(api)?,
        selector: selector_text(&req.selector),
    };
    let command = Command::ServiceCreate {
        service: ServiceRef::new(req.key.namespace_id, &grouped),
        spec: &spec,
    };
    apply(ex, command, Door::Envelope, scratch)
}

/// `PUT /service`: threshold (default 0), metadata and selector replaced.
fn service_update(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let req = ServiceRequest::parse_create(&ex.params, &ex.app.parse_limits).map_err(api)?;
    let grouped = req.key.service.grouped();
    let metadata = crate::convert::metadata(&req.metadata).map_err(api)?;
    let selector = Some(
        selector_text(&req.selector).unwrap_or_else(|| std::sync::Arc::from(r#"{"type":"none"}"#)),
    );
    let svc = ServiceRef::new(req.key.namespace_id, &grouped);
    if ex.app.store.snapshot(svc).is_none() {
        return Err(api(ApiError::new(
            400,
            ErrorCode::ServiceNotExist,
            format!("service {grouped} not found!"),
        )));
    }
    let command = Command::ServiceUpdate {
        service: svc,
        protect_threshold: req.protect_threshold,
        metadata: Some(&metadata),
        selector: selector.as_ref(),
    };
    apply(ex, command, Door::Envelope, scratch)
}

/// `DELETE /service`: refused while it has instances (`{21009}`).
fn service_delete(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let key = registry_proto::naming::service::ServiceKey::parse(&ex.params, &ex.app.parse_limits)
        .map_err(api)?;
    let grouped = key.service.grouped();
    let svc = ServiceRef::new(key.namespace_id, &grouped);
    match ex.app.store.snapshot(svc) {
        None => Err(api(ApiError::new(
            400,
            ErrorCode::ServiceNotExist,
            format!("service {grouped} not found!"),
        ))),
        Some(s) if !s.instances().is_empty() => Err(api(ApiError::new(
            400,
            ErrorCode::ServiceDeleteFailure,
            format!(
                "Service {grouped} is not empty, can't be delete. Please unregister instance first"
            ),
        ))),
        Some(_) => apply(
            ex,
            Command::ServiceDelete { service: svc },
            Door::Envelope,
            scratch,
        ),
    }
}
