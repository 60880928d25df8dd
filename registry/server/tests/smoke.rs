//! The server starts on port 0, answers, and shuts down in order.

use crate::common;

use common::TestServer;
use registry_proto::http1::Method;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_answers_and_stops() {
    let server = TestServer::spawn().await;
    let r = server
        .call(
            Method::Post,
            "/nacos/v1/ns/instance?serviceName=smoke&ip=10.0.0.1&port=80",
        )
        .await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    let r = server
        .call(Method::Get, "/nacos/v1/ns/instance/list?serviceName=smoke")
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["hosts"][0]["port"], 80);
    server.stop().await;
}
