//! Every Nacos API generation over one store, with real sockets: golden
//! round trips and error envelopes of the v1 completion, the v2 Open API
//! and the v3 client and admin APIs (bodies and codes from the Nacos 3.x
//! source, the controller named at each), namespaces and their quotas
//! through every door, and visibility across generations (an instance
//! registered through v1, v2, v3 or 2.x gRPC is listed by every other door;
//! a push reaches UDP and gRPC subscribers).

use crate::common;
use crate::grpc_client;

use std::time::Duration;

use common::{Reply, TestServer};
use grpc_client::Raw;
use registry_core::ServiceRef;
use registry_proto::grpc::message::{
    InstanceRequest, InstanceResponse, NamingHead, NotifySubscriberRequest, QueryServiceResponse,
    ServiceQueryRequest, SubscribeServiceRequest, SubscribeServiceResponse, WireInstance,
};
use registry_proto::http1::Method;
use serde_json::{json, Value};

const V2: &str = "/nacos/v2/ns";
const V3C: &str = "/nacos/v3/client/ns";
const V3A: &str = "/nacos/v3/admin/ns";

/// The success envelope around `data` (`api/model/v2/Result.success`).
fn ok_envelope(data: Value) -> Value {
    json!({"code": 0, "message": "success", "data": data})
}

/// Asserts a reply is the envelope error `code` with `status`, and returns
/// its detail.
fn assert_error(r: &Reply, status: u16, code: u64, what: &str) -> String {
    assert_eq!(r.status, status, "{what}: {}", r.body);
    let v = r.json();
    assert_eq!(v["code"], code, "{what}: {}", r.body);
    assert!(v["message"].is_string(), "{what}: {}", r.body);
    v["data"].as_str().unwrap_or_default().to_owned()
}

fn instances(server: &TestServer, ns: &str, grouped: &str) -> usize {
    server
        .app
        .store
        .snapshot(ServiceRef::new(ns, grouped))
        .map_or(0, |s| s.instances().len())
}

/// Polls `check` every 10 ms for up to 5 s.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ----- reads (the writes come with the typed write path) ------------------------

/// Registers through the v1 door, which every generation reads.
async fn v1_register(s: &TestServer, q: &str) {
    let r = s
        .call(Method::Post, &format!("/nacos/v1/ns/instance?{q}"))
        .await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"), "{q}");
}

/// v2 reads: `InstanceControllerV2.list` (ServiceInfo), `.detail`
/// (InstanceDetailInfoVo), `ServiceControllerV2.list` and `.detail`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_reads() {
    let s = TestServer::spawn().await;
    v1_register(
        &s,
        "serviceName=orders&groupName=G&ip=10.0.0.1&port=8080&weight=2&metadata=k%3Dv",
    )
    .await;
    let r = s
        .call(
            Method::Get,
            &format!("{V2}/instance/list?serviceName=orders&groupName=G"),
        )
        .await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(
        (v["code"].clone(), v["message"].clone()),
        (json!(0), json!("success"))
    );
    let info = &v["data"];
    assert_eq!(
        (info["name"].clone(), info["groupName"].clone()),
        (json!("G@@orders"), json!("G"))
    );
    // Nacos 3's ServiceInfo (api/naming/pojo/ServiceInfo.java, filled by
    // naming/core/InstanceOperatorClientImpl.java `listInstance`): its ten
    // fields and none of 1.x's; hosts are api/naming/pojo/Instance.java,
    // without 1.x's `marked`/`valid`, and `instanceIdGenerator` only for
    // empty metadata.
    let mut keys: Vec<&str> = info
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "allIps",
            "cacheMillis",
            "checksum",
            "clusters",
            "groupName",
            "hosts",
            "lastRefTime",
            "name",
            "reachProtectionThreshold",
            "valid"
        ],
        "{info}"
    );
    assert_eq!(
        (
            info["checksum"].clone(),
            info["cacheMillis"].clone(),
            info["clusters"].clone()
        ),
        (json!(""), json!(10000), json!(""))
    );
    let host = &info["hosts"][0];
    for gone in ["marked", "valid", "instanceIdGenerator"] {
        assert!(host.get(gone).is_none(), "{gone} in {host}");
    }
    assert_eq!(
        (
            host["ip"].clone(),
            host["port"].clone(),
            host["weight"].clone()
        ),
        (json!("10.0.0.1"), json!(8080), json!(2.0))
    );
    assert_eq!(host["metadata"], json!({"k": "v"}));
    let r = s
        .call(
            Method::Get,
            &format!("{V2}/instance?serviceName=orders&groupName=G&ip=10.0.0.1&port=8080"),
        )
        .await;
    assert_eq!(
        r.json(),
        ok_envelope(json!({
            "serviceName": "G@@orders", "ip": "10.0.0.1", "port": 8080, "clusterName": "DEFAULT",
            "weight": 2.0, "healthy": true, "instanceId": "10.0.0.1#8080#DEFAULT#G@@orders",
            "metadata": {"k": "v"},
        }))
    );
    let r = s
        .call(Method::Get, &format!("{V2}/service/list?groupName=G"))
        .await;
    assert_eq!(
        r.json(),
        // naming/utils/ServiceUtil.java `pageServiceName` cuts the group off.
        ok_envelope(json!({"count": 1, "services": ["orders"]}))
    );
    let r = s
        .call(
            Method::Get,
            &format!("{V2}/service?serviceName=orders&groupName=G"),
        )
        .await;
    let d = &r.json()["data"];
    assert_eq!(
        (
            d["namespace"].clone(),
            d["serviceName"].clone(),
            d["groupName"].clone()
        ),
        (json!("public"), json!("orders"), json!("G"))
    );
    assert_eq!(
        d["clusterMap"]["DEFAULT"]["healthChecker"],
        json!({"type": "TCP"})
    );
    // The 2.x switches and metrics, in the envelope: SwitchDomain's 2.x/3.x
    // names for the push versions (naming/misc/SwitchDomain.java).
    let switches = s
        .call(Method::Get, &format!("{V2}/operator/switches"))
        .await
        .json();
    assert_eq!(switches["data"]["clientBeatInterval"], 5000);
    assert_eq!(switches["data"]["pushVersionOfJava"], "0.1.0", "{switches}");
    assert!(
        switches["data"].get("pushJavaVersion").is_none(),
        "{switches}"
    );
    // SwitchManager.update refuses a threshold <= 0 with an
    // IllegalArgumentException, which OperatorControllerV3.updateSwitch
    // answers as 500 / 30000; an unchanged push version is accepted.
    let r = s
        .call(
            Method::Put,
            &format!("{V3A}/ops/switches?entry=distroThreshold&value=0"),
        )
        .await;
    let detail = assert_error(&r, 500, 30000, "distroThreshold 0");
    assert_eq!(detail, "distroThreshold can not be zero or negative: 0");
    let r = s
        .call(
            Method::Put,
            &format!("{V3A}/ops/switches?entry=pushVersionOfJava&value=0.1.0"),
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    assert_eq!(
        s.call(Method::Get, &format!("{V2}/ops/metrics"))
            .await
            .json()["data"]["status"],
        "UP"
    );
    s.stop().await;
}

/// v3 reads: the client list (`InstanceOpenApiController.list`), the admin
/// detail and list (`InstanceControllerV3`), the service page and detail
/// (`ServiceControllerV3`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v3_reads() {
    let s = TestServer::spawn().await;
    v1_register(
        &s,
        "serviceName=pay&ip=10.0.0.2&port=9000&metadata=%7B%22zone%22%3A%22a%22%7D",
    )
    .await;
    v1_register(&s, "serviceName=pay&ip=10.0.0.2&port=9001&clusterName=c2").await;
    let expected = json!({
        "instanceId": "10.0.0.2#9000#DEFAULT#DEFAULT_GROUP@@pay", "ip": "10.0.0.2", "port": 9000,
        "weight": 1.0, "healthy": true, "enabled": true, "ephemeral": true, "clusterName": "DEFAULT",
        "serviceName": "DEFAULT_GROUP@@pay", "metadata": {"zone": "a"},
        // No `instanceIdGenerator`: Instance.getInstanceIdGenerator reads it
        // from metadata once metadata is set (api/naming/pojo/Instance.java).
        "instanceHeartBeatInterval": 5000, "instanceHeartBeatTimeOut": 15000, "ipDeleteTimeout": 30000,
    });
    // The v3 list forms default the cluster to DEFAULT (InstanceListForm).
    let r = s
        .call(Method::Get, &format!("{V3C}/instance/list?serviceName=pay"))
        .await;
    assert_eq!(r.json(), ok_envelope(json!([expected.clone()])));
    // ServiceControllerV3.list with withInstances=true:
    // CatalogServiceV2Impl.pageListServiceDetail's Page<ServiceDetailInfo>,
    // each cluster a ClusterInfo with only hosts and the field defaults.
    let r = s
        .call(
            Method::Get,
            "/nacos/v3/admin/ns/service/list?serviceNameParam=pay&withInstances=true",
        )
        .await;
    let page = &r.json()["data"];
    assert_eq!(page["totalCount"], 1, "{page}");
    let item = &page["pageItems"][0];
    assert_eq!(
        (&item["serviceName"], &item["groupName"]),
        (&json!("pay"), &json!("DEFAULT_GROUP"))
    );
    assert_eq!(item["protectThreshold"], 0.0);
    assert!(
        item.get("selector").is_none() && item.get("ephemeral").is_none(),
        "{item}"
    );
    let default = &item["clusterMap"]["DEFAULT"];
    assert_eq!(
        (
            &default["healthyCheckPort"],
            &default["useInstancePortForCheck"]
        ),
        (&json!(80), &json!(true))
    );
    assert_eq!(default["hosts"], json!([expected.clone()]));
    assert_eq!(item["clusterMap"]["c2"]["hosts"][0]["port"], 9001);
    let r = s
        .call(
            Method::Get,
            &format!("{V3C}/instance/list?serviceName=pay&clusterName=c2"),
        )
        .await;
    assert_eq!(r.json()["data"][0]["port"], 9001);
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/instance?serviceName=pay&ip=10.0.0.2&port=9000"),
        )
        .await;
    assert_eq!(r.json(), ok_envelope(expected));
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/instance/list?serviceName=pay&clusterName=nope"),
        )
        .await;
    assert_eq!(
        assert_error(&r, 404, 30000, "unknown cluster"),
        "cluster nope is not found!"
    );
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/service/list?serviceNameParam=pa"),
        )
        .await;
    assert_eq!(
        r.json(),
        ok_envelope(
            json!({"totalCount": 1, "pageNumber": 1, "pagesAvailable": 1, "pageItems": [
                {"name": "pay", "groupName": "DEFAULT_GROUP", "clusterCount": 2, "ipCount": 2, "healthyInstanceCount": 2, "triggerFlag": "false"}
            ]})
        )
    );
    let r = s
        .call(Method::Get, &format!("{V3A}/service?serviceName=pay"))
        .await;
    let d = &r.json()["data"];
    assert_eq!(
        (d["namespaceId"].clone(), d["ephemeral"].clone()),
        (json!("public"), json!(true))
    );
    s.stop().await;
}

/// Error envelopes of the read routes of v2 and v3 (`NacosApiExceptionHandler`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_errors_get_the_envelope() {
    let s = TestServer::spawn().await;
    let cases: &[(Method, &str, u16, u64, &str)] = &[
        // InstanceListForm.validate / @RequestParam: PARAMETER_MISSING.
        (
            Method::Get,
            "/nacos/v2/ns/instance/list",
            400,
            10000,
            "Required parameter 'serviceName' type String is not present",
        ),
        (
            Method::Get,
            "/nacos/v3/client/ns/instance/list?groupName=G",
            400,
            10000,
            "Required parameter 'serviceName' type String is not present",
        ),
        (
            Method::Get,
            "/nacos/v2/ns/instance?serviceName=a&port=80",
            400,
            10000,
            "Required parameter 'ip' type String is not present",
        ),
        (
            Method::Get,
            "/nacos/v3/admin/ns/instance?serviceName=a&ip=1.1.1.1",
            400,
            10000,
            "Required parameter 'port' type Integer is not present",
        ),
        // NumberFormatException → PARAMETER_VALIDATE_ERROR.
        (
            Method::Get,
            "/nacos/v2/ns/service/list?pageNo=x",
            400,
            20002,
            "For input string: \"x\"",
        ),
        (
            Method::Get,
            "/nacos/v3/admin/ns/service/list?pageSize=0",
            400,
            20002,
            "Required parameter 'pageSize' should be larger than 0",
        ),
        // NamingUtils.checkServiceNameFormat → SERVICE_NAME_ERROR.
        (
            Method::Get,
            "/nacos/v2/ns/instance/list?serviceName=G%40%40",
            400,
            21000,
            "",
        ),
        // InstanceOperatorClientImpl.getInstance0 → RESOURCE_NOT_FOUND, 404.
        (
            Method::Get,
            "/nacos/v2/ns/instance?serviceName=a&ip=1.1.1.1&port=80",
            404,
            20004,
            "no ips found for cluster DEFAULT in service DEFAULT_GROUP@@a",
        ),
        // ServiceOperatorV2Impl.queryService → SERVICE_NOT_EXIST.
        (
            Method::Get,
            "/nacos/v2/ns/service?serviceName=a",
            400,
            21008,
            "service not found, namespace: public, serviceName: DEFAULT_GROUP@@a",
        ),
        // CatalogServiceV2Impl.listInstances → 404 {30000}.
        (
            Method::Get,
            "/nacos/v3/admin/ns/instance/list?serviceName=none",
            404,
            30000,
            "service DEFAULT_GROUP@@none is not found!",
        ),
        // NamespaceControllerV3.createNamespace / NamespaceOperationService.
        (
            Method::Post,
            "/nacos/v3/admin/core/namespace?namespaceId=a%20b&namespaceName=A",
            400,
            22000,
            "namespaceId [a b] mismatch the pattern",
        ),
        (
            Method::Post,
            "/nacos/v3/admin/core/namespace?namespaceId=ok&namespaceName=a%40b",
            400,
            22000,
            "namespaceName [a@b] contains illegal char",
        ),
        (
            Method::Post,
            "/nacos/v3/admin/core/namespace?namespaceId=public&namespaceName=P",
            400,
            22002,
            "namespaceId [public] is default namespace id and already exist.",
        ),
        // console/controller/v2/NamespaceControllerV2.java: the form's own
        // `NamespaceForm.validate` text, not Spring's.
        (
            Method::Post,
            "/nacos/v2/console/namespace?namespaceId=x",
            400,
            10000,
            "required parameter 'namespaceName' is missing",
        ),
        (
            Method::Get,
            "/nacos/v3/admin/core/namespace?namespaceId=nope",
            404,
            22001,
            "namespaceId [ nope ] not exist",
        ),
        (
            Method::Get,
            "/nacos/v3/admin/core/namespace",
            400,
            10000,
            "Required parameter 'namespaceId' type String is not present",
        ),
        // A malformed percent-encoding, found before any handler: still the envelope.
        (
            Method::Get,
            "/nacos/v3/client/ns/instance/list?serviceName=%zz",
            400,
            20002,
            "request parameters have an invalid percent-encoding",
        ),
    ];
    for (method, path, status, code, detail) in cases {
        let r = s.call(*method, path).await;
        let got = assert_error(&r, *status, *code, path);
        if !detail.is_empty() {
            assert_eq!(got, *detail, "{path}");
        }
    }
    assert_eq!(s.app.store.stats().services, 0, "nothing was applied");
    assert_eq!(
        s.app.namespaces.table().list().len(),
        1,
        "no namespace was created"
    );
    s.stop().await;
}

/// Nacos's parameter checker answers v2/v3 naming requests before their
/// controllers (core/paramcheck/ParamCheckerFilter.java: HTTP 400, the
/// message on a line, no envelope), with the texts of
/// common/paramcheck/DefaultParamChecker.java, reading what each
/// controller's extractor names (naming/paramcheck/*HttpParamExtractor.java).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_param_checker_answers_before_the_controllers() {
    let s = TestServer::spawn().await;
    let illegal = |p: &str| {
        format!("Param '{p}' is illegal, illegal characters should not appear in the param.")
    };
    let port = "Param 'port' is illegal, the value should be between 0 and 65535.".to_owned();
    let beat = "%7B%22ip%22%3A%221.1.1.1%22%2C%22port%22%3A80%2C%22cluster%22%3A%22c.1%22%7D";
    let instances = "%5B%7B%22ip%22%3A%22a%20b%22%2C%22port%22%3A80%7D%5D";
    let cases: Vec<(Method, String, String)> = vec![
        // The default extractor (InstanceControllerV2/V3, InstanceOpenApiController).
        (
            Method::Get,
            format!("{V2}/instance?serviceName=a&ip=1.1.1.1&port=x"),
            port.clone(),
        ),
        (
            Method::Post,
            format!("{V2}/instance?serviceName=a&ip=1.1.1.1&port=x"),
            port.clone(),
        ),
        (
            Method::Post,
            format!("{V2}/instance?serviceName=a&ip=1.1.1.1&port=80&clusterName=a%20b"),
            illegal("cluster"),
        ),
        (
            Method::Post,
            format!("{V3A}/instance?serviceName=a&ip=1.1.1.1&port=70000"),
            port.clone(),
        ),
        (
            Method::Post,
            format!("{V3C}/instance?serviceName=a%20b&ip=1.1.1.1&port=80"),
            illegal("serviceName"),
        ),
        (
            Method::Post,
            format!("{V3C}/instance?serviceName=a&groupName=g%2F1&ip=1.1.1.1&port=80"),
            illegal("group"),
        ),
        (
            Method::Post,
            format!("{V2}/instance?serviceName=a&ip=1.1.1.1%20&port=80"),
            illegal("ip"),
        ),
        (
            Method::Post,
            format!("{V2}/instance?serviceName=a&ip=1.1.1.1&port=80&namespaceId=a.b"),
            illegal("namespaceId/tenant"),
        ),
        // ServiceControllerV3, ClientControllerV3 (class-level extractor).
        (
            Method::Post,
            format!("{V3A}/service?serviceName=%40x"),
            illegal("serviceName"),
        ),
        (
            Method::Get,
            format!("{V3A}/client/service/subscriber/list?serviceName=x&port=x"),
            port.clone(),
        ),
        // The default extractor's `checkPort` alias (ClusterControllerV3).
        (
            Method::Put,
            format!(
                "{V3A}/cluster?serviceName=x&clusterName=DEFAULT&checkPort=99999&useInstancePort4Check=true&healthChecker=%7B%7D"
            ),
            port.clone(),
        ),
        // The list extractor reads `clusters`; the beat's and a batch's JSON.
        (
            Method::Get,
            format!("{V2}/instance/list?serviceName=a&clusters=c1,c.2"),
            illegal("cluster"),
        ),
        (
            Method::Put,
            format!("{V2}/instance/beat?serviceName=a&beat={beat}"),
            illegal("cluster"),
        ),
        (
            Method::Put,
            format!(
                "{V3A}/instance/metadata/batch?serviceName=a&metadata=k%3Dv&instances={instances}"
            ),
            illegal("ip"),
        ),
    ];
    for (method, target, message) in &cases {
        let r = s.call(*method, target).await;
        assert_eq!(
            (r.status, r.body.as_str()),
            (400, format!("{message}\r\n").as_str()),
            "{target}"
        );
    }
    // What an extractor does not read goes on to the controller: a list's
    // `clusterName` is the controller's, and namespaces have no extractor.
    let r = s
        .call(
            Method::Get,
            &format!("{V2}/instance/list?serviceName=a&clusterName=c.1"),
        )
        .await;
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (200, json!(0)),
        "{}",
        r.body
    );
    let r = s
        .call(
            Method::Post,
            "/nacos/v3/admin/core/namespace?namespaceId=a.b&namespaceName=A",
        )
        .await;
    assert!(r.json()["code"].is_number(), "the envelope: {}", r.body);
    assert_eq!(s.app.store.stats().services, 0, "nothing was applied");
    s.stop().await;
}

/// The v1 reads past the core: liveness, servers, the Raft leader
/// (`RaftController`), switch updates (`OperatorController`). (The catalog
/// is the web console's, tested with it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_completion_reads() {
    let s = TestServer::spawn().await;
    let ns = "/nacos/v1/ns";
    assert_eq!(
        s.call(Method::Get, "/nacos/v1/console/health/liveness")
            .await
            .body,
        "OK"
    );
    v1_register(&s, "serviceName=m&ip=10.0.0.1&port=1").await;
    v1_register(&s, "serviceName=m&ip=10.0.0.1&port=2").await;
    let r = s
        .call(
            Method::Put,
            &format!("{ns}/operator/switches?entry=pushEnabled&value=true"),
        )
        .await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    let r = s
        .call(
            Method::Put,
            &format!("{ns}/operator/switches?entry=pushEnabled&value=false"),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = s
        .call(
            Method::Put,
            &format!("{ns}/operator/switches?entry=nope&value=1"),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "update entry not found: nope")
    );
    let r = s
        .call(Method::Put, &format!("{ns}/operator/switches?entry=nope"))
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "Param 'value' is required.")
    );
    let r = s.call(Method::Get, &format!("{ns}/operator/servers")).await;
    assert_eq!(r.json()["servers"][0]["state"], "UP");
    let r = s.call(Method::Get, &format!("{ns}/raft/leader")).await;
    let leader: Value = serde_json::from_str(r.json()["leader"].as_str().unwrap()).unwrap();
    assert_eq!(leader["state"], "LEADER");
    s.stop().await;
}

/// One namespace table behind every door: v1 console (`NamespaceController`:
/// `RestResult` list, `true`/`false` writes), v2 console and v3 admin
/// (`NamespaceControllerV3`, `NamespaceForm.validate`); `""` is `public`,
/// described and typed as core/service/NamespaceOperationService.java and
/// core/namespace/model/NamespaceTypeEnum.java say; a namespace holding
/// services is deleted as `removeNamespace` deletes it (its services stay),
/// unless `--namespace-delete-protection` is on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_through_every_door() {
    let s = TestServer::spawn().await;
    let r = s.call(Method::Get, "/nacos/v1/console/namespaces").await;
    assert_eq!(
        r.json(),
        json!({"code": 200, "message": null, "data": [
            {"namespace": "public", "namespaceShowName": "public", "namespaceDesc": "Default Namespace", "quota": 200, "configCount": 0, "serviceCount": 0, "type": 0}
        ]})
    );
    let r = s
        .call(
            Method::Post,
            "/nacos/v1/console/namespaces?customNamespaceId=dev&namespaceName=Dev&namespaceDesc=d",
        )
        .await;
    assert_eq!(r.body, "true");
    let r = s
        .call(
            Method::Post,
            "/nacos/v1/console/namespaces?customNamespaceId=dev&namespaceName=Dev",
        )
        .await;
    assert_eq!(r.body, "false", "a taken id");
    let r = s
        .call(
            Method::Get,
            "/nacos/v3/admin/core/namespace?namespaceId=dev",
        )
        .await;
    assert_eq!(
        r.json(),
        ok_envelope(
            json!({"namespace": "dev", "namespaceShowName": "Dev", "namespaceDesc": "d", "quota": 200, "configCount": 0, "type": 1})
        )
    );
    let r = s
        .call(
            Method::Put,
            "/nacos/v2/console/namespace?namespaceId=dev&namespaceName=Dev2",
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!(true)));
    let r = s
        .call(Method::Get, "/nacos/v3/admin/core/namespace/list")
        .await;
    assert_eq!(r.json()["data"][1]["namespaceShowName"], "Dev2");
    // The console's list (v1) shows the record too.
    let r = s.call(Method::Get, "/nacos/v1/console/namespaces").await;
    assert_eq!(r.json()["data"][1]["namespaceShowName"], "Dev2");
    assert_eq!(
        s.call(
            Method::Get,
            "/nacos/v3/admin/core/namespace/check?namespaceId=dev"
        )
        .await
        .json(),
        ok_envelope(json!(1))
    );
    // The form wants both parameters; an empty id is made up (a UUID).
    for (query, missing) in [
        ("namespaceName=Anon", "namespaceId"),
        ("namespaceId=x", "namespaceName"),
    ] {
        let r = s
            .call(
                Method::Post,
                &format!("/nacos/v3/admin/core/namespace?{query}"),
            )
            .await;
        let detail = assert_error(&r, 400, 10000, query);
        assert_eq!(detail, format!("required parameter '{missing}' is missing"));
    }
    let r = s
        .call(
            Method::Post,
            "/nacos/v3/admin/core/namespace?namespaceId=&namespaceName=Anon",
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!(true)));
    assert_eq!(s.app.namespaces.table().list().len(), 3);
    // `""` and `public` are one namespace on every door.
    v1_register(&s, "serviceName=same&ip=10.0.0.9&port=1&namespaceId=").await;
    let r = s
        .call(
            Method::Get,
            "/nacos/v3/client/ns/instance/list?serviceName=same&namespaceId=public",
        )
        .await;
    assert_eq!(r.json()["data"].as_array().unwrap().len(), 1);
    let r = s
        .call(
            Method::Get,
            "/nacos/v2/ns/instance/list?serviceName=same&namespaceId=",
        )
        .await;
    assert_eq!(r.json()["data"]["hosts"].as_array().unwrap().len(), 1);
    // A namespace holding services is deleted (the record; its services
    // stay reachable by the id).
    v1_register(&s, "serviceName=held&ip=10.0.0.9&port=1&namespaceId=dev").await;
    let r = s
        .call(
            Method::Delete,
            "/nacos/v3/admin/core/namespace?namespaceId=dev",
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!(true)));
    assert!(!s.app.namespaces.table().exists("dev"));
    assert_eq!(instances(&s, "dev", "DEFAULT_GROUP@@held"), 1);
    // The default namespace cannot be deleted.
    assert_eq!(
        s.call(
            Method::Delete,
            "/nacos/v1/console/namespaces?namespaceId=public"
        )
        .await
        .body,
        "false"
    );
    s.stop().await;
}

/// A service holds one kind of instance in Nacos 2.x/3.x
/// (naming/core/v2/service/impl/EphemeralClientOperationServiceImpl.java and
/// PersistentClientOperationServiceImpl.java `registerInstance`): the other
/// kind is a `NacosRuntimeException(400, ..)`, which the v2/v3 doors answer
/// 400 `{30000, "server error", text}`
/// (core/exception/NacosApiExceptionHandler.java `handleNacosRuntimeException`)
/// and the 2.x door as an `ErrorResponse` with its code and text
/// (api/remote/response/ErrorResponse.java `build(Throwable)`); nothing is
/// applied. Once the service is empty it takes either kind again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_holds_one_kind_of_instance() {
    let s = TestServer::spawn().await;
    let ephemeral = "serviceName=k&ip=10.7.0.1&port=1";
    // Persistent: probed by the server, so on loopback.
    let persistent = "serviceName=k&ip=127.0.0.1&port=2&ephemeral=false";
    let r = s
        .call(Method::Post, &format!("{V2}/instance?{ephemeral}"))
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    for path in [V2, V3A] {
        let r = s
            .call(Method::Post, &format!("{path}/instance?{persistent}"))
            .await;
        let text = assert_error(&r, 400, 30000, path);
        assert_eq!(r.json()["message"], "server error");
        assert_eq!(
            text,
            "errCode: 400, errMsg: Current service DEFAULT_GROUP@@k is ephemeral service, \
             can't register persistent instance. "
        );
    }
    assert_eq!(instances(&s, "public", "DEFAULT_GROUP@@k"), 1);
    let r = s
        .call(Method::Delete, &format!("{V2}/instance?{ephemeral}"))
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    let r = s
        .call(Method::Post, &format!("{V3A}/instance?{persistent}"))
        .await;
    assert_eq!(
        r.json(),
        ok_envelope(json!("ok")),
        "an empty service takes either"
    );
    let r = s
        .call(Method::Post, &format!("{V3C}/instance?{ephemeral}"))
        .await;
    let text = assert_error(&r, 400, 30000, "v3 client");
    assert!(
        text.contains("is persistent service, can't register ephemeral"),
        "{text}"
    );
    // The 2.x door: an ephemeral InstanceRequest into the persistent service.
    let writer = Raw::connect(s.grpc_addr).await;
    let _keep = writer.set_up().await.keep_alive();
    let (kind, json) = writer
        .request(&InstanceRequest {
            naming: naming("k"),
            r#type: Some("registerInstance".into()),
            instance: Some(WireInstance {
                ip: Some("10.7.0.3".into()),
                port: Some(3),
                ..WireInstance::default()
            }),
            ..InstanceRequest::default()
        })
        .await;
    assert_eq!(kind, "ErrorResponse", "{json}");
    assert_eq!(json["errorCode"], 400, "{json}");
    assert_eq!(
        json["message"],
        "errCode: 400, errMsg: Current service DEFAULT_GROUP@@k is persistent service, \
         can't register ephemeral instance. "
    );
    assert_eq!(instances(&s, "public", "DEFAULT_GROUP@@k"), 1);
    s.stop().await;
}

/// v2/v3 health updates (naming/core/HealthOperatorV2Impl.java
/// `updateHealthStatusForPersistentInstance`): refused with 400 / 30000
/// unless the cluster's checker is NONE; then only a persistent instance
/// changes, and an ephemeral one's update is a quiet "ok".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_updates_are_the_operators_only_under_a_none_checker() {
    let s = TestServer::spawn().await;
    // Loopback: the server probes persistent instances until NONE is set.
    // A v2 registration with `ephemeral=false` is persistent
    // (InstanceControllerV2.register builds the instance from the form).
    let r = s
        .call(
            Method::Post,
            &format!("{V2}/instance?serviceName=h&ip=127.0.0.1&port=1&ephemeral=false"),
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")), "{}", r.body);
    let persistent = s
        .app
        .store
        .snapshot(ServiceRef::new("public", "DEFAULT_GROUP@@h"))
        .is_some_and(|snap| snap.instances().iter().any(|i| !i.ephemeral));
    assert!(
        persistent,
        "a v2 ephemeral=false registration is persistent"
    );
    v1_register(&s, "serviceName=h&ip=127.0.0.2&port=2").await;
    let update = |prefix: &str, ip: &str, port: u16, healthy: bool| {
        format!("{prefix}/health/instance?serviceName=h&ip={ip}&port={port}&healthy={healthy}")
    };
    let r = s
        .call(Method::Put, &update(V2, "127.0.0.1", 1, false))
        .await;
    assert_eq!(
        assert_error(&r, 400, 30000, "a checked cluster"),
        "health check is still working, service: DEFAULT_GROUP@@h, cluster: DEFAULT"
    );
    let none = "%7B%22type%22%3A%22NONE%22%7D";
    let r = s
        .call(
            Method::Put,
            &format!(
                "{V3A}/cluster?serviceName=h&clusterName=DEFAULT&checkPort=80&useInstancePort4Check=true&healthChecker={none}"
            ),
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")), "{}", r.body);
    let health = |ip: &str| {
        s.app
            .store
            .snapshot(ServiceRef::new("public", "DEFAULT_GROUP@@h"))
            .and_then(|snap| {
                snap.instances()
                    .iter()
                    .find(|i| i.ip.to_string() == ip)
                    .map(|i| i.healthy)
            })
    };
    for healthy in [true, false] {
        let r = s
            .call(Method::Put, &update(V3A, "127.0.0.1", 1, healthy))
            .await;
        assert_eq!(r.json(), ok_envelope(json!("ok")), "{}", r.body);
        eventually("the persistent instance's health", || {
            health("127.0.0.1") == Some(healthy)
        })
        .await;
    }
    let r = s
        .call(Method::Put, &update(V2, "127.0.0.2", 2, false))
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")), "{}", r.body);
    assert_eq!(
        health("127.0.0.2"),
        Some(true),
        "an ephemeral instance is its beats'"
    );
    s.stop().await;
}

/// With `--namespace-delete-protection` (ours; Nacos has no such setting),
/// a namespace that holds services is kept, through every door, until it
/// is empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_protection_keeps_a_namespace_that_holds_services() {
    let s = TestServer::with(registry_server::Config {
        namespace_delete_protection: true,
        ..registry_server::Config::for_test()
    })
    .await;
    let create = "/nacos/v1/console/namespaces?customNamespaceId=dev&namespaceName=Dev";
    assert_eq!(s.call(Method::Post, create).await.body, "true");
    v1_register(&s, "serviceName=held&ip=10.0.0.9&port=1&namespaceId=dev").await;
    let v1_delete = "/nacos/v1/console/namespaces?namespaceId=dev";
    assert_eq!(s.call(Method::Delete, v1_delete).await.body, "false");
    let r = s
        .call(
            Method::Delete,
            "/nacos/v3/admin/core/namespace?namespaceId=dev",
        )
        .await;
    assert!(assert_error(&r, 400, 23000, "delete held").contains("still holds 1 service"));
    assert!(s.app.namespaces.table().exists("dev"));
    s.app
        .store
        .delete_service(ServiceRef::new("dev", "DEFAULT_GROUP@@held"))
        .unwrap();
    assert_eq!(s.call(Method::Delete, v1_delete).await.body, "true");
    assert!(!s.app.namespaces.table().exists("dev"));
    s.stop().await;
}

fn naming(service: &str) -> NamingHead {
    NamingHead {
        namespace: Some("public".into()),
        service_name: Some(service.into()),
        group_name: Some("DEFAULT_GROUP".into()),
    }
}

fn ports_of(hosts: &Value) -> Vec<u64> {
    let mut p: Vec<u64> = hosts
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["port"].as_u64().unwrap())
        .collect();
    p.sort_unstable();
    p
}

/// Instances registered through v1 and 2.x gRPC are listed by the v2 and
/// v3 doors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_doors_see_v1_and_grpc_instances() {
    let s = TestServer::spawn().await;
    v1_register(&s, "serviceName=x&ip=10.1.0.1&port=1").await;
    let writer = Raw::connect(s.grpc_addr).await;
    let _keep = writer.set_up().await.keep_alive();
    let _: InstanceResponse = writer
        .expect(&InstanceRequest {
            naming: naming("x"),
            r#type: Some("registerInstance".into()),
            instance: Some(WireInstance {
                ip: Some("10.1.0.1".into()),
                port: Some(4),
                ..WireInstance::default()
            }),
            ..InstanceRequest::default()
        })
        .await;
    eventually("two instances", || {
        instances(&s, "public", "DEFAULT_GROUP@@x") == 2
    })
    .await;
    let all = vec![1, 4];
    assert_eq!(
        ports_of(
            &s.call(Method::Get, &format!("{V2}/instance/list?serviceName=x"))
                .await
                .json()["data"]["hosts"]
        ),
        all
    );
    assert_eq!(
        ports_of(
            &s.call(Method::Get, &format!("{V3C}/instance/list?serviceName=x"))
                .await
                .json()["data"]
        ),
        all
    );
    assert_eq!(
        ports_of(
            &s.call(Method::Get, &format!("{V3A}/instance/list?serviceName=x"))
                .await
                .json()["data"]
        ),
        all
    );
    // The gRPC connection is a client, and so is each address that
    // registered over HTTP (naming/core/v2/client/impl/IpPortBasedClient.java:
    // `ip:port#true`, `#false` for persistent instances), but not the
    // address of the connection's own instance.
    // Persistent: probed by the server, so on loopback.
    v1_register(&s, "serviceName=y&ip=127.0.0.1&port=2&ephemeral=false").await;
    let r = s.call(Method::Get, &format!("{V3A}/client/list")).await;
    let ids: Vec<String> = serde_json::from_value(r.json()["data"].clone()).unwrap();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids[0].contains('_'), "a connection id first: {ids:?}");
    assert_eq!(ids[1..], ["10.1.0.1:1#true", "127.0.0.1:2#false"]);
    // An address client's detail and lists (naming/core/ClientServiceImpl.java:
    // `clientType` "ipPort", no connection fields; what it publishes; the
    // service's publishers name it).
    let d = s
        .call(
            Method::Get,
            &format!("{V3A}/client?clientId=10.1.0.1:1%23true"),
        )
        .await
        .json();
    assert_eq!(
        (
            d["data"]["clientType"].clone(),
            d["data"]["ephemeral"].clone(),
            d["data"]["clientIp"].clone()
        ),
        (json!("ipPort"), json!(true), Value::Null),
        "{d}"
    );
    assert!(
        d["data"]["lastUpdatedTime"].as_u64().unwrap() > 0,
        "its beat: {d}"
    );
    let p = s
        .call(
            Method::Get,
            &format!("{V3A}/client/publish/list?clientId=127.0.0.1:2%23false"),
        )
        .await
        .json();
    assert_eq!(
        p["data"],
        json!([{"namespaceId": "public", "groupName": "DEFAULT_GROUP", "serviceName": "y",
                "publisherInfo": {"clientId": null, "ip": "127.0.0.1", "port": 2, "clusterName": "DEFAULT"},
                "subscriberInfo": null}])
    );
    let p = s
        .call(
            Method::Get,
            &format!("{V3A}/client/service/publisher/list?serviceName=x"),
        )
        .await
        .json();
    let publishers: Vec<&str> = p["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["clientId"].as_str().unwrap())
        .collect();
    assert_eq!(publishers.len(), 2, "{p}");
    assert_eq!(publishers[1], "10.1.0.1:1#true", "{p}");
    // Metrics (OperatorV2Impl.metrics): the status alone by default, the
    // counts of both kinds of client on `onlyStatus=false`; v3's
    // MetricsInfo has no cpu/load/mem, v2's MetricsInfoVo has.
    for prefix in [V2, V3A] {
        let r = s.call(Method::Get, &format!("{prefix}/ops/metrics")).await;
        assert_eq!(r.json(), ok_envelope(json!({"status": "UP"})));
    }
    let full = s
        .call(Method::Get, &format!("{V3A}/ops/metrics?onlyStatus=false"))
        .await
        .json();
    assert_eq!(
        full["data"],
        json!({
            "status": "UP", "serviceCount": 2, "instanceCount": 3, "subscribeCount": 0,
            "clientCount": 3, "connectionBasedClientCount": 1, "ephemeralIpPortClientCount": 1,
            "persistentIpPortClientCount": 1, "responsibleClientCount": 3,
        })
    );
    let v2 = s
        .call(Method::Get, &format!("{V2}/ops/metrics?onlyStatus=false"))
        .await
        .json();
    assert!(
        v2["data"]["mem"].is_number() && v2["data"]["cpu"].is_number(),
        "{v2}"
    );
    assert_eq!(v2["data"]["clientCount"], 3);
    s.stop().await;
}

// ----- writes ------------------------------------------------------------------

/// `InstanceControllerV2`: register, list, update, detail, deregister.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_round_trip() {
    let s = TestServer::spawn().await;
    let q = "serviceName=orders&groupName=G&ip=10.0.0.1&port=8080";
    // InstanceControllerV2.register → Result.success("ok").
    let r = s
        .call(
            Method::Post,
            &format!("{V2}/instance?{q}&weight=2&metadata=k%3Dv"),
        )
        .await;
    assert_eq!((r.status, r.json()), (200, ok_envelope(json!("ok"))));
    // InstanceControllerV2.list → Result<ServiceInfo>.
    let r = s
        .call(
            Method::Get,
            &format!("{V2}/instance/list?serviceName=orders&groupName=G"),
        )
        .await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(
        (v["code"].clone(), v["message"].clone()),
        (json!(0), json!("success"))
    );
    let info = &v["data"];
    assert_eq!(info["name"], "G@@orders");
    assert_eq!(info["groupName"], "G");
    let host = &info["hosts"][0];
    assert_eq!(
        (
            host["ip"].clone(),
            host["port"].clone(),
            host["weight"].clone()
        ),
        (json!("10.0.0.1"), json!(8080), json!(2.0))
    );
    assert_eq!(host["metadata"], json!({"k": "v"}));
    // InstanceControllerV2.update: weight, enabled, metadata replaced.
    let r = s
        .call(
            Method::Put,
            &format!("{V2}/instance?{q}&weight=3&metadata=k%3Dw"),
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    // InstanceControllerV2.detail → InstanceDetailInfoVo.
    let r = s.call(Method::Get, &format!("{V2}/instance?{q}")).await;
    assert_eq!(
        r.json(),
        ok_envelope(json!({
            "serviceName": "G@@orders", "ip": "10.0.0.1", "port": 8080, "clusterName": "DEFAULT",
            "weight": 3.0, "healthy": true, "instanceId": "10.0.0.1#8080#DEFAULT#G@@orders",
            "metadata": {"k": "w"},
        }))
    );
    // PATCH answers a raw `ok` (no @NacosApi envelope on success).
    let r = s
        .call(
            Method::Patch,
            &format!("{V2}/instance?{q}&weight=4&enabled=false&metadata="),
        )
        .await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    // A disabled instance is not listed to clients.
    let r = s
        .call(
            Method::Get,
            &format!("{V2}/instance/list?serviceName=orders&groupName=G"),
        )
        .await;
    assert_eq!(r.json()["data"]["hosts"], json!([]));
    // The beat keeps v1's raw body (InstanceControllerV2.beat).
    let r = s
        .call(
            Method::Put,
            &format!("{V2}/instance/beat?serviceName=G%40%40orders&ip=10.0.0.1&port=8080"),
        )
        .await;
    assert_eq!(r.json()["code"], 10200, "{}", r.body);
    // ... and NamingUtils.checkServiceNameFormat wants the name grouped
    // (api/naming/utils/NamingUtils.java): 400 / 20002 otherwise.
    for (name, detail) in [
        (
            "orders",
            "Param 'serviceName' is illegal, it should be format as 'groupName@@serviceName'",
        ),
        (
            "G%40%40",
            "Param 'serviceName' is illegal, it should be format as 'groupName@@serviceName'",
        ),
        (
            "%40%40orders",
            "Param 'serviceName' is illegal, groupName can't be empty",
        ),
    ] {
        let r = s
            .call(
                Method::Put,
                &format!("{V2}/instance/beat?serviceName={name}&ip=10.0.0.1&port=8080"),
            )
            .await;
        assert_eq!(assert_error(&r, 400, 20002, name), detail);
    }
    // ServiceControllerV2.list: names without their group in `services`.
    let r = s
        .call(Method::Get, &format!("{V2}/service/list?groupName=G"))
        .await;
    assert_eq!(
        r.json(),
        // naming/utils/ServiceUtil.java `pageServiceName` cuts the group off.
        ok_envelope(json!({"count": 1, "services": ["orders"]}))
    );
    // InstanceControllerV2.deregister.
    let r = s.call(Method::Delete, &format!("{V2}/instance?{q}")).await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    assert_eq!(instances(&s, "public", "G@@orders"), 0);
    // ServiceControllerV2: create, detail, update, delete.
    let r = s
        .call(
            Method::Post,
            &format!("{V2}/service?serviceName=inventory&protectThreshold=0.5&metadata=a%3D1"),
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    let r = s
        .call(Method::Get, &format!("{V2}/service?serviceName=inventory"))
        .await;
    let d = &r.json()["data"];
    assert_eq!(
        (
            d["namespace"].clone(),
            d["serviceName"].clone(),
            d["groupName"].clone()
        ),
        (json!("public"), json!("inventory"), json!("DEFAULT_GROUP"))
    );
    assert_eq!(
        (d["protectThreshold"].clone(), d["metadata"].clone()),
        (json!(0.5), json!({"a": "1"}))
    );
    let r = s
        .call(
            Method::Put,
            &format!("{V2}/service?serviceName=inventory&protectThreshold=0.25"),
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    let r = s
        .call(
            Method::Delete,
            &format!("{V2}/service?serviceName=inventory"),
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    s.stop().await;
}

/// The v2 error envelope (`NacosApiExceptionHandler`, `ErrorCode`), and
/// nothing applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_bad_input_gets_the_envelope_and_applies_nothing() {
    let s = TestServer::spawn().await;
    let cases: &[(Method, &str, u16, u64, &str)] = &[
        // InstanceForm.validate: PARAMETER_MISSING, Spring's words.
        (
            Method::Post,
            "/instance?ip=1.1.1.1&port=80",
            400,
            10000,
            "Required parameter 'serviceName' type String is not present",
        ),
        (
            Method::Post,
            "/instance?serviceName=a&port=80",
            400,
            10000,
            "Required parameter 'ip' type String is not present",
        ),
        (
            Method::Post,
            "/instance?serviceName=a&ip=1.1.1.1",
            400,
            10000,
            "Required parameter 'port' type Integer is not present",
        ),
        // NamingRequestUtil.checkWeight → WEIGHT_ERROR.
        (
            Method::Post,
            "/instance?serviceName=a&ip=1.1.1.1&port=80&weight=10001",
            400,
            21001,
            "instance format invalid: The weights range from 0.0 to 10000.0",
        ),
        // UtilsAndCommons.parseMetadata → INSTANCE_METADATA_ERROR.
        (
            Method::Post,
            "/instance?serviceName=a&ip=1.1.1.1&port=80&metadata=nope",
            400,
            21002,
            "metadata format incorrect:nope",
        ),
        // NamingUtils.checkServiceNameFormat → SERVICE_NAME_ERROR.
        (
            Method::Post,
            "/instance?serviceName=G%40%40&ip=1.1.1.1&port=80",
            400,
            21000,
            "",
        ),
        // InstanceOperatorClientImpl.getInstance0 → RESOURCE_NOT_FOUND, 404.
        (
            Method::Get,
            "/instance?serviceName=a&ip=1.1.1.1&port=80",
            404,
            20004,
            "no ips found for cluster DEFAULT in service DEFAULT_GROUP@@a",
        ),
        // ServiceOperatorV2Impl.queryService → SERVICE_NOT_EXIST.
        (
            Method::Get,
            "/service?serviceName=a",
            400,
            21008,
            "service not found, namespace: public, serviceName: DEFAULT_GROUP@@a",
        ),
        (
            Method::Delete,
            "/service?serviceName=a",
            400,
            21008,
            "service DEFAULT_GROUP@@a not found!",
        ),
        // A page that does not parse.
        (
            Method::Get,
            "/service/list?pageNo=x",
            400,
            20002,
            "For input string: \"x\"",
        ),
        // The PATCH form requires every field.
        (
            Method::Patch,
            "/instance?serviceName=a&ip=1.1.1.1&port=80",
            400,
            10000,
            "Required parameter 'weight' type String is not present",
        ),
        // InstanceOperatorClientImpl.updateInstance: INSTANCE_ERROR, the
        // service as Service.toString writes it.
        (
            Method::Put,
            "/instance?serviceName=a&ip=1.1.1.1&port=80",
            400,
            21004,
            "service not found, namespace: public, service: Service{namespace='public', \
             group='DEFAULT_GROUP', name='a', ephemeral=true, revision=0}",
        ),
        // patchInstance → getInstance0: RESOURCE_NOT_FOUND, 404.
        (
            Method::Patch,
            "/instance?serviceName=a&ip=1.1.1.1&port=80&weight=1&enabled=true&metadata=%7B%7D",
            404,
            20004,
            "no ips found for cluster DEFAULT in service DEFAULT_GROUP@@a",
        ),
    ];
    for (method, path, status, code, detail) in cases {
        let r = s.call(*method, &format!("{V2}{path}")).await;
        let got = assert_error(&r, *status, *code, path);
        if !detail.is_empty() {
            assert_eq!(got, *detail, "{path}");
        }
    }
    // InstanceForm's Double weight and Boolean fields fail Spring's binding:
    // NacosApiExceptionHandler.handleOtherException, 500 {30000, text, null}.
    for path in [
        "/nacos/v2/ns/instance?serviceName=a&ip=1.1.1.1&port=80&weight=abc",
        "/nacos/v3/admin/ns/instance?serviceName=a&ip=1.1.1.1&port=80&enabled=maybe",
    ] {
        let r = s.call(Method::Post, path).await;
        assert_eq!(r.status, 500, "{path}: {}", r.body);
        let v = r.json();
        assert_eq!(v["code"], 30000, "{path}: {v}");
        assert!(v["data"].is_null(), "{path}: {v}");
        let message = v["message"].as_str().unwrap_or_default();
        assert!(
            message
                .starts_with("org.springframework.validation.BeanPropertyBindingResult: 1 errors"),
            "{path}: {message}"
        );
    }
    assert_eq!(s.app.store.stats().services, 0, "nothing was applied");
    s.stop().await;
}

/// `InstanceOpenApiController` (client) and `InstanceControllerV3` (admin).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v3_round_trip() {
    let s = TestServer::spawn().await;
    let q = "serviceName=pay&ip=10.0.0.2&port=9000";
    let r = s
        .call_form(
            Method::Post,
            &format!("{V3C}/instance"),
            &format!("{q}&metadata=%7B%22zone%22%3A%22a%22%7D"),
        )
        .await;
    assert_eq!((r.status, r.json()), (200, ok_envelope(json!("ok"))));
    // heartBeat=true renews (InstanceOpenApiController.register).
    let r = s
        .call(Method::Post, &format!("{V3C}/instance?{q}&heartBeat=true"))
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    // ...and for an unknown instance is HTTP 200 {21003, null}: never registered.
    let r = s
        .call(
            Method::Post,
            &format!("{V3C}/instance?serviceName=pay&ip=10.0.0.3&port=9000&heartBeat=true"),
        )
        .await;
    assert_eq!(
        (r.status, r.json()),
        (
            200,
            json!({"code": 21003, "message": "instance not found", "data": null})
        )
    );
    assert_eq!(instances(&s, "public", "DEFAULT_GROUP@@pay"), 1);
    // The client list: `Instance` bodies (api/naming/pojo/Instance).
    let r = s
        .call(Method::Get, &format!("{V3C}/instance/list?serviceName=pay"))
        .await;
    let expected = json!({
        "instanceId": "10.0.0.2#9000#DEFAULT#DEFAULT_GROUP@@pay", "ip": "10.0.0.2", "port": 9000,
        "weight": 1.0, "healthy": true, "enabled": true, "ephemeral": true, "clusterName": "DEFAULT",
        "serviceName": "DEFAULT_GROUP@@pay", "metadata": {"zone": "a"},
        // No `instanceIdGenerator`: Instance.getInstanceIdGenerator reads it
        // from metadata once metadata is set (api/naming/pojo/Instance.java).
        "instanceHeartBeatInterval": 5000, "instanceHeartBeatTimeOut": 15000, "ipDeleteTimeout": 30000,
    });
    assert_eq!(r.json(), ok_envelope(json!([expected.clone()])));
    // The admin detail is the same `Instance`.
    let r = s.call(Method::Get, &format!("{V3A}/instance?{q}")).await;
    assert_eq!(r.json(), ok_envelope(expected));
    // Admin update, then a partial update that (as Nacos's form fills its
    // defaults) resets the omitted weight to 1.0.
    let r = s
        .call(
            Method::Put,
            &format!("{V3A}/instance?{q}&weight=5&enabled=false"),
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    let r = s
        .call(Method::Get, &format!("{V3A}/instance/list?serviceName=pay"))
        .await;
    let host = &r.json()["data"][0];
    assert_eq!(
        (host["weight"].clone(), host["enabled"].clone()),
        (json!(5.0), json!(false))
    );
    // The client list leaves a disabled instance out; the admin's keeps it.
    let r = s
        .call(Method::Get, &format!("{V3C}/instance/list?serviceName=pay"))
        .await;
    assert_eq!(r.json(), ok_envelope(json!([])));
    let r = s
        .call(
            Method::Put,
            &format!("{V3A}/instance/partial?{q}&enabled=true"),
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    let r = s.call(Method::Get, &format!("{V3A}/instance?{q}")).await;
    assert_eq!(r.json()["data"]["weight"], 1.0);
    // ServiceControllerV3.list: a page of ServiceViews.
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/service/list?serviceNameParam=pa"),
        )
        .await;
    assert_eq!(
        r.json(),
        ok_envelope(
            json!({"totalCount": 1, "pageNumber": 1, "pagesAvailable": 1, "pageItems": [
                {"name": "pay", "groupName": "DEFAULT_GROUP", "clusterCount": 1, "ipCount": 1, "healthyInstanceCount": 1, "triggerFlag": "false"}
            ]})
        )
    );
    // ServiceControllerV3.detail says namespaceId.
    let r = s
        .call(Method::Get, &format!("{V3A}/service?serviceName=pay"))
        .await;
    let d = &r.json()["data"];
    assert_eq!(
        (
            d["namespaceId"].clone(),
            d["clusterMap"]["DEFAULT"]["clusterName"].clone()
        ),
        (json!("public"), json!("DEFAULT"))
    );
    // Deleting a service with instances is refused (SERVICE_DELETE_FAILURE).
    let r = s
        .call(Method::Delete, &format!("{V3A}/service?serviceName=pay"))
        .await;
    assert_error(&r, 400, 21009, "delete non-empty");
    let r = s.call(Method::Delete, &format!("{V3C}/instance?{q}")).await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    assert_eq!(instances(&s, "public", "DEFAULT_GROUP@@pay"), 0);
    s.stop().await;
}

/// The v3 error envelope, and nothing applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v3_bad_input_gets_the_envelope_and_applies_nothing() {
    let s = TestServer::spawn().await;
    let cases: &[(Method, &str, u16, u64)] = &[
        (
            Method::Post,
            "/nacos/v3/client/ns/instance?ip=1.1.1.1&port=80",
            400,
            10000,
        ),
        (
            Method::Post,
            "/nacos/v3/client/ns/instance?serviceName=a&ip=1.1.1.1",
            400,
            10000,
        ),
        (
            Method::Post,
            "/nacos/v3/client/ns/instance?serviceName=a&ip=999.1.1.1&port=80",
            400,
            21004,
        ),
        (
            Method::Post,
            "/nacos/v3/client/ns/instance?serviceName=a&ip=1.1.1.1&port=80&weight=-1",
            400,
            21001,
        ),
        (
            Method::Post,
            "/nacos/v3/admin/ns/instance?serviceName=a&ip=1.1.1.1&port=80&metadata=x",
            400,
            21002,
        ),
        (Method::Get, "/nacos/v3/client/ns/instance/list", 400, 10000),
        // CatalogServiceV2Impl.listInstances: 404 {30000} for an unknown service.
        (
            Method::Get,
            "/nacos/v3/admin/ns/instance/list?serviceName=none",
            404,
            30000,
        ),
        (
            Method::Get,
            "/nacos/v3/admin/ns/service/list?pageSize=0",
            400,
            20002,
        ),
        (
            Method::Get,
            "/nacos/v3/admin/ns/instance?serviceName=a&ip=1.1.1.1&port=80",
            404,
            20004,
        ),
        // NamespaceControllerV3.createNamespace.
        (
            Method::Post,
            "/nacos/v3/admin/core/namespace?namespaceId=a%20b&namespaceName=A",
            400,
            22000,
        ),
        (
            Method::Post,
            "/nacos/v3/admin/core/namespace?namespaceId=ok&namespaceName=a%40b",
            400,
            22000,
        ),
        (
            Method::Post,
            "/nacos/v3/admin/core/namespace?namespaceId=public&namespaceName=P",
            400,
            22002,
        ),
        (
            Method::Post,
            "/nacos/v3/admin/core/namespace?namespaceId=x",
            400,
            10000,
        ),
        // NamespaceOperationService.getNamespace: 404 {22001}.
        (
            Method::Get,
            "/nacos/v3/admin/core/namespace?namespaceId=nope",
            404,
            22001,
        ),
        (Method::Get, "/nacos/v3/admin/core/namespace", 400, 10000),
        // partialUpdateInstance → patchInstance → getInstance0: 404 {20004}.
        (
            Method::Put,
            "/nacos/v3/admin/ns/instance/partial?serviceName=a&ip=1.1.1.1&port=80&weight=2",
            404,
            20004,
        ),
        // updateInstance of a service that does not exist: 400 {21004}.
        (
            Method::Put,
            "/nacos/v3/admin/ns/instance?serviceName=a&ip=1.1.1.1&port=80",
            400,
            21004,
        ),
    ];
    for (method, path, status, code) in cases {
        let r = s.call(*method, path).await;
        assert_error(&r, *status, *code, path);
    }
    assert_eq!(s.app.store.stats().services, 0, "nothing was applied");
    assert_eq!(
        s.app.namespaces.table().list().len(),
        1,
        "no namespace was created"
    );
    s.stop().await;
}

/// v1 metadata batches (`InstanceController.batchUpdateInstanceMetadata`,
/// `batchDeleteInstanceMetadata`) and health (`HealthController.update`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_batches_and_health() {
    let s = TestServer::spawn().await;
    let ns = "/nacos/v1/ns";
    assert_eq!(
        s.call(Method::Get, "/nacos/v1/console/health/liveness")
            .await
            .body,
        "OK"
    );
    for port in [1, 2] {
        let r = s
            .call(
                Method::Post,
                &format!("{ns}/instance?serviceName=m&ip=10.0.0.1&port={port}"),
            )
            .await;
        assert_eq!(r.body, "ok");
    }
    // Metadata batch: one named instance, then all of them.
    let one = "%5B%7B%22ip%22%3A%2210.0.0.1%22%2C%22port%22%3A1%7D%5D";
    let r = s.call(Method::Put, &format!("{ns}/instance/metadata/batch?serviceName=m&metadata=%7B%22a%22%3A%221%22%7D&instances={one}")).await;
    assert_eq!(
        (r.status, r.json()),
        (
            200,
            json!({"updated": ["10.0.0.1:1:unknown:DEFAULT:ephemeral"]})
        )
    );
    let r = s
        .call(
            Method::Put,
            &format!("{ns}/instance/metadata/batch?serviceName=m&metadata=b%3D2"),
        )
        .await;
    assert_eq!(r.json()["updated"].as_array().unwrap().len(), 2);
    let r = s
        .call(
            Method::Delete,
            &format!("{ns}/instance/metadata/batch?serviceName=m&metadata=a%3D1&instances=null"),
        )
        .await;
    assert_eq!(r.json()["updated"].as_array().unwrap().len(), 2);
    let r = s
        .call(
            Method::Get,
            &format!("{ns}/instance?serviceName=m&ip=10.0.0.1&port=1"),
        )
        .await;
    assert_eq!(r.json()["metadata"], json!({"b": "2"}));
    // A typo in `instances` is refused, not taken for "all".
    let r = s
        .call(
            Method::Put,
            &format!("{ns}/instance/metadata/batch?serviceName=m&metadata=c%3D3&instances=oops"),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    // Health of an instance.
    let r = s
        .call(
            Method::Put,
            &format!("{ns}/health/instance?serviceName=m&ip=10.0.0.1&port=2&healthy=false"),
        )
        .await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    let r = s
        .call(
            Method::Put,
            &format!("{ns}/health?serviceName=m&ip=10.0.0.1&port=2"),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "Param 'healthy' is required.")
    );
    s.stop().await;
}

/// Namespace quotas, on every door that registers: the v3 envelope
/// (`{23000}`) and the v1 text, nothing applied past them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_quotas_bound_every_door() {
    let s = TestServer::spawn().await;
    // Quotas: one service, two instances.
    let r = s.call(Method::Post, "/nacos/v3/admin/core/namespace?namespaceId=small&namespaceName=S&maxServices=1&maxInstances=2").await;
    assert_eq!(r.json(), ok_envelope(json!(true)));
    let reg = |svc: &str, port: u16| {
        format!("/nacos/v3/client/ns/instance?serviceName={svc}&ip=10.0.0.1&port={port}&namespaceId=small")
    };
    assert_eq!(
        s.call(Method::Post, &reg("a", 1)).await.json(),
        ok_envelope(json!("ok"))
    );
    assert_eq!(
        s.call(Method::Post, &reg("a", 2)).await.json(),
        ok_envelope(json!("ok"))
    );
    let r = s.call(Method::Post, &reg("a", 3)).await;
    assert_eq!(
        assert_error(&r, 400, 23000, "instance quota"),
        "namespace [small] holds its quota of 2 instances"
    );
    let r = s.call(Method::Post, &reg("b", 1)).await;
    assert_eq!(
        assert_error(&r, 400, 23000, "service quota"),
        "namespace [small] holds its quota of 1 services"
    );
    // Updating an existing instance is not growth.
    assert_eq!(
        s.call(Method::Post, &format!("{}&weight=2", reg("a", 2)))
            .await
            .json(),
        ok_envelope(json!("ok"))
    );
    // The v1 door enforces the same quota, in plain text.
    let r = s
        .call(
            Method::Post,
            "/nacos/v1/ns/instance?serviceName=a&ip=10.0.0.1&port=9&namespaceId=small",
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "namespace [small] holds its quota of 2 instances")
    );
    assert_eq!(instances(&s, "small", "DEFAULT_GROUP@@a"), 2);
    s.stop().await;
}

/// An instance registered through each door is listed by every other, and
/// a change reaches a UDP (1.x) and a gRPC (2.x) subscriber.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_door_sees_every_other() {
    let s = TestServer::spawn().await;
    // Subscribers: 1.x over UDP, 2.x over gRPC.
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    s.call(
        Method::Get,
        &format!("/nacos/v1/ns/instance/list?serviceName=x&udpPort={udp_port}"),
    )
    .await;
    let watcher = Raw::connect(s.grpc_addr).await;
    let mut stream = watcher.set_up().await;
    let _: SubscribeServiceResponse = watcher
        .expect(&SubscribeServiceRequest {
            naming: naming("x"),
            subscribe: Some(true),
            clusters: Some(String::new()),
            ..SubscribeServiceRequest::default()
        })
        .await;

    // One instance through each door.
    assert_eq!(
        s.call(
            Method::Post,
            "/nacos/v1/ns/instance?serviceName=x&ip=10.1.0.1&port=1"
        )
        .await
        .body,
        "ok"
    );
    assert_eq!(
        s.call(
            Method::Post,
            &format!("{V2}/instance?serviceName=x&ip=10.1.0.1&port=2")
        )
        .await
        .json(),
        ok_envelope(json!("ok"))
    );
    assert_eq!(
        s.call(
            Method::Post,
            &format!("{V3C}/instance?serviceName=x&ip=10.1.0.1&port=3")
        )
        .await
        .json(),
        ok_envelope(json!("ok"))
    );
    let writer = Raw::connect(s.grpc_addr).await;
    let _keep = writer.set_up().await.keep_alive();
    let _: InstanceResponse = writer
        .expect(&InstanceRequest {
            naming: naming("x"),
            r#type: Some("registerInstance".into()),
            instance: Some(WireInstance {
                ip: Some("10.1.0.1".into()),
                port: Some(4),
                ..WireInstance::default()
            }),
            ..InstanceRequest::default()
        })
        .await;
    let all = vec![1, 2, 3, 4];
    eventually("four instances", || {
        instances(&s, "public", "DEFAULT_GROUP@@x") == 4
    })
    .await;
    // Every door lists all four.
    assert_eq!(
        ports_of(
            &s.call(Method::Get, "/nacos/v1/ns/instance/list?serviceName=x")
                .await
                .json()["hosts"]
        ),
        all
    );
    assert_eq!(
        ports_of(
            &s.call(Method::Get, &format!("{V2}/instance/list?serviceName=x"))
                .await
                .json()["data"]["hosts"]
        ),
        all
    );
    assert_eq!(
        ports_of(
            &s.call(Method::Get, &format!("{V3C}/instance/list?serviceName=x"))
                .await
                .json()["data"]
        ),
        all
    );
    assert_eq!(
        ports_of(
            &s.call(Method::Get, &format!("{V3A}/instance/list?serviceName=x"))
                .await
                .json()["data"]
        ),
        all
    );
    let q: QueryServiceResponse = watcher
        .expect(&ServiceQueryRequest {
            naming: naming("x"),
            ..ServiceQueryRequest::default()
        })
        .await;
    let mut grpc_ports: Vec<u64> = q
        .service_info
        .unwrap()
        .hosts
        .iter()
        .map(|h| h.port as u64)
        .collect();
    grpc_ports.sort_unstable();
    assert_eq!(grpc_ports, all);

    // Pushes reach both subscribers; the last one lists all four.
    let mut buf = vec![0u8; 65536];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut udp_saw_all = false;
    while !udp_saw_all {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let (n, _) = tokio::time::timeout(left, udp.recv_from(&mut buf))
            .await
            .expect("a UDP push")
            .unwrap();
        let packet = registry_proto::udp::push::decode_push(&buf[..n]).expect("a push packet");
        let info = registry_proto::naming::list::ServiceInfo::parse(packet.data.as_bytes())
            .expect("push data");
        udp_saw_all = info.hosts.len() == 4;
    }
    let mut grpc_saw_all = false;
    while !grpc_saw_all {
        let push = stream
            .next_push(Duration::from_secs(5))
            .await
            .expect("a gRPC push");
        let req: NotifySubscriberRequest = serde_json::from_slice(push.json()).unwrap();
        grpc_saw_all = req.service_info.expect("info").hosts.len() == 4;
    }
    s.stop().await;
}

// ----- admin views: clients, subscribers, clusters, checkers ------------------------

/// A 2.x client that registered `x` at 10.1.0.9:7 and subscribes to it,
/// plus a 1.x UDP subscriber: `ClientControllerV3`, `ClientInfoControllerV2`
/// (`ClientServiceImpl`), `ServiceControllerV3.subscribers`,
/// `ClientControllerV3.getResponsibleServer4Client`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_and_subscriber_views() {
    let s = TestServer::spawn().await;
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    s.call(
        Method::Get,
        &format!("/nacos/v1/ns/instance/list?serviceName=x&udpPort={udp_port}"),
    )
    .await;
    let client = Raw::connect(s.grpc_addr).await;
    let _keep = client.set_up().await.keep_alive();
    let _: InstanceResponse = client
        .expect(&InstanceRequest {
            naming: naming("x"),
            r#type: Some("registerInstance".into()),
            instance: Some(WireInstance {
                ip: Some("10.1.0.9".into()),
                port: Some(7),
                ..WireInstance::default()
            }),
            ..InstanceRequest::default()
        })
        .await;
    let _: SubscribeServiceResponse = client
        .expect(&SubscribeServiceRequest {
            naming: naming("x"),
            subscribe: Some(true),
            clusters: Some(String::new()),
            ..SubscribeServiceRequest::default()
        })
        .await;
    let ids = s
        .call(Method::Get, &format!("{V3A}/client/list"))
        .await
        .json();
    let id = ids["data"][0].as_str().expect("a client id").to_owned();
    let client_ip = id.split('_').nth(1).unwrap().to_owned();

    // ClientServiceImpl.getClientDetail: a connection-based client.
    for base in [V2, V3A] {
        let d = s
            .call(Method::Get, &format!("{base}/client?clientId={id}"))
            .await
            .json();
        let d = &d["data"];
        assert_eq!(
            (
                d["clientId"].as_str(),
                d["ephemeral"].as_bool(),
                d["clientType"].as_str(),
                d["connectType"].as_str(),
                d["clientIp"].as_str()
            ),
            (
                Some(id.as_str()),
                Some(true),
                Some("connection"),
                Some("GRPC"),
                Some(client_ip.as_str())
            ),
            "{base}: {d}"
        );
        assert!(d["lastUpdatedTime"].as_u64().unwrap() > 0);
    }
    // getPublishedServiceList (v3) and ...Adapt (v2).
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/client/publish/list?clientId={id}"),
        )
        .await;
    assert_eq!(
        r.json(),
        ok_envelope(json!([{
            "namespaceId": "public", "groupName": "DEFAULT_GROUP", "serviceName": "x",
            "publisherInfo": {"clientId": null, "ip": "10.1.0.9", "port": 7, "clusterName": "DEFAULT"},
            "subscriberInfo": null,
        }]))
    );
    let r = s
        .call(
            Method::Get,
            &format!("{V2}/client/publish/list?clientId={id}"),
        )
        .await;
    assert_eq!(
        r.json(),
        ok_envelope(json!([{
            "namespace": "public", "group": "DEFAULT_GROUP", "serviceName": "x",
            "registeredInstance": {"ip": "10.1.0.9", "port": 7, "cluster": "DEFAULT"},
        }]))
    );
    // getSubscribeServiceList (v3) and ...Adapt (v2).
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/client/subscribe/list?clientId={id}"),
        )
        .await
        .json();
    assert_eq!(r["data"][0]["serviceName"], "x", "{r}");
    assert_eq!(r["data"][0]["subscriberInfo"]["address"], json!(client_ip));
    let r = s
        .call(
            Method::Get,
            &format!("{V2}/client/subscribe/list?clientId={id}"),
        )
        .await
        .json();
    assert_eq!(
        r["data"][0]["subscriberInfo"]["addr"],
        json!(client_ip),
        "{r}"
    );

    // getPublishedClientList: v3 filters by what is given; v2 compares ip
    // and port even when absent (so only an exact match is listed).
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/client/service/publisher/list?serviceName=x"),
        )
        .await;
    assert_eq!(
        r.json(),
        ok_envelope(
            json!([{"clientId": id, "ip": "10.1.0.9", "port": 7, "clusterName": "DEFAULT"}])
        )
    );
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/client/service/publisher/list?serviceName=x&port=8"),
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!([])));
    let r = s
        .call(
            Method::Get,
            &format!("{V2}/client/service/publisher/list?serviceName=x"),
        )
        .await;
    assert_eq!(r.json(), ok_envelope(json!([])));
    let r = s
        .call(
            Method::Get,
            &format!("{V2}/client/service/publisher/list?serviceName=x&ip=10.1.0.9&port=7"),
        )
        .await;
    assert_eq!(
        r.json(),
        ok_envelope(json!([{"ip": "10.1.0.9", "port": 7, "cluster": "DEFAULT", "clientId": id}]))
    );
    // getSubscribeClientList: connection subscribers only (the 1.x UDP one is no client).
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/client/service/subscriber/list?serviceName=x"),
        )
        .await
        .json();
    assert_eq!(r["data"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["data"][0]["clientId"], json!(id));
    assert_eq!(r["data"][0]["address"], json!(client_ip));
    let r = s
        .call(
            Method::Get,
            &format!("{V2}/client/service/subscriber/list?serviceName=x"),
        )
        .await;
    assert_eq!(
        r.json(),
        ok_envelope(json!([{"clientId": id, "ip": client_ip, "port": 0}]))
    );

    // ServiceControllerV3.subscribers: a Page of SubscriberInfo, both protocols.
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/service/subscribers?serviceName=x"),
        )
        .await
        .json();
    let page = &r["data"];
    assert_eq!(
        (
            page["totalCount"].clone(),
            page["pageNumber"].clone(),
            page["pagesAvailable"].clone()
        ),
        (json!(2), json!(1), json!(1)),
        "{r}"
    );
    let mut ports: Vec<u64> = page["pageItems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["port"].as_u64().unwrap())
        .collect();
    ports.sort_unstable();
    assert_eq!(ports, vec![0, u64::from(udp_port)]);
    assert_eq!(page["pageItems"][0]["serviceName"], "x");
    assert_eq!(page["pageItems"][0]["groupName"], "DEFAULT_GROUP");
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/service/subscribers?serviceName=x&pageSize=1&pageNo=2"),
        )
        .await
        .json();
    assert_eq!(r["data"]["pageItems"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["data"]["pagesAvailable"], 2);

    // getResponsibleServer4Client: this node, alone.
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/client/distro?ip=1.2.3.4&port=80"),
        )
        .await
        .json();
    assert!(
        r["data"]["responsibleServer"]
            .as_str()
            .unwrap()
            .contains(':'),
        "{r}"
    );

    // Bad input: the envelope, with Nacos's codes.
    for (path, status, code, what) in [
        (format!("{V3A}/client"), 400, 10000, "no clientId"),
        (
            format!("{V3A}/client?clientId=1_10.0.0.1_5"),
            404,
            20004,
            "unknown client",
        ),
        (
            format!("{V2}/client?clientId=nonsense"),
            404,
            20004,
            "malformed client id",
        ),
        (
            format!("{V2}/client/publish/list?clientId=nonsense"),
            404,
            20004,
            "v2 publish list",
        ),
        (
            format!("{V3A}/client/subscribe/list"),
            400,
            10000,
            "v3 subscribe list without id",
        ),
        (
            format!("{V3A}/client/service/publisher/list"),
            400,
            10000,
            "no serviceName",
        ),
        (
            format!("{V3A}/service/subscribers?serviceName=x&pageNo=0"),
            400,
            20002,
            "page 0",
        ),
        (
            format!("{V3A}/service/subscribers"),
            400,
            10000,
            "subscribers without service",
        ),
        (
            format!("{V3A}/client/distro?ip=1.2.3.4"),
            400,
            10000,
            "distro without port",
        ),
    ] {
        let r = s.call(Method::Get, &path).await;
        assert_error(&r, status, code, what);
    }
    s.stop().await;
}

/// `ClusterControllerV3.update`, `HealthControllerV3.checkers`,
/// `ServiceControllerV3.listSelectorTypes`, `OperatorControllerV3.setLogLevel`, `InstanceControllerV2.listWithHealthStatus`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_checkers_log_and_statuses() {
    let s = TestServer::spawn().await;
    v1_register(
        &s,
        "serviceName=x&groupName=G&ip=10.0.0.1&port=1&metadata=a%3Db",
    )
    .await;
    v1_register(
        &s,
        "serviceName=x&groupName=G&ip=10.0.0.2&port=2&healthy=false&ephemeral=false",
    )
    .await;
    let metadata = |s: &TestServer| {
        s.app
            .store
            .snapshot(ServiceRef::new("public", "G@@x"))
            .map(|snap| {
                snap.metadata()
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };

    let r = s.call(Method::Get, &format!("{V3A}/health/checkers")).await;
    let checkers = &r.json()["data"];
    assert_eq!(checkers["TCP"], json!({"type": "TCP"}));
    assert_eq!(checkers["NONE"], json!({"type": "NONE"}));
    assert_eq!(
        checkers["HTTP"],
        json!({"type": "HTTP", "path": "", "headers": "", "expectedResponseCode": 200})
    );

    // ServiceControllerV3.listSelectorTypes.
    let r = s
        .call(Method::Get, &format!("{V3A}/service/selector/types"))
        .await;
    assert_eq!(r.json(), ok_envelope(json!(["none", "label"])));

    // The cluster's checker becomes the service metadata the checker reads.
    let form =
        "serviceName=x&groupName=G&clusterName=DEFAULT&checkPort=80&useInstancePort4Check=true\
                &healthChecker=%7B%22type%22%3A%22HTTP%22%2C%22path%22%3A%22%2Fup%22%7D";
    let r = s
        .call_form(Method::Put, &format!("{V3A}/cluster"), form)
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    let before = metadata(&s);
    assert!(
        before.contains(&"preserved.health.checker.DEFAULT=HTTP:/up".to_owned()),
        "{before:?}"
    );

    // Bad input: the envelope, nothing applied.
    let base =
        "serviceName=x&groupName=G&clusterName=DEFAULT&checkPort=80&useInstancePort4Check=true";
    for (form, status, code, what) in [
        ("serviceName=x&checkPort=80&useInstancePort4Check=true&healthChecker=%7B%7D".to_owned(), 400, 10000, "no clusterName"),
        (base.to_owned(), 400, 10000, "no healthChecker"),
        (format!("{base}&healthChecker=nope"), 400, 20002, "checker not JSON"),
        (format!("{base}&healthChecker=%7B%22type%22%3A%22MYSQL%22%2C%22user%22%3A7%7D"), 400, 20002, "MYSQL user not a string"),
        ("serviceName=x&groupName=G&clusterName=bad_name&checkPort=80&useInstancePort4Check=true&healthChecker=%7B%7D".to_owned(), 400, 21004, "cluster name"),
        ("serviceName=nope&clusterName=DEFAULT&checkPort=80&useInstancePort4Check=true&healthChecker=%7B%7D".to_owned(), 400, 30000, "unknown service"),
    ] {
        let r = s.call_form(Method::Put, &format!("{V3A}/cluster"), &form).await;
        assert_error(&r, status, code, what);
        assert_eq!(metadata(&s), before, "{what} applied something");
    }
    assert!(s
        .app
        .store
        .snapshot(ServiceRef::new("public", "DEFAULT_GROUP@@nope"))
        .is_none());

    // useInstancePort4Check=false with a checkPort (UpdateClusterForm) is
    // kept: our checks then probe that port (as Nacos's processors probe
    // cluster.getDefCkport()), and the service detail shows it.
    let form =
        "serviceName=x&groupName=G&clusterName=DEFAULT&checkPort=9099&useInstancePort4Check=false\
                &healthChecker=%7B%22type%22%3A%22TCP%22%7D";
    let r = s
        .call_form(Method::Put, &format!("{V3A}/cluster"), form)
        .await;
    assert_eq!(r.json(), ok_envelope(json!("ok")));
    let kept = metadata(&s);
    assert!(
        kept.contains(&"preserved.health.check.port.DEFAULT=9099".to_owned()),
        "{kept:?}"
    );
    let r = s
        .call(
            Method::Get,
            &format!("{V3A}/service?serviceName=x&groupName=G"),
        )
        .await;
    let cluster = &r.json()["data"]["clusterMap"]["DEFAULT"];
    assert_eq!(cluster["healthyCheckPort"], 9099, "{cluster}");
    assert_eq!(cluster["useInstancePortForCheck"], false, "{cluster}");
    // Nacos 3's NoneSelector serializes its context type.
    assert_eq!(
        r.json()["data"]["selector"],
        json!({"type": "none", "contextType": "NONE"})
    );
    // Back to the instance's port: the check port goes.
    let form =
        "serviceName=x&groupName=G&clusterName=DEFAULT&checkPort=80&useInstancePort4Check=true\
                &healthChecker=%7B%22type%22%3A%22TCP%22%7D";
    s.call_form(Method::Put, &format!("{V3A}/cluster"), form)
        .await;
    assert!(!metadata(&s)
        .iter()
        .any(|m| m.starts_with("preserved.health.check.port")));

    // setLogLevel: the parameters checked; an embedded server (this one:
    // no filter installed by the binary) refuses clearly. The change
    // itself is tested in `log_levels` and through the binary in `smoke`.
    let r = s
        .call(Method::Put, &format!("{V3A}/ops/log?logName=naming-server"))
        .await;
    assert_error(&r, 400, 10000, "no logLevel");
    let r = s
        .call(
            Method::Put,
            &format!("{V3A}/ops/log?logName=naming-server&logLevel=LOUD"),
        )
        .await;
    assert_error(&r, 400, 20002, "bad level");
    let r = s
        .call(
            Method::Put,
            &format!("{V3A}/ops/log?logName=naming-server&logLevel=DEBUG"),
        )
        .await;
    assert!(assert_error(&r, 501, 30000, "log level").contains("no log filter"));

    // listWithHealthStatus: raw `{"ips":[...]}`, every method, a `##` namespace prefix.
    let r = s
        .call(Method::Get, "/nacos/v2/ns/instance/statuses/G%40%40x")
        .await;
    let mut ips: Vec<String> = serde_json::from_value(r.json()["ips"].clone()).unwrap();
    ips.sort();
    assert_eq!(ips, vec!["10.0.0.1:1_true", "10.0.0.2:2_false"]);
    let r = s
        .call(
            Method::Put,
            "/nacos/v2/ns/instance/statuses/public%23%23G%40%40x",
        )
        .await;
    assert_eq!(r.json()["ips"].as_array().unwrap().len(), 2, "{}", r.body);
    let r = s
        .call(Method::Get, "/nacos/v2/ns/instance/statuses/G%40%40unknown")
        .await;
    assert_eq!(r.json(), json!({"ips": []}));
    let r = s
        .call(Method::Get, "/nacos/v2/ns/instance/statuses/x")
        .await;
    assert!(assert_error(&r, 400, 20002, "no group").contains("groupName@@serviceName"));
    s.stop().await;
}

/// `UserControllerV3.login`: the 3.x body (`username` added) and the
/// `Authorization: Bearer` header; bad credentials are a 403 text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v3_login_answers_the_3x_body() {
    use registry_server::auth::{hash_password, MIN_ITERATIONS};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::write(
        &users,
        format!("ops:{}\n", hash_password("pw-ops", MIN_ITERATIONS).unwrap()),
    )
    .unwrap();
    let s = TestServer::with(registry_server::Config {
        auth_users: Some(users),
        ..registry_server::Config::for_test()
    })
    .await;
    let mut conn = tokio::net::TcpStream::connect(s.http_addr).await.unwrap();
    conn.write_all(
        b"POST /nacos/v3/auth/user/login?username=ops&password=pw-ops HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{raw}");
    let v: Value = serde_json::from_str(body).unwrap();
    let token = v["accessToken"].as_str().unwrap();
    assert!(
        head.contains(&format!("Authorization: Bearer {token}")),
        "{head}"
    );
    assert_eq!(
        (v["username"].clone(), v["globalAdmin"].clone()),
        (json!("ops"), json!(false))
    );
    assert!(v["tokenTtl"].as_u64().unwrap() > 0);
    // The token opens the API.
    let r = s
        .call(
            Method::Get,
            &format!("{V3C}/instance/list?serviceName=x&accessToken={token}"),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = s
        .call(
            Method::Post,
            "/nacos/v3/auth/user/login?username=ops&password=no",
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    s.stop().await;
}
