//! Namespace endpoints of every door over one [`crate::namespaces::NamespaceBook`]:
//! v1 `/nacos/v1/console/namespaces` (console `NamespaceController`: a
//! `RestResult` list, `true`/`false` texts for writes), v2
//! `/nacos/v2/console/namespace` and v3 `/nacos/v3/admin/core/namespace`
//! (`NamespaceControllerV3`: the `Result` envelope).
//!
//! As in Nacos, a create with an empty id makes one up (a random UUID),
//! and deleting an unknown namespace answers `true`. Unlike Nacos, a
//! namespace holding services is not deleted (v1 `false`; v2/v3 `{23000}`
//! naming the services), and the default namespace cannot be changed.

use registry_core::namespace::NamespaceError;
use registry_core::{Namespace, Quota};
use registry_proto::openapi::envelope::{self, ApiError};
use registry_proto::openapi::namespace::{
    encode_list, encode_one, namespace_id_param, Door, NamespaceForm, NamespaceView, TYPE_CUSTOM,
    TYPE_GLOBAL,
};
use registry_proto::params::Params;
use registry_proto::ProtoError;

use super::error::{namespace_refusal, Failure};
use super::{Exchange, Reply, Scratch};
use crate::namespaces::BookError;

fn view(n: &Namespace) -> NamespaceView<'_> {
    NamespaceView {
        namespace: &n.id,
        namespace_show_name: &n.name,
        namespace_desc: &n.desc,
        quota: registry_core::namespace::NACOS_REPORTED_QUOTA,
        config_count: 0,
        kind: if n.is_default() {
            TYPE_GLOBAL
        } else {
            TYPE_CUSTOM
        },
        max_services: n.quota.max_services,
        max_instances: n.quota.max_instances,
    }
}

fn record(form: &NamespaceForm<'_>, id: String) -> Namespace {
    Namespace {
        id,
        name: form.name.to_owned(),
        desc: form.desc.to_owned(),
        quota: Quota {
            max_services: form.max_services,
            max_instances: form.max_instances,
        },
    }
}

/// A fresh id for a create without one (Nacos: `UUID.randomUUID()`).
fn made_up_id() -> String {
    let mut b = [0u8; 16];
    // Without OS randomness, a time-based id is still unique enough for
    // an administrative create.
    if getrandom::fill(&mut b).is_err() {
        b[..8].copy_from_slice(&crate::clock::Clock::wall_ms().to_le_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

fn create(ex: &Exchange<'_>, door: Door) -> Result<(), Result<BookError, ProtoError>> {
    let form = NamespaceForm::parse_create(&ex.params, door).map_err(Err)?;
    let id = match form.id.trim() {
        "" => made_up_id(),
        id => id.to_owned(),
    };
    ex.app.namespaces.create(record(&form, id)).map_err(Ok)
}

fn update(ex: &Exchange<'_>, door: Door) -> Result<(), Result<BookError, ProtoError>> {
    let form = NamespaceForm::parse_update(&ex.params, door).map_err(Err)?;
    let id = form.id.to_owned();
    ex.app.namespaces.update(record(&form, id)).map_err(Ok)
}

/// Deletes `id`; an unknown namespace is no error (as in Nacos).
fn delete(ex: &Exchange<'_>, id: &str) -> Result<(), BookError> {
    match ex.app.namespaces.delete(id, &ex.app.store) {
        Err(BookError::Refused(NamespaceError::NotFound(_))) => Ok(()),
        other => other,
    }
}

fn v1_bool(done: Result<(), Result<BookError, ProtoError>>) -> Result<Reply, Failure> {
    match done {
        Ok(()) => Ok(Reply::Text("true")),
        Err(Ok(_refused)) => Ok(Reply::Text("false")),
        Err(Err(bad_input)) => Err(bad_input.into()),
    }
}

/// `/nacos/v1/console/namespaces`: POST, PUT, DELETE (the list is the
/// console's, [`crate::console`]).
pub(crate) fn v1(
    ex: &Exchange<'_>,
    method: registry_proto::http1::Method,
) -> Result<Reply, Failure> {
    use registry_proto::http1::Method;
    match method {
        Method::Post => v1_bool(create(ex, Door::V1)),
        Method::Put => v1_bool(update(ex, Door::V1)),
        Method::Delete => {
            let id = ex.params.required("namespaceId")?;
            v1_bool(delete(ex, id).map_err(Ok))
        }
        _ => Err(Failure::new(405, "no such api")),
    }
}

/// What a v2/v3 namespace endpoint does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// `GET /list`.
    List,
    /// `GET ?namespaceId`.
    Detail,
    /// `POST`.
    Create,
    /// `PUT`.
    Update,
    /// `DELETE`.
    Delete,
    /// `GET /check`: 1 if the id exists, else 0.
    Check,
}

fn envelope_bool(
    done: Result<(), Result<BookError, ProtoError>>,
    out: &mut Vec<u8>,
) -> Result<Reply, Failure> {
    match done {
        Ok(()) => {
            envelope::success(out, |o| o.extend_from_slice(b"true"));
            Ok(Reply::Json)
        }
        Err(Ok(refused)) => Err(namespace_refusal(&refused).into()),
        Err(Err(bad_input)) => Err(ApiError::from(bad_input).into()),
    }
}

fn id_param<'a>(params: &'a Params<'_>) -> Result<&'a str, Failure> {
    namespace_id_param(params).map_err(Failure::from)
}

/// The v2 console and v3 admin namespace endpoints.
pub(crate) fn open(
    ex: &Exchange<'_>,
    action: Action,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    let out = &mut scratch.body;
    let table = ex.app.namespaces.table();
    match action {
        Action::List => {
            let all = table.list();
            let views: Vec<_> = all.iter().map(view).collect();
            envelope::success(out, |o| encode_list(o, &views));
            Ok(Reply::Json)
        }
        Action::Detail => {
            let id = id_param(&ex.params)?;
            let Some(n) = table.get(id) else {
                return Err(
                    namespace_refusal(&BookError::Refused(NamespaceError::NotFound(id.to_owned())))
                        .into(),
                );
            };
            envelope::success(out, |o| encode_one(o, &view(&n)));
            Ok(Reply::Json)
        }
        Action::Create => envelope_bool(create(ex, Door::Open), out),
        Action::Update => envelope_bool(update(ex, Door::Open), out),
        Action::Delete => {
            let id = id_param(&ex.params)?;
            envelope_bool(delete(ex, id).map_err(Ok), out)
        }
        Action::Check => {
            let id = id_param(&ex.params)?;
            let n = u8::from(!id.is_empty() && table.exists(id));
            envelope::success(out, |o| o.push(b'0' + n));
            Ok(Reply::Json)
        }
    }
}
