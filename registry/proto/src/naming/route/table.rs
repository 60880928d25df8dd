//! The route table: every endpoint the registry serves, declared once.
//!
//! One row per route: its variant and stable name, the method and path it
//! answers, the API generation of its path, the server's handler family that
//! answers it, who may call it (auth), and where a cluster serves it (relayed
//! to the service's owner or not, served while the node loads or not). The
//! [`Route`] enum, [`Route::ALL`], the per-route accessors, the path index
//! `route()` resolves through (`super::index`) and `docs/endpoints.md` (a
//! test compares) are all derived from these rows, so adding an endpoint is
//! one line here and its handler's arm.
//!
//! The rows keep the order the enum always had: `Route::ALL` indexes the
//! metrics' label tables, and `/metrics` lists routes in that order.
//!
//! Path-level declarations sit below the rows: aliases Nacos serves for a
//! path, and the one path the web console shares with the API.

use super::{Access, Generation, Handler, InCluster, RouteSpec};
use crate::http1::Method;

/// A row's method token: `ANY` serves every method (a templated path).
macro_rules! method {
    (GET) => {
        Method::Get
    };
    (POST) => {
        Method::Post
    };
    (PUT) => {
        Method::Put
    };
    (DELETE) => {
        Method::Delete
    };
    (PATCH) => {
        Method::Patch
    };
    (ANY) => {
        Method::Get
    };
}

/// Whether a row's method token is `ANY`.
macro_rules! any_method {
    (ANY) => {
        true
    };
    ($other:ident) => {
        false
    };
}

/// The path `endpoint()` names: the row's `e.g.` one, else its own.
macro_rules! example {
    ($example:literal, $path:literal) => {
        $example
    };
    ($path:literal) => {
        $path
    };
}

/// Expands the rows into the enum, `Route::ALL` and `TABLE`.
macro_rules! routes {
    ($(
        $(#[doc = $doc:literal])*
        $route:ident $name:literal: $method:ident $path:literal $(e.g. $example:literal)?,
            $generation:ident, $handler:ident, $access:ident, $cluster:ident;
    )*) => {
        /// An endpoint: one row of the route table (`naming/route/table.rs`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Route {
            $(
                #[doc = concat!("`", stringify!($method), " ", $path, "`")]
                #[doc = ""]
                $(#[doc = $doc])*
                $route,
            )*
        }

        /// How many routes the table declares.
        pub(super) const COUNT: usize = [$(stringify!($route)),*].len();

        impl Route {
            /// Every route, in the table's order (metric label tables index it).
            pub const ALL: [Route; COUNT] = [$(Route::$route),*];
        }

        /// The rows, indexed by `Route as usize`.
        pub(super) static TABLE: [RouteSpec; COUNT] = [$(
            RouteSpec {
                route: Route::$route,
                name: $name,
                method: method!($method),
                any_method: any_method!($method),
                path: $path,
                example: example!($($example,)? $path),
                generation: Generation::$generation,
                handler: Handler::$handler,
                access: Access::$access,
                in_cluster: InCluster::$cluster,
            },
        )*];
    };
}

// Columns: variant name: method path, generation, handler, access, in a cluster.
//
// handler: Core (its own arm in the HTTP door's dispatch), Login, Cluster (the
// cluster's endpoints), V1 (`http::v1`), Open (`http::openapi`'s reads and
// namespaces), OpenWrite, OpenAdmin. access: Token (a valid token under
// `--auth-users`), Open (logins and probes), Peer (members, by the cluster
// secret). in a cluster: Owner (relayed to the service's owner), Here (served
// where it lands, once the node is ready), Always (even while it loads).
routes! {
    InstanceRegister "instance_register": POST "/nacos/v1/ns/instance", V1, Core, Token, Owner;
    InstanceDeregister "instance_deregister": DELETE "/nacos/v1/ns/instance", V1, Core, Token, Owner;
    InstanceUpdate "instance_update": PUT "/nacos/v1/ns/instance", V1, Core, Token, Owner;
    InstancePatch "instance_patch": PATCH "/nacos/v1/ns/instance", V1, Core, Token, Owner;
    InstanceDetail "instance_detail": GET "/nacos/v1/ns/instance", V1, Core, Token, Here;
    InstanceBeat "instance_beat": PUT "/nacos/v1/ns/instance/beat", V1, Core, Token, Owner;
    InstanceList "instance_list": GET "/nacos/v1/ns/instance/list", V1, Core, Token, Here;
    ServiceCreate "service_create": POST "/nacos/v1/ns/service", V1, Core, Token, Owner;
    ServiceDelete "service_delete": DELETE "/nacos/v1/ns/service", V1, Core, Token, Owner;
    ServiceUpdate "service_update": PUT "/nacos/v1/ns/service", V1, Core, Token, Owner;
    ServiceDetail "service_detail": GET "/nacos/v1/ns/service", V1, Core, Token, Here;
    ServiceList "service_list": GET "/nacos/v1/ns/service/list", V1, Core, Token, Here;
    OperatorMetrics "operator_metrics": GET "/nacos/v1/ns/operator/metrics", V1, Core, Token, Here;
    OperatorSwitches "operator_switches": GET "/nacos/v1/ns/operator/switches", V1, Core, Token, Here;
    /// (also `/nacos/v1/auth/users/login`)
    AuthLogin "auth_login": POST "/nacos/v1/auth/login", V1, Login, Open, Here;
    /// (Prometheus text)
    PrometheusMetrics "prometheus_metrics": GET "/metrics", Ours, Core, Open, Always;
    /// The cluster's members
    ClusterNodes "cluster_nodes": GET "/nacos/v1/core/cluster/nodes", V1, Cluster, Token, Always;
    /// A peer's probe
    ClusterReport "cluster_report": POST "/nacos/v1/core/cluster/report", V1, Cluster, Peer, Always;
    /// Replicated service states
    DistroReplicate "distro_replicate": PUT "/nacos/v1/ns/distro/datum", V1, Cluster, Peer, Always;
    /// A peer fetches named services
    DistroFetch "distro_fetch": POST "/nacos/v1/ns/distro/datum", V1, Cluster, Peer, Always;
    /// A peer's checksums
    DistroChecksum "distro_checksum": PUT "/nacos/v1/ns/distro/checksum", V1, Cluster, Peer, Always;
    /// A part of the full snapshot
    DistroSnapshot "distro_snapshot": POST "/nacos/v1/ns/distro/datums", V1, Cluster, Peer, Always;
    /// Replicated 2.x client sets
    DistroClients "distro_clients": PUT "/nacos/v1/ns/distro/clients", V1, Cluster, Peer, Always;
    /// A peer's client revisions
    DistroClientVerify "distro_client_verify": PUT "/nacos/v1/ns/distro/clients/verify", V1, Cluster, Peer, Always;
    /// A peer asks for this node's subscribers of one service
    DistroSubscribers "distro_subscribers": PUT "/nacos/v1/ns/distro/subscribers", V1, Cluster, Peer, Here;
    /// A peer's namespace table (a cluster without Raft), answered with
    /// this node's
    DistroNamespaces "distro_namespaces": PUT "/nacos/v1/ns/distro/namespaces", V1, Cluster, Peer, Always;
    Readiness "readiness": GET "/nacos/v1/console/health/readiness", V1, Cluster, Open, Always;
    /// A Raft peer message
    RaftRpc "raft_rpc": POST "/nacos/v1/core/raft", V1, Cluster, Peer, Always;
    /// An operator adds a member
    ClusterMemberAdd "cluster_member_add": POST "/nacos/v1/core/cluster/member", V1, Cluster, Token, Here;
    /// An operator removes one
    ClusterMemberRemove "cluster_member_remove": DELETE "/nacos/v1/core/cluster/member", V1, Cluster, Token, Here;
    MetadataBatchUpdate "metadata_batch_update": PUT "/nacos/v1/ns/instance/metadata/batch", V1, V1, Token, Here;
    MetadataBatchDelete "metadata_batch_delete": DELETE "/nacos/v1/ns/instance/metadata/batch", V1, V1, Token, Here;
    /// (also `/nacos/v1/ns/health`)
    HealthUpdate "health_update": PUT "/nacos/v1/ns/health/instance", V1, V1, Token, Here;
    OperatorSwitchesUpdate "operator_switches_update": PUT "/nacos/v1/ns/operator/switches", V1, V1, Token, Here;
    OperatorServers "operator_servers": GET "/nacos/v1/ns/operator/servers", V1, V1, Token, Here;
    RaftLeader "raft_leader": GET "/nacos/v1/ns/raft/leader", V1, V1, Token, Here;
    Liveness "liveness": GET "/nacos/v1/console/health/liveness", V1, V1, Open, Here;
    NamespacesCreate "namespaces_create": POST "/nacos/v1/console/namespaces", V1, V1, Token, Here;
    NamespacesUpdate "namespaces_update": PUT "/nacos/v1/console/namespaces", V1, V1, Token, Here;
    NamespacesDelete "namespaces_delete": DELETE "/nacos/v1/console/namespaces", V1, V1, Token, Here;
    V2InstanceRegister "v2_instance_register": POST "/nacos/v2/ns/instance", V2, OpenWrite, Token, Owner;
    V2InstanceDeregister "v2_instance_deregister": DELETE "/nacos/v2/ns/instance", V2, OpenWrite, Token, Owner;
    V2InstanceUpdate "v2_instance_update": PUT "/nacos/v2/ns/instance", V2, OpenWrite, Token, Owner;
    V2InstancePatch "v2_instance_patch": PATCH "/nacos/v2/ns/instance", V2, OpenWrite, Token, Owner;
    V2InstanceDetail "v2_instance_detail": GET "/nacos/v2/ns/instance", V2, Open, Token, Here;
    V2InstanceList "v2_instance_list": GET "/nacos/v2/ns/instance/list", V2, Open, Token, Here;
    V2InstanceBeat "v2_instance_beat": PUT "/nacos/v2/ns/instance/beat", V2, OpenWrite, Token, Owner;
    V2MetadataBatchUpdate "v2_metadata_batch_update": PUT "/nacos/v2/ns/instance/metadata/batch", V2, OpenWrite, Token, Here;
    V2MetadataBatchDelete "v2_metadata_batch_delete": DELETE "/nacos/v2/ns/instance/metadata/batch", V2, OpenWrite, Token, Here;
    V2ServiceCreate "v2_service_create": POST "/nacos/v2/ns/service", V2, OpenWrite, Token, Owner;
    V2ServiceDelete "v2_service_delete": DELETE "/nacos/v2/ns/service", V2, OpenWrite, Token, Owner;
    V2ServiceUpdate "v2_service_update": PUT "/nacos/v2/ns/service", V2, OpenWrite, Token, Owner;
    V2ServiceDetail "v2_service_detail": GET "/nacos/v2/ns/service", V2, Open, Token, Here;
    V2ServiceList "v2_service_list": GET "/nacos/v2/ns/service/list", V2, Open, Token, Here;
    /// (also `/nacos/v2/ns/health`)
    V2HealthUpdate "v2_health_update": PUT "/nacos/v2/ns/health/instance", V2, OpenWrite, Token, Here;
    /// (also `/nacos/v2/ns/ops/switches`)
    V2Switches "v2_switches": GET "/nacos/v2/ns/operator/switches", V2, Open, Token, Here;
    /// (also `/nacos/v2/ns/ops/switches`)
    V2SwitchesUpdate "v2_switches_update": PUT "/nacos/v2/ns/operator/switches", V2, OpenWrite, Token, Here;
    /// (also `/nacos/v2/ns/ops/metrics`)
    V2Metrics "v2_metrics": GET "/nacos/v2/ns/operator/metrics", V2, Open, Token, Here;
    V2ClientList "v2_client_list": GET "/nacos/v2/ns/client/list", V2, Open, Token, Here;
    V2NamespaceList "v2_namespace_list": GET "/nacos/v2/console/namespace/list", V2, Open, Token, Here;
    V2NamespaceDetail "v2_namespace_detail": GET "/nacos/v2/console/namespace", V2, Open, Token, Here;
    V2NamespaceCreate "v2_namespace_create": POST "/nacos/v2/console/namespace", V2, Open, Token, Here;
    V2NamespaceUpdate "v2_namespace_update": PUT "/nacos/v2/console/namespace", V2, Open, Token, Here;
    V2NamespaceDelete "v2_namespace_delete": DELETE "/nacos/v2/console/namespace", V2, Open, Token, Here;
    V3ClientRegister "v3_client_register": POST "/nacos/v3/client/ns/instance", V3, OpenWrite, Token, Owner;
    V3ClientDeregister "v3_client_deregister": DELETE "/nacos/v3/client/ns/instance", V3, OpenWrite, Token, Owner;
    V3ClientList "v3_client_list": GET "/nacos/v3/client/ns/instance/list", V3, Open, Token, Here;
    V3InstanceRegister "v3_instance_register": POST "/nacos/v3/admin/ns/instance", V3, OpenWrite, Token, Owner;
    V3InstanceDeregister "v3_instance_deregister": DELETE "/nacos/v3/admin/ns/instance", V3, OpenWrite, Token, Owner;
    V3InstanceUpdate "v3_instance_update": PUT "/nacos/v3/admin/ns/instance", V3, OpenWrite, Token, Owner;
    V3InstanceDetail "v3_instance_detail": GET "/nacos/v3/admin/ns/instance", V3, Open, Token, Here;
    V3InstancePartial "v3_instance_partial": PUT "/nacos/v3/admin/ns/instance/partial", V3, OpenWrite, Token, Owner;
    V3InstanceList "v3_instance_list": GET "/nacos/v3/admin/ns/instance/list", V3, Open, Token, Here;
    V3MetadataBatchUpdate "v3_metadata_batch_update": PUT "/nacos/v3/admin/ns/instance/metadata/batch", V3, OpenWrite, Token, Here;
    V3MetadataBatchDelete "v3_metadata_batch_delete": DELETE "/nacos/v3/admin/ns/instance/metadata/batch", V3, OpenWrite, Token, Here;
    V3ServiceCreate "v3_service_create": POST "/nacos/v3/admin/ns/service", V3, OpenWrite, Token, Owner;
    V3ServiceDelete "v3_service_delete": DELETE "/nacos/v3/admin/ns/service", V3, OpenWrite, Token, Owner;
    V3ServiceUpdate "v3_service_update": PUT "/nacos/v3/admin/ns/service", V3, OpenWrite, Token, Owner;
    V3ServiceDetail "v3_service_detail": GET "/nacos/v3/admin/ns/service", V3, Open, Token, Here;
    V3ServiceList "v3_service_list": GET "/nacos/v3/admin/ns/service/list", V3, Open, Token, Here;
    V3HealthUpdate "v3_health_update": PUT "/nacos/v3/admin/ns/health/instance", V3, OpenWrite, Token, Here;
    V3Switches "v3_switches": GET "/nacos/v3/admin/ns/ops/switches", V3, Open, Token, Here;
    V3SwitchesUpdate "v3_switches_update": PUT "/nacos/v3/admin/ns/ops/switches", V3, OpenWrite, Token, Here;
    V3Metrics "v3_metrics": GET "/nacos/v3/admin/ns/ops/metrics", V3, Open, Token, Here;
    V3ClientListAdmin "v3_admin_client_list": GET "/nacos/v3/admin/ns/client/list", V3, Open, Token, Here;
    /// A service's `ip:port_healthy` list, the key in the path
    V2InstanceStatuses "v2_instance_statuses": ANY "/nacos/v2/ns/instance/statuses/{key}"
        e.g. "/nacos/v2/ns/instance/statuses/DEFAULT_GROUP@@service", V2, OpenAdmin, Token, Here;
    V2ClientDetail "v2_client_detail": GET "/nacos/v2/ns/client", V2, OpenAdmin, Token, Here;
    V2ClientPublished "v2_client_published": GET "/nacos/v2/ns/client/publish/list", V2, OpenAdmin, Token, Here;
    V2ClientSubscribed "v2_client_subscribed": GET "/nacos/v2/ns/client/subscribe/list", V2, OpenAdmin, Token, Here;
    V2ServicePublishers "v2_client_service_publishers": GET "/nacos/v2/ns/client/service/publisher/list", V2, OpenAdmin, Token, Here;
    V2ServiceSubscriberClients "v2_client_service_subscribers": GET "/nacos/v2/ns/client/service/subscriber/list", V2, OpenAdmin, Token, Here;
    V3ClientDetail "v3_client_detail": GET "/nacos/v3/admin/ns/client", V3, OpenAdmin, Token, Here;
    V3ClientPublished "v3_client_published": GET "/nacos/v3/admin/ns/client/publish/list", V3, OpenAdmin, Token, Here;
    V3ClientSubscribed "v3_client_subscribed": GET "/nacos/v3/admin/ns/client/subscribe/list", V3, OpenAdmin, Token, Here;
    V3ServicePublishers "v3_client_service_publishers": GET "/nacos/v3/admin/ns/client/service/publisher/list", V3, OpenAdmin, Token, Here;
    V3ServiceSubscriberClients "v3_client_service_subscribers": GET "/nacos/v3/admin/ns/client/service/subscriber/list", V3, OpenAdmin, Token, Here;
    V3ClientDistro "v3_client_distro": GET "/nacos/v3/admin/ns/client/distro", V3, OpenAdmin, Token, Here;
    V3ClusterUpdate "v3_cluster_update": PUT "/nacos/v3/admin/ns/cluster", V3, OpenAdmin, Token, Here;
    V3ServiceSubscribers "v3_service_subscribers": GET "/nacos/v3/admin/ns/service/subscribers", V3, OpenAdmin, Token, Here;
    V3HealthCheckers "v3_health_checkers": GET "/nacos/v3/admin/ns/health/checkers", V3, OpenAdmin, Token, Here;
    V3OpsLog "v3_ops_log": PUT "/nacos/v3/admin/ns/ops/log", V3, OpenAdmin, Token, Here;
    V3SelectorTypes "v3_selector_types": GET "/nacos/v3/admin/ns/service/selector/types", V3, OpenAdmin, Token, Here;
    V3NamespaceList "v3_namespace_list": GET "/nacos/v3/admin/core/namespace/list", V3, Open, Token, Here;
    V3NamespaceDetail "v3_namespace_detail": GET "/nacos/v3/admin/core/namespace", V3, Open, Token, Here;
    V3NamespaceCreate "v3_namespace_create": POST "/nacos/v3/admin/core/namespace", V3, Open, Token, Here;
    V3NamespaceUpdate "v3_namespace_update": PUT "/nacos/v3/admin/core/namespace", V3, Open, Token, Here;
    V3NamespaceDelete "v3_namespace_delete": DELETE "/nacos/v3/admin/core/namespace", V3, Open, Token, Here;
    V3NamespaceCheck "v3_namespace_check": GET "/nacos/v3/admin/core/namespace/check", V3, Open, Token, Here;
    V3Login "v3_login": POST "/nacos/v3/auth/user/login", V3, Login, Open, Here;
    /// A service's push subscribers on every member (the console's list)
    ServiceSubscribers "service_subscribers": GET "/nacos/v1/ns/service/subscribers", V1, V1, Token, Here;
}

/// Other spellings Nacos serves for a path of the table: `(alias, path)`.
pub(super) const ALIASES: [(&str, &str); 3] = [
    ("/nacos/v1/auth/users/login", "/nacos/v1/auth/login"),
    ("/nacos/v1/ns/health", "/nacos/v1/ns/health/instance"),
    ("/nacos/v2/ns/health", "/nacos/v2/ns/health/instance"),
];

/// Prefixes Nacos serves for another: `(alias, prefix)`. v2's
/// `OperatorControllerV2` maps both `/operator` and `/ops`.
pub(super) const PREFIX_ALIASES: [(&str, &str); 1] =
    [("/nacos/v2/ns/ops/", "/nacos/v2/ns/operator/")];

/// Paths whose other methods are the web console's (the server's `console`
/// module, asked on a miss): a method the table does not list there is no
/// 405 but a miss. The console lists the namespaces with their service
/// counts on `GET`.
pub(super) const SHARED_WITH_CONSOLE: [&str; 1] = ["/nacos/v1/console/namespaces"];

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;

    /// `docs/endpoints.md` as the table writes it.
    fn endpoints_page() -> String {
        let mut page = String::from(
            "# Endpoints\n\n\
             Every HTTP endpoint the registry serves, one row per route of the route table\n\
             (`registry/proto/src/naming/route/table.rs`). Generated from it: a test in\n\
             `registry-proto` fails when this page and the table differ; regenerate with\n\
             `UPDATE_GOLDEN=1 cargo test -p registry-proto --lib endpoints_page`. The web\n\
             console's pages and read-only endpoints (`/nacos/`, `/nacos/v1/ns/catalog/...`,\n\
             `GET /nacos/v1/console/namespaces`) are the console's, outside the table.\n\n\
             `HEAD` is served wherever `GET` is, and one trailing slash is tolerated. Columns:\n\
             the handler family (`Core`: the HTTP door's own arms; `Cluster`: the cluster's\n\
             endpoints; `V1`: the v1 endpoints past the naming core; `Open`, `OpenWrite`,\n\
             `OpenAdmin`: the v2/v3 reads, writes and admin views; `Login`); access under\n\
             `--auth-users` (`Token`; `Open`: anyone; `Peer`: members, by the cluster secret);\n\
             in a cluster (`Owner`: relayed to the service's responsible node; `Here`: served\n\
             where it lands once the node is ready; `Always`: even while it loads).\n\n\
             | method | path | generation | handler | access | in a cluster | name |\n\
             | --- | --- | --- | --- | --- | --- | --- |\n",
        );
        for s in &TABLE {
            let method = if s.any_method {
                "any"
            } else {
                s.method.as_str()
            };
            let _ = writeln!(
                page,
                "| {method} | `{}` | {:?} | {:?} | {:?} | {:?} | `{}` |",
                s.path, s.generation, s.handler, s.access, s.in_cluster, s.name
            );
        }
        page.push_str("\n## Aliases\n\n| alias | path |\n| --- | --- |\n");
        for (alias, path) in ALIASES {
            let _ = writeln!(page, "| `{alias}` | `{path}` |");
        }
        for (alias, prefix) in PREFIX_ALIASES {
            let _ = writeln!(page, "| `{alias}...` | `{prefix}...` |");
        }
        page
    }

    #[test]
    fn endpoints_page_is_the_table() {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/endpoints.md");
        let page = endpoints_page();
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(file, &page).expect("write docs/endpoints.md");
        }
        let on_disk = std::fs::read_to_string(file).unwrap_or_default();
        assert!(
            on_disk == page,
            "docs/endpoints.md differs from the route table; regenerate it with \
             UPDATE_GOLDEN=1 cargo test -p registry-proto --lib endpoints_page"
        );
    }

    #[test]
    fn names_are_unique_and_snake_case() {
        let mut names: Vec<_> = TABLE.iter().map(|s| s.name).collect();
        assert!(names.iter().all(|n| n
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), COUNT);
        for (i, s) in TABLE.iter().enumerate() {
            assert_eq!(s.route as usize, i, "{}", s.name);
        }
    }
}
