//! The Nacos 2.x gRPC server over real sockets: connection life cycle, ownership of
//! ephemeral instances, pushes and their acks, bad input and limits.

use crate::common;
use crate::grpc_client;

use std::time::Duration;

use common::TestServer;
use grpc_client::Raw;
use registry_core::{ChangeEvent, ServiceKey, ServiceRef};
use registry_proto::grpc::message::{
    BatchInstanceRequest, BatchInstanceResponse, ErrorResponse, HealthCheckRequest,
    InstanceRequest, InstanceResponse, NamingHead, NotifySubscriberRequest, QueryServiceResponse,
    RequestHead, ServerCheckRequest, ServerCheckResponse, ServiceListRequest, ServiceListResponse,
    ServiceQueryRequest, SubscribeServiceRequest, SubscribeServiceResponse, WireInstance,
};
use registry_proto::grpc::Payload;
use registry_server::Config;

fn naming(service: &str) -> NamingHead {
    NamingHead {
        namespace: Some("public".into()),
        service_name: Some(service.into()),
        group_name: Some("DEFAULT_GROUP".into()),
    }
}

fn instance(port: i64) -> WireInstance {
    WireInstance {
        ip: Some("127.0.0.1".into()),
        port: Some(port),
        ..WireInstance::default()
    }
}

fn register(service: &str, port: i64) -> InstanceRequest {
    InstanceRequest {
        naming: naming(service),
        r#type: Some("registerInstance".into()),
        instance: Some(instance(port)),
        ..InstanceRequest::default()
    }
}

fn ports(server: &TestServer, service: &str) -> Vec<u16> {
    let name = format!("DEFAULT_GROUP@@{service}");
    server
        .app
        .store
        .snapshot(ServiceRef::new("public", &name))
        .map(|s| s.instances().iter().map(|i| i.port).collect())
        .unwrap_or_default()
}

async fn eventually(what: &str, check: impl FnMut() -> bool) {
    eventually_within(Duration::from_secs(5), what, check).await;
}

/// Polls `check` every 10 ms (of the runtime's clock, virtual when paused).
async fn eventually_within(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_check_names_the_connection_and_requests_before_setup_are_refused() {
    let server = TestServer::spawn().await;
    let raw = Raw::connect(server.grpc_addr).await;
    let check: ServerCheckResponse = raw.expect(&ServerCheckRequest::default()).await;
    let id = check.connection_id.expect("connection id");
    // `<millis>_<ip>_<port>`, the port being the client's.
    let parts: Vec<&str> = id.split('_').collect();
    assert_eq!(parts.len(), 3, "{id}");
    assert_eq!(parts[1], "127.0.0.1");
    assert!(!check.support_ability_negotiation);

    let refused: ErrorResponse = raw.expect(&register("early", 1)).await;
    assert_eq!(refused.head.error_code, 301);
    assert_eq!(
        refused.head.message.as_deref(),
        Some("Connection is unregistered.")
    );
    assert!(ports(&server, "early").is_empty(), "nothing applied");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_payloads_get_nacos_error_codes_and_change_nothing() {
    let server = TestServer::with(Config {
        grpc_max_body_bytes: 4096,
        ..Config::for_test()
    })
    .await;
    let raw = Raw::connect(server.grpc_addr).await;
    let _stream = raw.set_up().await;
    let error = |p: Payload| -> (i32, String) {
        assert_eq!(p.type_name(), "ErrorResponse");
        let e: ErrorResponse = serde_json::from_slice(p.json()).unwrap();
        assert_eq!(e.head.result_code, 500);
        (e.head.error_code, e.head.message.unwrap_or_default())
    };
    // Not JSON.
    let (code, _) = error(
        raw.call(Payload::new("InstanceRequest", &b"{\"serviceName\":"[..]))
            .await,
    );
    assert_eq!(code, 502);
    // Unknown type.
    let (code, text) = error(
        raw.call(Payload::new("ConfigQueryRequest", &b"{}"[..]))
            .await,
    );
    assert_eq!((code, text.as_str()), (302, "RequestHandler Not Found"));
    // No type at all.
    let (code, _) = error(raw.call(Payload::default()).await);
    assert_eq!(code, 302);
    // Invalid values: 400 with the 1.x text, echoing the request id.
    let mut bad = register("bad", 1);
    bad.head.request_id = Some("r-9".into());
    bad.instance.as_mut().unwrap().weight = Some(-1.0);
    let p = raw.call(Payload::of(&bad)).await;
    let e: ErrorResponse = serde_json::from_slice(p.json()).unwrap();
    assert_eq!(e.head.error_code, 400);
    assert_eq!(e.head.request_id.as_deref(), Some("r-9"));
    // Over the body limit: 503, and a message twice over it is refused by the transport.
    let mut big = register("big", 1);
    big.instance.as_mut().unwrap().metadata =
        Some([("k".to_owned(), "v".repeat(5000))].into_iter().collect());
    let (code, text) = error(raw.call(Payload::of(&big)).await);
    assert_eq!(code, 503, "{text}");
    let huge = Payload::new("InstanceRequest", vec![b' '; 9000]);
    assert!(raw.try_call(huge).await.is_err());
    // A batch with one bad instance applies none of it.
    let batch = BatchInstanceRequest {
        naming: naming("batch"),
        r#type: Some("batchRegisterInstance".into()),
        instances: Some(vec![instance(1), instance(2), instance(70_000)]),
        ..BatchInstanceRequest::default()
    };
    let (code, _) = error(raw.call(Payload::of(&batch)).await);
    assert_eq!(code, 400);
    for service in ["bad", "big", "batch"] {
        assert!(ports(&server, service).is_empty(), "{service} half-applied");
    }
    // The connection still works after all that.
    let ok: InstanceResponse = raw.expect(&register("after", 7)).await;
    assert_eq!(ok.head.result_code, 200);
    assert_eq!(ports(&server, "after"), vec![7]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemeral_instances_belong_to_their_connection() {
    let server = TestServer::spawn().await;
    let owner = Raw::connect(server.grpc_addr).await;
    let stream = owner.set_up().await;
    let _: InstanceResponse = owner.expect(&register("owned", 1)).await;
    let batch = BatchInstanceRequest {
        naming: naming("owned"),
        r#type: Some("batchRegisterInstance".into()),
        instances: Some(vec![instance(2), instance(3)]),
        ..BatchInstanceRequest::default()
    };
    // A batch replaces the connection's instances of the service.
    let _: BatchInstanceResponse = owner.expect(&batch).await;
    assert_eq!(ports(&server, "owned"), vec![2, 3]);
    // The sweeper never expires them: no beats in 2.x.
    let now = server.app.clock.now();
    server
        .app
        .store
        .expire(registry_core::Millis(now.0 + 3_600_000));
    assert_eq!(ports(&server, "owned"), vec![2, 3]);

    // Another connection sees them.
    let other = Raw::connect(server.grpc_addr).await;
    let _other_stream = other.set_up().await;
    let query = ServiceQueryRequest {
        naming: naming("owned"),
        ..ServiceQueryRequest::default()
    };
    let q: QueryServiceResponse = other.expect(&query).await;
    let info = q.service_info.expect("service info");
    assert_eq!(info.name, "owned");
    assert_eq!(info.group_name, "DEFAULT_GROUP");
    let mut got: Vec<i64> = info.hosts.iter().map(|h| h.port).collect();
    got.sort_unstable();
    assert_eq!(got, vec![2, 3]);
    let list: ServiceListResponse = other
        .expect(&ServiceListRequest {
            naming: naming(""),
            page_no: Some(1),
            page_size: Some(10),
            ..ServiceListRequest::default()
        })
        .await;
    assert!(list.service_names.contains(&"owned".to_owned()));

    // Closing the owner's connection removes its instances.
    drop(stream);
    drop(owner);
    eventually("instances removed on close", || {
        ports(&server, "owned").is_empty()
    })
    .await;
    server.stop().await;
}

/// Query answers are encoded once per (service, revision, view) and each answer
/// still echoes its own request id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_answers_are_cached_per_revision_and_view() {
    let server = TestServer::spawn().await;
    let client = Raw::connect(server.grpc_addr).await;
    let _stream = client.set_up().await;
    let _: InstanceResponse = client.expect(&register("cached", 1)).await;
    let query = |id: &str, healthy_only: bool| ServiceQueryRequest {
        head: RequestHead {
            request_id: Some(id.into()),
            ..RequestHead::default()
        },
        naming: naming("cached"),
        healthy_only: Some(healthy_only),
        ..ServiceQueryRequest::default()
    };
    let mut answers = Vec::new();
    for id in ["q1", "q2", "q3"] {
        let q: QueryServiceResponse = client.expect(&query(id, false)).await;
        assert_eq!(q.head.request_id.as_deref(), Some(id));
        answers.push(q.service_info.expect("service info"));
    }
    // The first read of a view is not kept (the cache's doorkeeper), the
    // second is, the third is answered from it: the same encoding.
    assert_eq!(answers[1], answers[2]);
    assert_eq!(answers[2].hosts.len(), 1);
    // Another view is another encoding.
    let healthy: QueryServiceResponse = client.expect(&query("q4", true)).await;
    let healthy = healthy.service_info.expect("service info");
    assert!(healthy.last_ref_time > answers[2].last_ref_time);
    // A new revision is never answered from the old one's encoding.
    let _: InstanceResponse = client.expect(&register("cached", 2)).await;
    let q: QueryServiceResponse = client.expect(&query("q5", false)).await;
    let info = q.service_info.expect("service info");
    let mut got: Vec<i64> = info.hosts.iter().map(|h| h.port).collect();
    got.sort_unstable();
    assert_eq!(got, vec![1, 2]);
    assert!(info.last_ref_time > healthy.last_ref_time);
    server.stop().await;
}

// Paused time (current-thread runtime): the runtime's clock jumps only when every task
// waits, so the 10 s ack timeout passes at once and the resend's timing is exact.
// The sockets are real (loopback data is ready before the clock may move).
#[tokio::test(start_paused = true)]
async fn subscribers_are_pushed_and_an_unacked_push_is_sent_once_more() {
    // The default ack timeout (10 s), on virtual time.
    let server = TestServer::spawn().await;
    let timeout = Duration::from_millis(server.app.config.push_ack_timeout_ms);
    let watcher = Raw::connect(server.grpc_addr).await;
    let mut stream = watcher.set_up().await;
    let sub: SubscribeServiceResponse = watcher
        .expect(&SubscribeServiceRequest {
            naming: naming("pushed"),
            subscribe: Some(true),
            clusters: Some(String::new()),
            ..SubscribeServiceRequest::default()
        })
        .await;
    assert!(sub.service_info.expect("info").hosts.is_empty());

    let writer = Raw::connect(server.grpc_addr).await;
    // The writer answers its detections: its instance stays.
    let _w = writer.set_up().await.keep_alive();
    let _: InstanceResponse = writer.expect(&register("pushed", 8080)).await;

    let push = stream
        .next_push(Duration::from_secs(5))
        .await
        .expect("a push");
    let pushed_at = tokio::time::Instant::now();
    assert_eq!(push.type_name(), "NotifySubscriberRequest");
    let req: NotifySubscriberRequest = serde_json::from_slice(push.json()).unwrap();
    let info = req.service_info.expect("service info");
    assert_eq!(info.hosts.len(), 1);
    assert_eq!(info.hosts[0].port, 8080);
    assert_eq!(req.service_name.as_deref(), Some("pushed"));
    // Not acked: the same push comes once more, the ack timeout after the first...
    let again = stream
        .next_push(Duration::from_secs(60))
        .await
        .expect("the resend");
    let waited = pushed_at.elapsed();
    assert!(
        waited >= timeout && waited < timeout + Duration::from_secs(1),
        "resent after {waited:?}, the ack timeout is {timeout:?}"
    );
    let again_req: NotifySubscriberRequest = serde_json::from_slice(again.json()).unwrap();
    assert_eq!(again_req.head.request_id, req.head.request_id);
    // ...and then no more, even long after: the failure is counted after one more
    // timeout.
    if let Some(p) = stream.next_push(timeout * 6).await {
        panic!("sent more than once more: {p:?}");
    }
    assert_eq!(server.app.metrics.push.failed.get(), 1);
    assert_eq!(server.app.metrics.push.retried.get(), 1);

    // An acked push is not resent.
    let _: InstanceResponse = writer.expect(&register("pushed", 8081)).await;
    let push = stream
        .next_push(Duration::from_secs(5))
        .await
        .expect("second push");
    stream.answer("NotifySubscriberResponse", &push).await;
    eventually("ack counted", || server.app.metrics.push.acked.get() == 1).await;
    if let Some(p) = stream.next_push(timeout * 6).await {
        panic!("sent more than once more: {p:?}");
    }
    assert_eq!(server.app.metrics.push.failed.get(), 1);
    assert_eq!(server.app.metrics.push.retried.get(), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_on_connections_and_subscriptions_answer_503() {
    let server = TestServer::with(Config {
        grpc_max_connections: 1,
        grpc_max_subscriptions_per_connection: 2,
        ..Config::for_test()
    })
    .await;
    let first = Raw::connect(server.grpc_addr).await;
    let _s = first.set_up().await;
    for (i, expect_ok) in [(1, true), (2, true), (3, false)] {
        let (ty, json) = first
            .request(&SubscribeServiceRequest {
                naming: naming(&format!("s{i}")),
                subscribe: Some(true),
                ..SubscribeServiceRequest::default()
            })
            .await;
        if expect_ok {
            assert_eq!(ty, "SubscribeServiceResponse", "{json}");
        } else {
            assert_eq!(ty, "ErrorResponse");
            assert_eq!(json["errorCode"], 503, "{json}");
        }
    }
    assert_eq!(server.app.subscribers.len(), 2);
    let second = Raw::connect(server.grpc_addr).await;
    let (ty, json) = second.request(&ServerCheckRequest::default()).await;
    assert_eq!(ty, "ErrorResponse");
    assert_eq!(json["errorCode"], 503);
    // A health check from the unregistered second connection is refused too.
    let (_, json) = second.request(&HealthCheckRequest::default()).await;
    assert_eq!(json["errorCode"], 301);
    server.stop().await;
}

// Paused time, with the default 20 s idle time and 3 s detection timeout.
#[tokio::test(start_paused = true)]
async fn a_connection_that_stops_answering_is_dropped_and_its_instances_removed() {
    let server = TestServer::spawn().await;
    let idle = Duration::from_millis(server.app.config.grpc_idle_ms);
    let detect = Duration::from_millis(server.app.config.grpc_detect_timeout_ms);
    // Answers detections: stays.
    let alive = Raw::connect(server.grpc_addr).await;
    let mut alive_stream = alive.set_up().await;
    let _: InstanceResponse = alive.expect(&register("idle", 1)).await;
    // Never answers: dropped.
    let silent = Raw::connect(server.grpc_addr).await;
    let _silent_stream = silent.set_up().await;
    let _: InstanceResponse = silent.expect(&register("idle", 2)).await;
    let quiet_since = tokio::time::Instant::now();
    assert_eq!(ports(&server, "idle"), vec![1, 2]);

    let answerer = tokio::spawn(async move {
        let mut answered = 0;
        while let Some(p) = alive_stream.next(idle * 3).await {
            if p.type_name() == "ClientDetectionRequest" {
                alive_stream.answer("ClientDetectionResponse", &p).await;
                answered += 1;
                if answered == 3 {
                    break;
                }
            }
        }
        (answered, alive_stream)
    });
    // Not before the idle time and the detection timeout have both passed.
    tokio::time::sleep(idle + detect - Duration::from_millis(100)).await;
    assert_eq!(ports(&server, "idle"), vec![1, 2], "dropped too early");
    assert_eq!(server.app.grpc.metrics.dropped_idle.get(), 0);
    eventually_within(idle, "silent connection dropped", || {
        ports(&server, "idle") == vec![1]
    })
    .await;
    // Within a detection tick (a quarter of the idle time) of its due time.
    let quiet = quiet_since.elapsed();
    assert!(quiet < idle + detect + idle / 2, "dropped after {quiet:?}");
    // The answering connection stays through three more detections.
    let (answered, _keep) = answerer.await.unwrap();
    assert_eq!(answered, 3);
    assert_eq!(ports(&server, "idle"), vec![1]);
    assert_eq!(server.app.grpc.metrics.dropped_idle.get(), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_empties_the_timeout_table_at_once() {
    // With the default 10 s ack timeout, an acked push must leave no entry behind
    // (the table used to keep acked entries until their deadline passed).
    let server = TestServer::spawn().await;
    let watcher = Raw::connect(server.grpc_addr).await;
    let mut stream = watcher.set_up().await;
    let _: SubscribeServiceResponse = watcher
        .expect(&SubscribeServiceRequest {
            naming: naming("acked"),
            subscribe: Some(true),
            ..SubscribeServiceRequest::default()
        })
        .await;
    let writer = Raw::connect(server.grpc_addr).await;
    // The writer answers its detections: its instance stays.
    let _w = writer.set_up().await.keep_alive();
    for port in 1..=20 {
        let _: InstanceResponse = writer.expect(&register("acked", port)).await;
        let push = stream.next(Duration::from_secs(5)).await.expect("a push");
        stream.answer("NotifySubscriberResponse", &push).await;
    }
    let push = &server.app.metrics.push;
    eventually("every push acked", || push.acked.get() == push.sent.get()).await;
    eventually("no pending entry left", || push.pending.get() == 0).await;
    assert_eq!(push.retried.get(), 0);
    server.stop().await;
}

// Acks are read before new change events: under a flood of events, an ack that is
// already queued must settle its push before the notifier looks at the clock, or
// the push is resent needlessly. Paused time makes the race exact: the ack and
// 5000 events (five of the notifier's batches) are queued while the notifier
// waits, then the clock jumps past the ack's deadline, then the notifier runs. Read
// events-first, the expired push is resent before the ack is seen.
#[tokio::test(start_paused = true)]
async fn an_ack_queued_under_a_flood_of_events_is_read_before_them() {
    let server = TestServer::spawn().await;
    let timeout = Duration::from_millis(server.app.config.push_ack_timeout_ms);
    let watcher = Raw::connect(server.grpc_addr).await;
    let check: ServerCheckResponse = watcher.expect(&ServerCheckRequest::default()).await;
    let id = check.connection_id.expect("connection id");
    let port: u16 = id.rsplit('_').next().unwrap().parse().unwrap();
    let mut stream = watcher.set_up().await;
    let _: SubscribeServiceResponse = watcher
        .expect(&SubscribeServiceRequest {
            naming: naming("saturated"),
            subscribe: Some(true),
            ..SubscribeServiceRequest::default()
        })
        .await;
    let writer = Raw::connect(server.grpc_addr).await;
    // The writer answers its detections: its instance stays.
    let _w = writer.set_up().await.keep_alive();
    let _: InstanceResponse = writer.expect(&register("saturated", 1)).await;
    let push = stream
        .next_push(Duration::from_secs(5))
        .await
        .expect("a push");
    let req: NotifySubscriberRequest = serde_json::from_slice(push.json()).unwrap();
    let seq: u64 = req.head.request_id.unwrap().parse().unwrap();
    let number = server
        .app
        .grpc
        .hub
        .by_peer(([127, 0, 0, 1], port).into())
        .expect("the watcher's connection")
        .number;

    // No await from here to the clock jump: the notifier cannot run in between.
    for i in 0..5000 {
        server.app.publish(Some(ChangeEvent {
            service: ServiceKey::new("public", &format!("DEFAULT_GROUP@@flood-{i}")),
            revision: 1,
        }));
    }
    // What the stream task does with a `NotifySubscriberResponse`.
    server.app.grpc.ack(number, seq);
    tokio::time::advance(timeout + Duration::from_secs(1)).await;

    let metrics = &server.app.metrics.push;
    eventually("ack counted", || metrics.acked.get() == 1).await;
    if let Some(p) = stream.next_push(timeout * 3).await {
        panic!("the acked push was resent: {p:?}");
    }
    assert_eq!(metrics.retried.get(), 0);
    assert_eq!(metrics.failed.get(), 0);
    assert_eq!(metrics.pending.get(), 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_over_the_cap_are_closed_at_accept_and_counted() {
    let server = TestServer::with(Config {
        grpc_max_sockets: 2,
        ..Config::for_test()
    })
    .await;
    let metrics = &server.app.grpc.metrics;
    // Neither ever sets up: the cap counts sockets, not set-up connections.
    let first = Raw::connect(server.grpc_addr).await;
    let _second = Raw::connect(server.grpc_addr).await;
    eventually("two sockets open", || metrics.sockets.get() == 2).await;

    let mut third = tokio::net::TcpStream::connect(server.grpc_addr)
        .await
        .expect("the kernel completes the handshake");
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::io::AsyncReadExt::read(&mut third, &mut buf),
    )
    .await
    .expect("closed at once, not left hanging");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "over the cap, the server closes: {read:?}"
    );
    assert_eq!(metrics.sockets_refused.get(), 1);
    assert_eq!(metrics.sockets.get(), 2);
    let mut text = Vec::new();
    metrics.render(&mut registry_proto::prometheus::Exposition::new(&mut text));
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("registry_grpc_sockets_refused_total 1\n"),
        "{text}"
    );

    // A closed socket gives its place back.
    drop(first);
    eventually("a place freed", || metrics.sockets.get() == 1).await;
    let again = Raw::connect(server.grpc_addr).await;
    let check: ServerCheckResponse = again.expect(&ServerCheckRequest::default()).await;
    assert!(check.connection_id.is_some());
    assert_eq!(metrics.sockets_refused.get(), 1);
    server.stop().await;
}

const USER: &str = "alice";
const PASSWORD: &str = "correct horse battery staple";

/// A 2.x request carrying `token` the way Nacos clients send it: in the payload's
/// metadata headers.
fn with_token(mut p: Payload, token: &str) -> Payload {
    p.metadata
        .get_or_insert_with(Default::default)
        .headers
        .insert("accessToken".into(), token.into());
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auth_on_naming_requests_need_a_valid_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let users = dir.path().join("users");
    std::fs::write(
        &users,
        format!(
            "{USER}:{}\n",
            registry_server::auth::hash_password(PASSWORD, registry_server::auth::MIN_ITERATIONS)
                .expect("hash")
        ),
    )
    .expect("write users");
    let server = TestServer::with(Config {
        auth_users: Some(users),
        ..Config::for_test()
    })
    .await;
    let raw = Raw::connect(server.grpc_addr).await;
    // Server check, setup and health checks need no token (Nacos does not secure them).
    let _stream = raw.set_up().await;

    // Refused as Nacos's auth filter refuses: the handler's own response type,
    // failed with NO_RIGHT (403) and the auth plugin's text; nothing applied.
    let refused = |p: &Payload, ty: &str| -> (i32, i32, String, Option<String>) {
        assert_eq!(p.type_name(), ty, "{}", String::from_utf8_lossy(p.json()));
        let v: serde_json::Value = serde_json::from_slice(p.json()).unwrap();
        (
            v["resultCode"].as_i64().unwrap() as i32,
            v["errorCode"].as_i64().unwrap() as i32,
            v["message"].as_str().unwrap_or_default().to_owned(),
            v["requestId"].as_str().map(str::to_owned),
        )
    };
    let mut req = register("guarded", 1);
    req.head.request_id = Some("a-1".into());
    let p = raw.call(Payload::of(&req)).await;
    assert_eq!(
        refused(&p, "InstanceResponse"),
        (
            500,
            403,
            "Code: 401, Message: user not found!.".into(),
            Some("a-1".into())
        )
    );
    let p = raw.call(with_token(Payload::of(&req), "not-a-token")).await;
    assert_eq!(
        refused(&p, "InstanceResponse").2,
        "Code: 401, Message: token invalid!."
    );
    let query = ServiceQueryRequest {
        naming: naming("guarded"),
        ..ServiceQueryRequest::default()
    };
    let p = raw.call(Payload::of(&query)).await;
    assert_eq!(refused(&p, "QueryServiceResponse").1, 403);
    let sub = SubscribeServiceRequest {
        naming: naming("guarded"),
        subscribe: Some(true),
        ..SubscribeServiceRequest::default()
    };
    let p = raw.call(Payload::of(&sub)).await;
    assert_eq!(refused(&p, "SubscribeServiceResponse").1, 403);
    assert!(ports(&server, "guarded").is_empty(), "nothing applied");
    assert_eq!(server.app.subscribers.len(), 0, "nothing subscribed");

    // A token from the login works for every request.
    let login = common::call(
        server.http_addr,
        registry_proto::http1::Method::Post,
        &format!(
            "/nacos/v1/auth/login?username={USER}&password={}",
            PASSWORD.replace(' ', "+")
        ),
        None,
    )
    .await;
    assert_eq!(login.status, 200, "{}", login.body);
    let token = login.json()["accessToken"].as_str().unwrap().to_owned();
    let p = raw.call(with_token(Payload::of(&req), &token)).await;
    assert_eq!(p.type_name(), "InstanceResponse");
    let ok: InstanceResponse = serde_json::from_slice(p.json()).unwrap();
    assert_eq!(ok.head.result_code, 200, "{:?}", ok.head.message);
    assert_eq!(ports(&server, "guarded"), vec![1]);
    let p = raw.call(with_token(Payload::of(&query), &token)).await;
    let q: QueryServiceResponse = serde_json::from_slice(p.json()).unwrap();
    assert_eq!(q.service_info.expect("info").hosts.len(), 1);
    // An altered token is refused again.
    let mut altered = token.clone().into_bytes();
    let last = altered.len() - 1;
    altered[last] = if altered[last] == b'0' { b'1' } else { b'0' };
    let p = raw
        .call(with_token(
            Payload::of(&query),
            std::str::from_utf8(&altered).unwrap(),
        ))
        .await;
    assert_eq!(refused(&p, "QueryServiceResponse").1, 403);
    server.stop().await;
}
