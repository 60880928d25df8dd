//! The later generations of the Nacos HTTP API: the v2 Open API
//! (`/nacos/v2/ns/...`, `/nacos/v2/console/namespace`), the v3 client API
//! (`/nacos/v3/client/ns/instance`), the v3 admin API (`/nacos/v3/admin/ns/...`,
//! `/nacos/v3/admin/core/namespace`) and the v3 login, plus the v1 console's
//! namespaces. Behaviour follows the Nacos 3.x source (its v2 and v3
//! controllers); where a form is the same as v1's, the v1 reader in
//! [`crate::naming`] is used and only its errors are put in the envelope.
//!
//! # Layout
//! - [`envelope`]: the `{"code","message","data"}` result, its error codes,
//!   and the mapping from parameter errors to them.
//! - [`route`]: the route table past the 1.x core (asked after it).
//! - [`instance`]: list forms, the v3 `heartBeat` flag, the `Instance` body.
//! - [`service`]: list forms, the v2 list, the v3 page, the service detail.
//! - [`namespace`]: namespace forms and bodies of every generation.
//! - [`admin`]: cluster, health-checker, log, 2.x client and status forms.
//! - [`param_check`]: Nacos's parameter checker, which answers before any
//!   v2/v3 naming controller.

pub mod admin;
pub mod envelope;
pub mod instance;
pub mod namespace;
pub mod param_check;
pub mod route;
pub mod service;
