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
use registry_proto::openapi::envelope::{self, ApiError, ErrorCode};
use registry_proto::openapi::namespace::{
    encode_list, encode_one, namespace_id_param, Door, NamespaceForm, NamespaceView, TYPE_CUSTOM,
    TYPE_GLOBAL,
};
use registry_proto::params::Params;
use registry_proto::ProtoError;

use super::error::{namespace_refusal, Failure};
use super::{Done, Exchange, Reply, Scratch};
use crate::namespaces::BookError;
use crate::write::{Command, Outcome, WriteError};

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

/// A namespace change, parsed: the command's owned parts.
enum Change {
    Create(Namespace),
    Update(Namespace),
    Delete(String),
}

fn create(ex: &Exchange<'_>, door: Door) -> Result<Change, ProtoError> {
    let form = NamespaceForm::parse_create(&ex.params, door)?;
    let id = match form.id.trim() {
        "" => made_up_id(),
        id => id.to_owned(),
    };
    Ok(Change::Create(record(&form, id)))
}

fn update(ex: &Exchange<'_>, door: Door) -> Result<Change, ProtoError> {
    let form = NamespaceForm::parse_update(&ex.params, door)?;
    let id = form.id.to_owned();
    Ok(Change::Update(record(&form, id)))
}

/// How a door renders a namespace change's result.
#[derive(Clone, Copy)]
enum Answer {
    /// v1: `true`, or `false` for a refusal; other failures as 1.x errors.
    Text,
    /// v2/v3: the envelope with `true`, or its error.
    Envelope,
}

impl Answer {
    fn done(self) -> Done {
        match self {
            Answer::Text => Done::Text("true"),
            Answer::Envelope => {
                let mut body = Vec::new();
                envelope::success(&mut body, |o| o.extend_from_slice(b"true"));
                Done::Json(body)
            }
        }
    }

    /// A write that was not made. A delete of an unknown namespace is no
    /// error (as in Nacos): the caller turns it into `done` first.
    fn refused(self, e: WriteError) -> Failure {
        match (self, e) {
            // Nacos answers a refused v1 change with 200 `false` (here
            // once the Raft log refused it; see `apply` for the rest).
            (Answer::Text, WriteError::Namespace(BookError::Refused(_))) => {
                Failure::new(200, "false")
            }
            (Answer::Text, e) => super::error::write(e, super::error::Op::Patch),
            (Answer::Envelope, WriteError::Namespace(e)) => namespace_refusal(&e).into(),
            (Answer::Envelope, e) => {
                let plain = super::error::write(e, super::error::Op::Patch);
                ApiError::new(
                    plain.status,
                    ErrorCode::ServerError,
                    plain.text.into_owned(),
                )
                .into()
            }
        }
    }
}

/// Whether `e` is a delete's "no such namespace", which answers success.
fn gone(delete: bool, e: &WriteError) -> bool {
    delete
        && matches!(
            e,
            WriteError::Namespace(BookError::Refused(NamespaceError::NotFound(_)))
        )
}

/// Applies `change` through the write path and answers in `answer`'s
/// format: now, or (in a Raft cluster) once the log committed it.
fn apply(
    ex: &Exchange<'_>,
    change: Change,
    answer: Answer,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    let command = match &change {
        Change::Create(namespace) => Command::NamespaceCreate { namespace },
        Change::Update(namespace) => Command::NamespaceUpdate { namespace },
        Change::Delete(id) => Command::NamespaceDelete { id },
    };
    let delete = matches!(change, Change::Delete(_));
    let now_done = |scratch: &mut Scratch| match answer.done() {
        Done::Json(body) => {
            scratch.body = body;
            Ok(Reply::Json)
        }
        _ => Ok(Reply::Text("true")),
    };
    match ex.app.writer.apply(command, ex.now) {
        Ok(Outcome::Done(_)) => now_done(scratch),
        Err(e) if gone(delete, &e) => now_done(scratch),
        Err(WriteError::Namespace(BookError::Refused(_))) if matches!(answer, Answer::Text) => {
            Ok(Reply::Text("false"))
        }
        Err(e) => Err(answer.refused(e)),
        Ok(Outcome::Later(pending)) => Ok(Reply::Later(Box::pin(async move {
            match pending.await {
                Ok(_) => Ok(answer.done()),
                Err(e) if gone(delete, &e) => Ok(answer.done()),
                Err(e) => Err(answer.refused(e)),
            }
        }))),
    }
}

/// `/nacos/v1/console/namespaces`: POST, PUT, DELETE (the list is the
/// console's, [`crate::console`]).
pub(crate) fn v1(
    ex: &Exchange<'_>,
    method: registry_proto::http1::Method,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    use registry_proto::http1::Method;
    let change = match method {
        Method::Post => create(ex, Door::V1)?,
        Method::Put => update(ex, Door::V1)?,
        Method::Delete => Change::Delete(ex.params.required("namespaceId")?.to_owned()),
        _ => return Err(Failure::new(405, "no such api")),
    };
    apply(ex, change, Answer::Text, scratch)
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

fn id_param<'a>(params: &'a Params<'_>) -> Result<&'a str, Failure> {
    namespace_id_param(params).map_err(Failure::from)
}

/// The v2 console and v3 admin namespace endpoints.
pub(crate) fn open(
    ex: &Exchange<'_>,
    action: Action,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    let table = ex.app.namespaces.table();
    let bad = |e: ProtoError| Failure::from(ApiError::from(e));
    let out = &mut scratch.body;
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
        Action::Create => {
            let change = create(ex, Door::Open).map_err(bad)?;
            apply(ex, change, Answer::Envelope, scratch)
        }
        Action::Update => {
            let change = update(ex, Door::Open).map_err(bad)?;
            apply(ex, change, Answer::Envelope, scratch)
        }
        Action::Delete => {
            let id = id_param(&ex.params)?.to_owned();
            apply(ex, Change::Delete(id), Answer::Envelope, scratch)
        }
        Action::Check => {
            let id = id_param(&ex.params)?;
            let n = u8::from(!id.is_empty() && table.exists(id));
            envelope::success(out, |o| o.push(b'0' + n));
            Ok(Reply::Json)
        }
    }
}
