//! The route table: `(method, path)` to the endpoint it names.
//!
//! Names every endpoint the registry serves and resolves the 1.x core of them (the
//! later generations' paths are resolved by [`crate::openapi::route`], which asks
//! this table first): the naming API under `/nacos/v1/ns/`, the
//! login endpoint, our Prometheus `/metrics`, and the cluster's member list, readiness
//! and peer endpoints (see [`crate::distro`]). One trailing slash is tolerated.
//! `HEAD` resolves like `GET` (as in Spring); the server must then omit the body.
//!
//! Errors: a path under `/nacos/v1/ns/` that names no endpoint is 501
//! `no such api:<METHOD>:<path>` (Nacos `DistroFilter`); a known path with a method it
//! does not serve is 405 with an `Allow` list (Nacos answers 501 here too, because its
//! lookup is keyed by method and path; 405 is the HTTP-correct answer and no client
//! depends on the difference); any other path is 404.

use super::API_PREFIX;
use crate::http1::Method;

/// An endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// `POST /nacos/v1/ns/instance`
    InstanceRegister,
    /// `DELETE /nacos/v1/ns/instance`
    InstanceDeregister,
    /// `PUT /nacos/v1/ns/instance`
    InstanceUpdate,
    /// `PATCH /nacos/v1/ns/instance`
    InstancePatch,
    /// `GET /nacos/v1/ns/instance`
    InstanceDetail,
    /// `PUT /nacos/v1/ns/instance/beat`
    InstanceBeat,
    /// `GET /nacos/v1/ns/instance/list`
    InstanceList,
    /// `POST /nacos/v1/ns/service`
    ServiceCreate,
    /// `DELETE /nacos/v1/ns/service`
    ServiceDelete,
    /// `PUT /nacos/v1/ns/service`
    ServiceUpdate,
    /// `GET /nacos/v1/ns/service`
    ServiceDetail,
    /// `GET /nacos/v1/ns/service/list`
    ServiceList,
    /// `GET /nacos/v1/ns/operator/metrics`
    OperatorMetrics,
    /// `GET /nacos/v1/ns/operator/switches`
    OperatorSwitches,
    /// `POST /nacos/v1/auth/login` (also `/nacos/v1/auth/users/login`)
    AuthLogin,
    /// `GET /metrics` (Prometheus text)
    PrometheusMetrics,
    /// `GET /nacos/v1/core/cluster/nodes`: the cluster's members
    ClusterNodes,
    /// `POST /nacos/v1/core/cluster/report`: a peer's probe
    ClusterReport,
    /// `PUT /nacos/v1/ns/distro/datum`: replicated service states
    DistroReplicate,
    /// `POST /nacos/v1/ns/distro/datum`: a peer fetches named services
    DistroFetch,
    /// `PUT /nacos/v1/ns/distro/checksum`: a peer's checksums
    DistroChecksum,
    /// `POST /nacos/v1/ns/distro/datums`: a part of the full snapshot
    DistroSnapshot,
    /// `PUT /nacos/v1/ns/distro/clients`: replicated 2.x client sets
    DistroClients,
    /// `PUT /nacos/v1/ns/distro/clients/verify`: a peer's client revisions
    DistroClientVerify,
    /// `PUT /nacos/v1/ns/distro/subscribers`: a peer asks for this node's
    /// subscribers of one service
    DistroSubscribers,
    /// `PUT /nacos/v1/ns/distro/namespaces`: a peer's namespace table (a
    /// cluster without Raft), answered with this node's
    DistroNamespaces,
    /// `GET /nacos/v1/console/health/readiness`
    Readiness,
    /// `POST /nacos/v1/core/raft`: a Raft peer message
    RaftRpc,
    /// `POST /nacos/v1/core/cluster/member`: an operator adds a member
    ClusterMemberAdd,
    /// `DELETE /nacos/v1/core/cluster/member`: an operator removes one
    ClusterMemberRemove,
    // The endpoints below are resolved by `crate::openapi::route`.
    /// `PUT /nacos/v1/ns/instance/metadata/batch`
    MetadataBatchUpdate,
    /// `DELETE /nacos/v1/ns/instance/metadata/batch`
    MetadataBatchDelete,
    /// `PUT /nacos/v1/ns/health/instance`
    HealthUpdate,
    /// `PUT /nacos/v1/ns/operator/switches`
    OperatorSwitchesUpdate,
    /// `GET /nacos/v1/ns/operator/servers`
    OperatorServers,
    /// `GET /nacos/v1/ns/raft/leader`
    RaftLeader,
    /// `GET /nacos/v1/console/health/liveness`
    Liveness,
    /// `POST /nacos/v1/console/namespaces`
    NamespacesCreate,
    /// `PUT /nacos/v1/console/namespaces`
    NamespacesUpdate,
    /// `DELETE /nacos/v1/console/namespaces`
    NamespacesDelete,
    /// `POST /nacos/v2/ns/instance`
    V2InstanceRegister,
    /// `DELETE /nacos/v2/ns/instance`
    V2InstanceDeregister,
    /// `PUT /nacos/v2/ns/instance`
    V2InstanceUpdate,
    /// `PATCH /nacos/v2/ns/instance`
    V2InstancePatch,
    /// `GET /nacos/v2/ns/instance`
    V2InstanceDetail,
    /// `GET /nacos/v2/ns/instance/list`
    V2InstanceList,
    /// `PUT /nacos/v2/ns/instance/beat`
    V2InstanceBeat,
    /// `PUT /nacos/v2/ns/instance/metadata/batch`
    V2MetadataBatchUpdate,
    /// `DELETE /nacos/v2/ns/instance/metadata/batch`
    V2MetadataBatchDelete,
    /// `POST /nacos/v2/ns/service`
    V2ServiceCreate,
    /// `DELETE /nacos/v2/ns/service`
    V2ServiceDelete,
    /// `PUT /nacos/v2/ns/service`
    V2ServiceUpdate,
    /// `GET /nacos/v2/ns/service`
    V2ServiceDetail,
    /// `GET /nacos/v2/ns/service/list`
    V2ServiceList,
    /// `PUT /nacos/v2/ns/health/instance`
    V2HealthUpdate,
    /// `GET /nacos/v2/ns/operator/switches`
    V2Switches,
    /// `PUT /nacos/v2/ns/operator/switches`
    V2SwitchesUpdate,
    /// `GET /nacos/v2/ns/operator/metrics`
    V2Metrics,
    /// `GET /nacos/v2/ns/client/list`
    V2ClientList,
    /// `GET /nacos/v2/console/namespace/list`
    V2NamespaceList,
    /// `GET /nacos/v2/console/namespace`
    V2NamespaceDetail,
    /// `POST /nacos/v2/console/namespace`
    V2NamespaceCreate,
    /// `PUT /nacos/v2/console/namespace`
    V2NamespaceUpdate,
    /// `DELETE /nacos/v2/console/namespace`
    V2NamespaceDelete,
    /// `POST /nacos/v3/client/ns/instance`
    V3ClientRegister,
    /// `DELETE /nacos/v3/client/ns/instance`
    V3ClientDeregister,
    /// `GET /nacos/v3/client/ns/instance/list`
    V3ClientList,
    /// `POST /nacos/v3/admin/ns/instance`
    V3InstanceRegister,
    /// `DELETE /nacos/v3/admin/ns/instance`
    V3InstanceDeregister,
    /// `PUT /nacos/v3/admin/ns/instance`
    V3InstanceUpdate,
    /// `GET /nacos/v3/admin/ns/instance`
    V3InstanceDetail,
    /// `PUT /nacos/v3/admin/ns/instance/partial`
    V3InstancePartial,
    /// `GET /nacos/v3/admin/ns/instance/list`
    V3InstanceList,
    /// `PUT /nacos/v3/admin/ns/instance/metadata/batch`
    V3MetadataBatchUpdate,
    /// `DELETE /nacos/v3/admin/ns/instance/metadata/batch`
    V3MetadataBatchDelete,
    /// `POST /nacos/v3/admin/ns/service`
    V3ServiceCreate,
    /// `DELETE /nacos/v3/admin/ns/service`
    V3ServiceDelete,
    /// `PUT /nacos/v3/admin/ns/service`
    V3ServiceUpdate,
    /// `GET /nacos/v3/admin/ns/service`
    V3ServiceDetail,
    /// `GET /nacos/v3/admin/ns/service/list`
    V3ServiceList,
    /// `PUT /nacos/v3/admin/ns/health/instance`
    V3HealthUpdate,
    /// `GET /nacos/v3/admin/ns/ops/switches`
    V3Switches,
    /// `PUT /nacos/v3/admin/ns/ops/switches`
    V3SwitchesUpdate,
    /// `GET /nacos/v3/admin/ns/ops/metrics`
    V3Metrics,
    /// `GET /nacos/v3/admin/ns/client/list`
    V3ClientListAdmin,
    /// `/nacos/v2/ns/instance/statuses/{key}` (any method): a service's `ip:port_healthy` list
    V2InstanceStatuses,
    /// `GET /nacos/v2/ns/client`
    V2ClientDetail,
    /// `GET /nacos/v2/ns/client/publish/list`
    V2ClientPublished,
    /// `GET /nacos/v2/ns/client/subscribe/list`
    V2ClientSubscribed,
    /// `GET /nacos/v2/ns/client/service/publisher/list`
    V2ServicePublishers,
    /// `GET /nacos/v2/ns/client/service/subscriber/list`
    V2ServiceSubscriberClients,
    /// `GET /nacos/v3/admin/ns/client`
    V3ClientDetail,
    /// `GET /nacos/v3/admin/ns/client/publish/list`
    V3ClientPublished,
    /// `GET /nacos/v3/admin/ns/client/subscribe/list`
    V3ClientSubscribed,
    /// `GET /nacos/v3/admin/ns/client/service/publisher/list`
    V3ServicePublishers,
    /// `GET /nacos/v3/admin/ns/client/service/subscriber/list`
    V3ServiceSubscriberClients,
    /// `GET /nacos/v3/admin/ns/client/distro`
    V3ClientDistro,
    /// `PUT /nacos/v3/admin/ns/cluster`
    V3ClusterUpdate,
    /// `GET /nacos/v3/admin/ns/service/subscribers`
    V3ServiceSubscribers,
    /// `GET /nacos/v3/admin/ns/health/checkers`
    V3HealthCheckers,
    /// `PUT /nacos/v3/admin/ns/ops/log`
    V3OpsLog,
    /// `GET /nacos/v3/admin/ns/service/selector/types`
    V3SelectorTypes,
    /// `GET /nacos/v3/admin/core/namespace/list`
    V3NamespaceList,
    /// `GET /nacos/v3/admin/core/namespace`
    V3NamespaceDetail,
    /// `POST /nacos/v3/admin/core/namespace`
    V3NamespaceCreate,
    /// `PUT /nacos/v3/admin/core/namespace`
    V3NamespaceUpdate,
    /// `DELETE /nacos/v3/admin/core/namespace`
    V3NamespaceDelete,
    /// `GET /nacos/v3/admin/core/namespace/check`
    V3NamespaceCheck,
    /// `POST /nacos/v3/auth/user/login`
    V3Login,
    /// `GET /nacos/v1/ns/service/subscribers`: a service's push
    /// subscribers on every member (the console's list)
    ServiceSubscribers,
}

impl Route {
    /// Every route, for tests and metric label tables.
    pub const ALL: [Route; 110] = [
        Route::InstanceRegister,
        Route::InstanceDeregister,
        Route::InstanceUpdate,
        Route::InstancePatch,
        Route::InstanceDetail,
        Route::InstanceBeat,
        Route::InstanceList,
        Route::ServiceCreate,
        Route::ServiceDelete,
        Route::ServiceUpdate,
        Route::ServiceDetail,
        Route::ServiceList,
        Route::OperatorMetrics,
        Route::OperatorSwitches,
        Route::AuthLogin,
        Route::PrometheusMetrics,
        Route::ClusterNodes,
        Route::ClusterReport,
        Route::DistroReplicate,
        Route::DistroFetch,
        Route::DistroChecksum,
        Route::DistroSnapshot,
        Route::DistroClients,
        Route::DistroClientVerify,
        Route::DistroSubscribers,
        Route::DistroNamespaces,
        Route::Readiness,
        Route::RaftRpc,
        Route::ClusterMemberAdd,
        Route::ClusterMemberRemove,
        Route::MetadataBatchUpdate,
        Route::MetadataBatchDelete,
        Route::HealthUpdate,
        Route::OperatorSwitchesUpdate,
        Route::OperatorServers,
        Route::RaftLeader,
        Route::Liveness,
        Route::NamespacesCreate,
        Route::NamespacesUpdate,
        Route::NamespacesDelete,
        Route::V2InstanceRegister,
        Route::V2InstanceDeregister,
        Route::V2InstanceUpdate,
        Route::V2InstancePatch,
        Route::V2InstanceDetail,
        Route::V2InstanceList,
        Route::V2InstanceBeat,
        Route::V2MetadataBatchUpdate,
        Route::V2MetadataBatchDelete,
        Route::V2ServiceCreate,
        Route::V2ServiceDelete,
        Route::V2ServiceUpdate,
        Route::V2ServiceDetail,
        Route::V2ServiceList,
        Route::V2HealthUpdate,
        Route::V2Switches,
        Route::V2SwitchesUpdate,
        Route::V2Metrics,
        Route::V2ClientList,
        Route::V2NamespaceList,
        Route::V2NamespaceDetail,
        Route::V2NamespaceCreate,
        Route::V2NamespaceUpdate,
        Route::V2NamespaceDelete,
        Route::V3ClientRegister,
        Route::V3ClientDeregister,
        Route::V3ClientList,
        Route::V3InstanceRegister,
        Route::V3InstanceDeregister,
        Route::V3InstanceUpdate,
        Route::V3InstanceDetail,
        Route::V3InstancePartial,
        Route::V3InstanceList,
        Route::V3MetadataBatchUpdate,
        Route::V3MetadataBatchDelete,
        Route::V3ServiceCreate,
        Route::V3ServiceDelete,
        Route::V3ServiceUpdate,
        Route::V3ServiceDetail,
        Route::V3ServiceList,
        Route::V3HealthUpdate,
        Route::V3Switches,
        Route::V3SwitchesUpdate,
        Route::V3Metrics,
        Route::V3ClientListAdmin,
        Route::V2InstanceStatuses,
        Route::V2ClientDetail,
        Route::V2ClientPublished,
        Route::V2ClientSubscribed,
        Route::V2ServicePublishers,
        Route::V2ServiceSubscriberClients,
        Route::V3ClientDetail,
        Route::V3ClientPublished,
        Route::V3ClientSubscribed,
        Route::V3ServicePublishers,
        Route::V3ServiceSubscriberClients,
        Route::V3ClientDistro,
        Route::V3ClusterUpdate,
        Route::V3ServiceSubscribers,
        Route::V3HealthCheckers,
        Route::V3OpsLog,
        Route::V3SelectorTypes,
        Route::V3NamespaceList,
        Route::V3NamespaceDetail,
        Route::V3NamespaceCreate,
        Route::V3NamespaceUpdate,
        Route::V3NamespaceDelete,
        Route::V3NamespaceCheck,
        Route::V3Login,
        Route::ServiceSubscribers,
    ];

    /// A short stable name (`instance_beat`), for logs and metric labels.
    /// (One arm per route: as long as the route enum, not logic to split.)
    pub fn name(self) -> &'static str {
        match self {
            Route::InstanceRegister => "instance_register",
            Route::InstanceDeregister => "instance_deregister",
            Route::InstanceUpdate => "instance_update",
            Route::InstancePatch => "instance_patch",
            Route::InstanceDetail => "instance_detail",
            Route::InstanceBeat => "instance_beat",
            Route::InstanceList => "instance_list",
            Route::ServiceCreate => "service_create",
            Route::ServiceDelete => "service_delete",
            Route::ServiceUpdate => "service_update",
            Route::ServiceDetail => "service_detail",
            Route::ServiceList => "service_list",
            Route::OperatorMetrics => "operator_metrics",
            Route::OperatorSwitches => "operator_switches",
            Route::AuthLogin => "auth_login",
            Route::PrometheusMetrics => "prometheus_metrics",
            Route::ClusterNodes => "cluster_nodes",
            Route::ClusterReport => "cluster_report",
            Route::DistroReplicate => "distro_replicate",
            Route::DistroFetch => "distro_fetch",
            Route::DistroChecksum => "distro_checksum",
            Route::DistroSnapshot => "distro_snapshot",
            Route::DistroClients => "distro_clients",
            Route::DistroClientVerify => "distro_client_verify",
            Route::DistroSubscribers => "distro_subscribers",
            Route::DistroNamespaces => "distro_namespaces",
            Route::Readiness => "readiness",
            Route::RaftRpc => "raft_rpc",
            Route::ClusterMemberAdd => "cluster_member_add",
            Route::ClusterMemberRemove => "cluster_member_remove",
            Route::MetadataBatchUpdate => "metadata_batch_update",
            Route::MetadataBatchDelete => "metadata_batch_delete",
            Route::HealthUpdate => "health_update",
            Route::OperatorSwitchesUpdate => "operator_switches_update",
            Route::OperatorServers => "operator_servers",
            Route::RaftLeader => "raft_leader",
            Route::Liveness => "liveness",
            Route::NamespacesCreate => "namespaces_create",
            Route::NamespacesUpdate => "namespaces_update",
            Route::NamespacesDelete => "namespaces_delete",
            Route::V2InstanceRegister => "v2_instance_register",
            Route::V2InstanceDeregister => "v2_instance_deregister",
            Route::V2InstanceUpdate => "v2_instance_update",
            Route::V2InstancePatch => "v2_instance_patch",
            Route::V2InstanceDetail => "v2_instance_detail",
            Route::V2InstanceList => "v2_instance_list",
            Route::V2InstanceBeat => "v2_instance_beat",
            Route::V2MetadataBatchUpdate => "v2_metadata_batch_update",
            Route::V2MetadataBatchDelete => "v2_metadata_batch_delete",
            Route::V2ServiceCreate => "v2_service_create",
            Route::V2ServiceDelete => "v2_service_delete",
            Route::V2ServiceUpdate => "v2_service_update",
            Route::V2ServiceDetail => "v2_service_detail",
            Route::V2ServiceList => "v2_service_list",
            Route::V2HealthUpdate => "v2_health_update",
            Route::V2Switches => "v2_switches",
            Route::V2SwitchesUpdate => "v2_switches_update",
            Route::V2Metrics => "v2_metrics",
            Route::V2ClientList => "v2_client_list",
            Route::V2NamespaceList => "v2_namespace_list",
            Route::V2NamespaceDetail => "v2_namespace_detail",
            Route::V2NamespaceCreate => "v2_namespace_create",
            Route::V2NamespaceUpdate => "v2_namespace_update",
            Route::V2NamespaceDelete => "v2_namespace_delete",
            Route::V3ClientRegister => "v3_client_register",
            Route::V3ClientDeregister => "v3_client_deregister",
            Route::V3ClientList => "v3_client_list",
            Route::V3InstanceRegister => "v3_instance_register",
            Route::V3InstanceDeregister => "v3_instance_deregister",
            Route::V3InstanceUpdate => "v3_instance_update",
            Route::V3InstanceDetail => "v3_instance_detail",
            Route::V3InstancePartial => "v3_instance_partial",
            Route::V3InstanceList => "v3_instance_list",
            Route::V3MetadataBatchUpdate => "v3_metadata_batch_update",
            Route::V3MetadataBatchDelete => "v3_metadata_batch_delete",
            Route::V3ServiceCreate => "v3_service_create",
            Route::V3ServiceDelete => "v3_service_delete",
            Route::V3ServiceUpdate => "v3_service_update",
            Route::V3ServiceDetail => "v3_service_detail",
            Route::V3ServiceList => "v3_service_list",
            Route::V3HealthUpdate => "v3_health_update",
            Route::V3Switches => "v3_switches",
            Route::V3SwitchesUpdate => "v3_switches_update",
            Route::V3Metrics => "v3_metrics",
            Route::V3ClientListAdmin => "v3_admin_client_list",
            Route::V2InstanceStatuses => "v2_instance_statuses",
            Route::V2ClientDetail => "v2_client_detail",
            Route::V2ClientPublished => "v2_client_published",
            Route::V2ClientSubscribed => "v2_client_subscribed",
            Route::V2ServicePublishers => "v2_client_service_publishers",
            Route::V2ServiceSubscriberClients => "v2_client_service_subscribers",
            Route::V3ClientDetail => "v3_client_detail",
            Route::V3ClientPublished => "v3_client_published",
            Route::V3ClientSubscribed => "v3_client_subscribed",
            Route::V3ServicePublishers => "v3_client_service_publishers",
            Route::V3ServiceSubscriberClients => "v3_client_service_subscribers",
            Route::V3ClientDistro => "v3_client_distro",
            Route::V3ClusterUpdate => "v3_cluster_update",
            Route::V3ServiceSubscribers => "v3_service_subscribers",
            Route::V3HealthCheckers => "v3_health_checkers",
            Route::V3OpsLog => "v3_ops_log",
            Route::V3SelectorTypes => "v3_selector_types",
            Route::V3NamespaceList => "v3_namespace_list",
            Route::V3NamespaceDetail => "v3_namespace_detail",
            Route::V3NamespaceCreate => "v3_namespace_create",
            Route::V3NamespaceUpdate => "v3_namespace_update",
            Route::V3NamespaceDelete => "v3_namespace_delete",
            Route::V3NamespaceCheck => "v3_namespace_check",
            Route::V3Login => "v3_login",
            Route::ServiceSubscribers => "service_subscribers",
        }
    }

    /// The method and path this route answers (the canonical request line).
    /// (One arm per route: as long as the route enum, not logic to split.)
    pub fn endpoint(self) -> (Method, &'static str) {
        match self {
            Route::InstanceRegister => (Method::Post, "/nacos/v1/ns/instance"),
            Route::InstanceDeregister => (Method::Delete, "/nacos/v1/ns/instance"),
            Route::InstanceUpdate => (Method::Put, "/nacos/v1/ns/instance"),
            Route::InstancePatch => (Method::Patch, "/nacos/v1/ns/instance"),
            Route::InstanceDetail => (Method::Get, "/nacos/v1/ns/instance"),
            Route::InstanceBeat => (Method::Put, "/nacos/v1/ns/instance/beat"),
            Route::InstanceList => (Method::Get, "/nacos/v1/ns/instance/list"),
            Route::ServiceCreate => (Method::Post, "/nacos/v1/ns/service"),
            Route::ServiceDelete => (Method::Delete, "/nacos/v1/ns/service"),
            Route::ServiceUpdate => (Method::Put, "/nacos/v1/ns/service"),
            Route::ServiceDetail => (Method::Get, "/nacos/v1/ns/service"),
            Route::ServiceList => (Method::Get, "/nacos/v1/ns/service/list"),
            Route::OperatorMetrics => (Method::Get, "/nacos/v1/ns/operator/metrics"),
            Route::OperatorSwitches => (Method::Get, "/nacos/v1/ns/operator/switches"),
            Route::AuthLogin => (Method::Post, "/nacos/v1/auth/login"),
            Route::PrometheusMetrics => (Method::Get, "/metrics"),
            Route::ClusterNodes => (Method::Get, crate::distro::NODES_PATH),
            Route::ClusterReport => (Method::Post, crate::distro::REPORT_PATH),
            Route::DistroReplicate => (Method::Put, crate::distro::DATUM_PATH),
            Route::DistroFetch => (Method::Post, crate::distro::DATUM_PATH),
            Route::DistroChecksum => (Method::Put, crate::distro::CHECKSUM_PATH),
            Route::DistroSnapshot => (Method::Post, crate::distro::SNAPSHOT_PATH),
            Route::DistroClients => (Method::Put, crate::distro::CLIENTS_PATH),
            Route::DistroClientVerify => (Method::Put, crate::distro::CLIENT_VERIFY_PATH),
            Route::DistroSubscribers => (Method::Put, crate::distro::SUBSCRIBERS_PATH),
            Route::DistroNamespaces => (Method::Put, crate::distro::NAMESPACES_PATH),
            Route::Readiness => (Method::Get, crate::distro::READINESS_PATH),
            Route::RaftRpc => (Method::Post, crate::distro::RAFT_PATH),
            Route::ClusterMemberAdd => (Method::Post, crate::distro::MEMBER_PATH),
            Route::ClusterMemberRemove => (Method::Delete, crate::distro::MEMBER_PATH),
            Route::MetadataBatchUpdate => (Method::Put, "/nacos/v1/ns/instance/metadata/batch"),
            Route::MetadataBatchDelete => (Method::Delete, "/nacos/v1/ns/instance/metadata/batch"),
            Route::HealthUpdate => (Method::Put, "/nacos/v1/ns/health/instance"),
            Route::OperatorSwitchesUpdate => (Method::Put, "/nacos/v1/ns/operator/switches"),
            Route::OperatorServers => (Method::Get, "/nacos/v1/ns/operator/servers"),
            Route::RaftLeader => (Method::Get, "/nacos/v1/ns/raft/leader"),
            Route::Liveness => (Method::Get, "/nacos/v1/console/health/liveness"),
            Route::NamespacesCreate => (Method::Post, "/nacos/v1/console/namespaces"),
            Route::NamespacesUpdate => (Method::Put, "/nacos/v1/console/namespaces"),
            Route::NamespacesDelete => (Method::Delete, "/nacos/v1/console/namespaces"),
            Route::V2InstanceRegister => (Method::Post, "/nacos/v2/ns/instance"),
            Route::V2InstanceDeregister => (Method::Delete, "/nacos/v2/ns/instance"),
            Route::V2InstanceUpdate => (Method::Put, "/nacos/v2/ns/instance"),
            Route::V2InstancePatch => (Method::Patch, "/nacos/v2/ns/instance"),
            Route::V2InstanceDetail => (Method::Get, "/nacos/v2/ns/instance"),
            Route::V2InstanceList => (Method::Get, "/nacos/v2/ns/instance/list"),
            Route::V2InstanceBeat => (Method::Put, "/nacos/v2/ns/instance/beat"),
            Route::V2MetadataBatchUpdate => (Method::Put, "/nacos/v2/ns/instance/metadata/batch"),
            Route::V2MetadataBatchDelete => {
                (Method::Delete, "/nacos/v2/ns/instance/metadata/batch")
            }
            Route::V2ServiceCreate => (Method::Post, "/nacos/v2/ns/service"),
            Route::V2ServiceDelete => (Method::Delete, "/nacos/v2/ns/service"),
            Route::V2ServiceUpdate => (Method::Put, "/nacos/v2/ns/service"),
            Route::V2ServiceDetail => (Method::Get, "/nacos/v2/ns/service"),
            Route::V2ServiceList => (Method::Get, "/nacos/v2/ns/service/list"),
            Route::V2HealthUpdate => (Method::Put, "/nacos/v2/ns/health/instance"),
            Route::V2Switches => (Method::Get, "/nacos/v2/ns/operator/switches"),
            Route::V2SwitchesUpdate => (Method::Put, "/nacos/v2/ns/operator/switches"),
            Route::V2Metrics => (Method::Get, "/nacos/v2/ns/operator/metrics"),
            Route::V2ClientList => (Method::Get, "/nacos/v2/ns/client/list"),
            Route::V2NamespaceList => (Method::Get, "/nacos/v2/console/namespace/list"),
            Route::V2NamespaceDetail => (Method::Get, "/nacos/v2/console/namespace"),
            Route::V2NamespaceCreate => (Method::Post, "/nacos/v2/console/namespace"),
            Route::V2NamespaceUpdate => (Method::Put, "/nacos/v2/console/namespace"),
            Route::V2NamespaceDelete => (Method::Delete, "/nacos/v2/console/namespace"),
            Route::V3ClientRegister => (Method::Post, "/nacos/v3/client/ns/instance"),
            Route::V3ClientDeregister => (Method::Delete, "/nacos/v3/client/ns/instance"),
            Route::V3ClientList => (Method::Get, "/nacos/v3/client/ns/instance/list"),
            Route::V3InstanceRegister => (Method::Post, "/nacos/v3/admin/ns/instance"),
            Route::V3InstanceDeregister => (Method::Delete, "/nacos/v3/admin/ns/instance"),
            Route::V3InstanceUpdate => (Method::Put, "/nacos/v3/admin/ns/instance"),
            Route::V3InstanceDetail => (Method::Get, "/nacos/v3/admin/ns/instance"),
            Route::V3InstancePartial => (Method::Put, "/nacos/v3/admin/ns/instance/partial"),
            Route::V3InstanceList => (Method::Get, "/nacos/v3/admin/ns/instance/list"),
            Route::V3MetadataBatchUpdate => {
                (Method::Put, "/nacos/v3/admin/ns/instance/metadata/batch")
            }
            Route::V3MetadataBatchDelete => {
                (Method::Delete, "/nacos/v3/admin/ns/instance/metadata/batch")
            }
            Route::V3ServiceCreate => (Method::Post, "/nacos/v3/admin/ns/service"),
            Route::V3ServiceDelete => (Method::Delete, "/nacos/v3/admin/ns/service"),
            Route::V3ServiceUpdate => (Method::Put, "/nacos/v3/admin/ns/service"),
            Route::V3ServiceDetail => (Method::Get, "/nacos/v3/admin/ns/service"),
            Route::V3ServiceList => (Method::Get, "/nacos/v3/admin/ns/service/list"),
            Route::V3HealthUpdate => (Method::Put, "/nacos/v3/admin/ns/health/instance"),
            Route::V3Switches => (Method::Get, "/nacos/v3/admin/ns/ops/switches"),
            Route::V3SwitchesUpdate => (Method::Put, "/nacos/v3/admin/ns/ops/switches"),
            Route::V3Metrics => (Method::Get, "/nacos/v3/admin/ns/ops/metrics"),
            Route::V3ClientListAdmin => (Method::Get, "/nacos/v3/admin/ns/client/list"),
            Route::V2InstanceStatuses => (
                Method::Get,
                "/nacos/v2/ns/instance/statuses/DEFAULT_GROUP@@service",
            ),
            Route::V2ClientDetail => (Method::Get, "/nacos/v2/ns/client"),
            Route::V2ClientPublished => (Method::Get, "/nacos/v2/ns/client/publish/list"),
            Route::V2ClientSubscribed => (Method::Get, "/nacos/v2/ns/client/subscribe/list"),
            Route::V2ServicePublishers => {
                (Method::Get, "/nacos/v2/ns/client/service/publisher/list")
            }
            Route::V2ServiceSubscriberClients => {
                (Method::Get, "/nacos/v2/ns/client/service/subscriber/list")
            }
            Route::V3ClientDetail => (Method::Get, "/nacos/v3/admin/ns/client"),
            Route::V3ClientPublished => (Method::Get, "/nacos/v3/admin/ns/client/publish/list"),
            Route::V3ClientSubscribed => (Method::Get, "/nacos/v3/admin/ns/client/subscribe/list"),
            Route::V3ServicePublishers => (
                Method::Get,
                "/nacos/v3/admin/ns/client/service/publisher/list",
            ),
            Route::V3ServiceSubscriberClients => (
                Method::Get,
                "/nacos/v3/admin/ns/client/service/subscriber/list",
            ),
            Route::V3ClientDistro => (Method::Get, "/nacos/v3/admin/ns/client/distro"),
            Route::V3ClusterUpdate => (Method::Put, "/nacos/v3/admin/ns/cluster"),
            Route::V3ServiceSubscribers => (Method::Get, "/nacos/v3/admin/ns/service/subscribers"),
            Route::V3HealthCheckers => (Method::Get, "/nacos/v3/admin/ns/health/checkers"),
            Route::V3OpsLog => (Method::Put, "/nacos/v3/admin/ns/ops/log"),
            Route::V3SelectorTypes => (Method::Get, "/nacos/v3/admin/ns/service/selector/types"),
            Route::V3NamespaceList => (Method::Get, "/nacos/v3/admin/core/namespace/list"),
            Route::V3NamespaceDetail => (Method::Get, "/nacos/v3/admin/core/namespace"),
            Route::V3NamespaceCreate => (Method::Post, "/nacos/v3/admin/core/namespace"),
            Route::V3NamespaceUpdate => (Method::Put, "/nacos/v3/admin/core/namespace"),
            Route::V3NamespaceDelete => (Method::Delete, "/nacos/v3/admin/core/namespace"),
            Route::V3NamespaceCheck => (Method::Get, "/nacos/v3/admin/core/namespace/check"),
            Route::V3Login => (Method::Post, "/nacos/v3/auth/user/login"),
            Route::ServiceSubscribers => (Method::Get, "/nacos/v1/ns/service/subscribers"),
        }
    }

    /// Whether the route answers in the v2/v3 `Result` envelope (its errors
    /// too): every v2 and v3 naming and namespace route; not the v3 login,
    /// which answers as the 1.x one does.
    pub fn is_envelope(self) -> bool {
        (Route::V2InstanceRegister as usize..=Route::V3NamespaceCheck as usize)
            .contains(&(self as usize))
    }

    /// Whether the route only reads state (what a `READ_ONLY` server still serves).
    pub fn is_read(self) -> bool {
        self.endpoint().0 == Method::Get
    }
}

/// Why a request has no route. `Display` is the plain-text body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RouteError<'a> {
    /// A path outside the API.
    #[error("Not Found: {path}")]
    NotFound {
        /// The request path.
        path: &'a str,
    },
    /// A path under `/nacos/v1/ns/` that names no endpoint.
    #[error("no such api:{}:{path}", method.as_str())]
    NoSuchApi {
        /// The request method.
        method: Method,
        /// The request path.
        path: &'a str,
    },
    /// A known path with a method it does not serve.
    #[error("no such api:{}:{path}", method.as_str())]
    MethodNotAllowed {
        /// The request method.
        method: Method,
        /// The request path.
        path: &'a str,
        /// The `Allow` header value.
        allow: &'static str,
    },
}

impl RouteError<'_> {
    /// The status to answer: 404, 501 or 405.
    pub fn status(&self) -> u16 {
        match self {
            RouteError::NotFound { .. } => 404,
            RouteError::NoSuchApi { .. } => 501,
            RouteError::MethodNotAllowed { .. } => 405,
        }
    }
}

/// Resolves a request to its route.
///
/// One match is the whole route table, read top to bottom; split into
/// functions it would be harder to see which path and method go where.
pub fn route(method: Method, path: &str) -> Result<Route, RouteError<'_>> {
    let request = Lookup::new(method, path);
    let (trimmed, lookup) = (request.trimmed, request.lookup);
    let not_allowed = |allow| request.not_allowed(allow);
    if let Some(rest) = trimmed
        .strip_prefix(API_PREFIX)
        .and_then(|r| r.strip_prefix('/'))
    {
        return match rest {
            "instance" => match lookup {
                Method::Post => Ok(Route::InstanceRegister),
                Method::Delete => Ok(Route::InstanceDeregister),
                Method::Put => Ok(Route::InstanceUpdate),
                Method::Patch => Ok(Route::InstancePatch),
                Method::Get => Ok(Route::InstanceDetail),
                _ => Err(not_allowed("GET, HEAD, POST, PUT, PATCH, DELETE")),
            },
            "instance/beat" => match lookup {
                Method::Put => Ok(Route::InstanceBeat),
                _ => Err(not_allowed("PUT")),
            },
            "instance/list" => {
                get_only(lookup, Route::InstanceList).ok_or_else(|| not_allowed("GET, HEAD"))
            }
            "service" => match lookup {
                Method::Post => Ok(Route::ServiceCreate),
                Method::Delete => Ok(Route::ServiceDelete),
                Method::Put => Ok(Route::ServiceUpdate),
                Method::Get => Ok(Route::ServiceDetail),
                _ => Err(not_allowed("GET, HEAD, POST, PUT, DELETE")),
            },
            "service/list" => {
                get_only(lookup, Route::ServiceList).ok_or_else(|| not_allowed("GET, HEAD"))
            }
            "operator/metrics" => {
                get_only(lookup, Route::OperatorMetrics).ok_or_else(|| not_allowed("GET, HEAD"))
            }
            "operator/switches" => match lookup {
                Method::Get => Ok(Route::OperatorSwitches),
                Method::Put => Ok(Route::OperatorSwitchesUpdate),
                _ => Err(not_allowed("GET, HEAD, PUT")),
            },
            "distro/datum" => match lookup {
                Method::Put => Ok(Route::DistroReplicate),
                Method::Post => Ok(Route::DistroFetch),
                _ => Err(not_allowed("POST, PUT")),
            },
            "distro/checksum" => match lookup {
                Method::Put => Ok(Route::DistroChecksum),
                _ => Err(not_allowed("PUT")),
            },
            "distro/datums" => match lookup {
                Method::Post => Ok(Route::DistroSnapshot),
                _ => Err(not_allowed("POST")),
            },
            "distro/clients" => match lookup {
                Method::Put => Ok(Route::DistroClients),
                _ => Err(not_allowed("PUT")),
            },
            "distro/clients/verify" => match lookup {
                Method::Put => Ok(Route::DistroClientVerify),
                _ => Err(not_allowed("PUT")),
            },
            "distro/subscribers" => match lookup {
                Method::Put => Ok(Route::DistroSubscribers),
                _ => Err(not_allowed("PUT")),
            },
            "distro/namespaces" => match lookup {
                Method::Put => Ok(Route::DistroNamespaces),
                _ => Err(not_allowed("PUT")),
            },
            _ => Err(RouteError::NoSuchApi { method, path }),
        };
    }
    match trimmed {
        "/nacos/v1/auth/login" | "/nacos/v1/auth/users/login" => match lookup {
            Method::Post => Ok(Route::AuthLogin),
            _ => Err(not_allowed("POST")),
        },
        "/metrics" => {
            get_only(lookup, Route::PrometheusMetrics).ok_or_else(|| not_allowed("GET, HEAD"))
        }
        crate::distro::NODES_PATH => {
            get_only(lookup, Route::ClusterNodes).ok_or_else(|| not_allowed("GET, HEAD"))
        }
        crate::distro::REPORT_PATH => match lookup {
            Method::Post => Ok(Route::ClusterReport),
            _ => Err(not_allowed("POST")),
        },
        crate::distro::RAFT_PATH => match lookup {
            Method::Post => Ok(Route::RaftRpc),
            _ => Err(not_allowed("POST")),
        },
        crate::distro::MEMBER_PATH => match lookup {
            Method::Post => Ok(Route::ClusterMemberAdd),
            Method::Delete => Ok(Route::ClusterMemberRemove),
            _ => Err(not_allowed("POST, DELETE")),
        },
        crate::distro::READINESS_PATH => {
            get_only(lookup, Route::Readiness).ok_or_else(|| not_allowed("GET, HEAD"))
        }
        _ => Err(RouteError::NotFound { path }),
    }
}

/// What both route tables (this one and `crate::openapi::route`'s) read
/// first: the path with one trailing slash off, the method to look up
/// (`HEAD` as `GET`), and the 405 of a path the table knows.
#[derive(Clone, Copy)]
pub(crate) struct Lookup<'a> {
    /// The method as sent.
    pub(crate) method: Method,
    /// The path as sent.
    pub(crate) path: &'a str,
    /// The path without one trailing slash (`/` stays `/`).
    pub(crate) trimmed: &'a str,
    /// The method the tables match on.
    pub(crate) lookup: Method,
}

impl<'a> Lookup<'a> {
    /// The lookup of `method` on `path`.
    #[inline]
    pub(crate) fn new(method: Method, path: &'a str) -> Self {
        let trimmed = match path.strip_suffix('/') {
            Some(p) if !p.is_empty() => p,
            _ => path,
        };
        let lookup = if method == Method::Head {
            Method::Get
        } else {
            method
        };
        Lookup {
            method,
            path,
            trimmed,
            lookup,
        }
    }

    /// 405 for this request: the path is known, `allow` lists its methods.
    #[inline]
    pub(crate) fn not_allowed(self, allow: &'static str) -> RouteError<'a> {
        RouteError::MethodNotAllowed {
            method: self.method,
            path: self.path,
            allow,
        }
    }
}

fn get_only(method: Method, route: Route) -> Option<Route> {
    (method == Method::Get).then_some(route)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_resolves_from_its_endpoint() {
        // The rest are `crate::openapi::route`'s, tested there.
        for r in Route::ALL
            .into_iter()
            .take_while(|r| *r != Route::MetadataBatchUpdate)
        {
            let (m, p) = r.endpoint();
            assert_eq!(route(m, p), Ok(r), "{p}");
            assert_eq!(route(m, &format!("{p}/")), Ok(r), "{p}/");
        }
        assert_eq!(
            route(Method::Head, "/nacos/v1/ns/instance/list"),
            Ok(Route::InstanceList)
        );
        assert!(Route::InstanceList.is_read() && !Route::InstanceBeat.is_read());
    }

    #[test]
    fn errors() {
        let e = route(Method::Get, "/nacos/v1/ns/nope").unwrap_err();
        assert_eq!(
            (e.status(), e.to_string()),
            (501, "no such api:GET:/nacos/v1/ns/nope".to_owned())
        );
        let e = route(Method::Get, "/nacos/v1/ns/instance/beat").unwrap_err();
        assert_eq!(e.status(), 405);
        assert!(matches!(
            e,
            RouteError::MethodNotAllowed { allow: "PUT", .. }
        ));
        assert_eq!(route(Method::Get, "/").unwrap_err().status(), 404);
        assert_eq!(
            route(Method::Get, "/nacos/v1/nsx").unwrap_err().status(),
            404
        );
        assert_eq!(
            route(Method::Get, "/nacos/v1/ns/instance//")
                .unwrap_err()
                .status(),
            501
        );
    }
}
