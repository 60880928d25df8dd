//! `loadgen bench-http` against a loopback server that answers every request:
//! plain, pipelined and paced, each measuring what it sent.

use crate::support::echo;

use std::time::Duration;

use loadgen::bench::{run, BenchConfig};

#[test]
fn measures_a_local_server_plain_and_pipelined_and_paced() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let target = rt.block_on(echo::answering_server());
    for (pipeline, rate) in [(1, None), (8, None), (2, Some(2000.0))] {
        let r = run(&BenchConfig {
            target,
            path: "/".into(),
            connections: 4,
            pipeline,
            duration: Duration::from_millis(300),
            rate,
            workers: 2,
            source_ips: 2,
        })
        .unwrap();
        assert!(r.requests > 100, "{pipeline}: {}", r.requests);
        assert_eq!(r.errors, 0);
        assert_eq!(r.corrected.len(), r.requests);
        if let Some(rate) = rate {
            let want = rate * 0.3;
            assert!(
                (r.requests as f64) > want * 0.8 && (r.requests as f64) < want * 1.2,
                "paced: {} vs {want}",
                r.requests
            );
        }
        assert!(r.render().contains("Requests/sec"));
    }
}
