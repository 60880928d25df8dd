//! The Nacos 2.x gRPC server over real sockets: connection life cycle, ownership of
//! ephemeral instances, pushes and their acks, bad input and limits.

mod common;
mod grpc_client;

use std::time::Duration;

use common::TestServer;
use grpc_client::Raw;
use registry_core::ServiceRef;
use registry_proto::grpc::message::{
    BatchInstanceRequest, BatchInstanceResponse, ErrorResponse, HealthCheckRequest,
    InstanceRequest, InstanceResponse, NamingHead, NotifySubscriberRequest, QueryServiceResponse,
    ServerCheckRequest, ServerCheckResponse, ServiceListRequest, ServiceListResponse,
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

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_are_pushed_and_an_unacked_push_is_sent_once_more() {
    let server = TestServer::with(Config {
        push_ack_timeout_ms: 300,
        ..Config::for_test()
    })
    .await;
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
    let _w = writer.set_up().await;
    let _: InstanceResponse = writer.expect(&register("pushed", 8080)).await;

    let push = stream.next(Duration::from_secs(5)).await.expect("a push");
    assert_eq!(push.type_name(), "NotifySubscriberRequest");
    let req: NotifySubscriberRequest = serde_json::from_slice(push.json()).unwrap();
    let info = req.service_info.expect("service info");
    assert_eq!(info.hosts.len(), 1);
    assert_eq!(info.hosts[0].port, 8080);
    assert_eq!(req.service_name.as_deref(), Some("pushed"));
    // Not acked: the same push comes once more after the ack timeout...
    let again = stream
        .next(Duration::from_secs(5))
        .await
        .expect("the resend");
    let again_req: NotifySubscriberRequest = serde_json::from_slice(again.json()).unwrap();
    assert_eq!(again_req.head.request_id, req.head.request_id);
    // ...and then no more: the failure is counted.
    assert!(stream.next(Duration::from_millis(900)).await.is_none());
    eventually("failure counted", || {
        server.app.metrics.push.failed.get() == 1
    })
    .await;

    // An acked push is not resent.
    let _: InstanceResponse = writer.expect(&register("pushed", 8081)).await;
    let push = stream
        .next(Duration::from_secs(5))
        .await
        .expect("second push");
    stream.answer("NotifySubscriberResponse", &push).await;
    eventually("ack counted", || server.app.metrics.push.acked.get() == 1).await;
    assert!(stream.next(Duration::from_millis(900)).await.is_none());
    assert_eq!(server.app.metrics.push.failed.get(), 1);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_stops_answering_is_dropped_and_its_instances_removed() {
    let server = TestServer::with(Config {
        grpc_idle_ms: 200,
        grpc_detect_timeout_ms: 200,
        ..Config::for_test()
    })
    .await;
    // Answers detections: stays.
    let alive = Raw::connect(server.grpc_addr).await;
    let mut alive_stream = alive.set_up().await;
    let _: InstanceResponse = alive.expect(&register("idle", 1)).await;
    // Never answers: dropped.
    let silent = Raw::connect(server.grpc_addr).await;
    let _silent_stream = silent.set_up().await;
    let _: InstanceResponse = silent.expect(&register("idle", 2)).await;
    assert_eq!(ports(&server, "idle"), vec![1, 2]);

    let answerer = tokio::spawn(async move {
        let mut answered = 0;
        while let Some(p) = alive_stream.next(Duration::from_secs(10)).await {
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
    eventually("silent connection dropped", || {
        ports(&server, "idle") == vec![1]
    })
    .await;
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
    let _w = writer.set_up().await;
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
