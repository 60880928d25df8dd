//! Send lag through real sockets: requests paced at ~5k/s by the same waiter the
//! workers use ([`loadgen::schedule::wait_until`]) go over loadgen's connections
//! ([`loadgen::conn`]) to a loopback server that answers every request, and every
//! request's send lag (and scheduling lag) is recorded, per operation and overall.
//! Only that it is recorded is asserted: its size is a benchmark figure.

use crate::support::echo;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use loadgen::conn::{self, Exchange, Lane, LaneConfig, Request};
use loadgen::recorder::{Failure, Op, Recorder};
use loadgen::schedule::{next_wake, wait_until, Clock, Nanos, Pacer, Waiter, SECOND};
use registry_proto::http1::Response;

struct Ex {
    recorder: RefCell<Recorder>,
    answered: RefCell<u64>,
}

impl Exchange for Ex {
    fn driver_due(&self) -> bool {
        false
    }

    fn encode(&self, _: &Request, out: &mut Vec<u8>) {
        out.extend_from_slice(b"PUT /nacos/v1/ns/instance/beat HTTP/1.1\r\nHost: x\r\n\r\n");
    }

    fn sent(&self, req: &Request, ready: Nanos, sent: Nanos) {
        self.recorder
            .borrow_mut()
            .sent(req.op, req.intended, ready, sent);
    }

    fn complete(
        &self,
        req: &Request,
        sent: Nanos,
        done: Nanos,
        result: Result<&Response<'_>, &Failure>,
    ) {
        let outcome = result.map(|_| ());
        *self.answered.borrow_mut() += u64::from(outcome.is_ok());
        self.recorder
            .borrow_mut()
            .completed(req.op, req.intended, sent, done, outcome);
    }

    fn abandon(&self, req: &Request, failure: &Failure, declared: Nanos) {
        self.recorder
            .borrow_mut()
            .failed(req.op, failure, req.intended, None, declared);
    }
}

#[test]
fn send_lag_is_recorded_for_every_request_at_5k_per_second() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let (sent, answered, stats) = local.block_on(&rt, async {
        let server = echo::answering_server().await;
        let clock = Clock::start();
        let ex = Rc::new(Ex {
            recorder: RefCell::new(Recorder::new()),
            answered: RefCell::new(0),
        });
        let servers: Rc<[SocketAddr]> = Rc::from(vec![server]);
        let lanes: Vec<Rc<Lane>> = (0..4)
            .map(|k| Rc::new(Lane::new(None, servers.clone(), k)))
            .collect();
        let config = LaneConfig {
            depth: 16,
            timeout: Duration::from_secs(5),
        };
        let tasks: Vec<_> = lanes
            .iter()
            .map(|l| tokio::task::spawn_local(conn::drive(ex.clone(), l.clone(), config, clock)))
            .collect();
        let start = clock.now() + 50_000_000;
        let mut pacer = Pacer::new(start, 5_000.0, Some(5_000));
        let mut waiter = Waiter::new(clock);
        let mut k = 0usize;
        while !pacer.is_done() {
            let now = clock.now();
            while let Some(intended) = pacer.next_due(now) {
                let req = Request {
                    op: Op::Beat,
                    id: k as u32,
                    generation: 0,
                    intended,
                };
                ex.recorder.borrow_mut().dispatched(Op::Beat, intended, now);
                lanes[k % lanes.len()].push(req);
                k += 1;
            }
            wait_until(&mut waiter, next_wake(now, [pacer.peek()])).await;
        }
        let deadline = clock.now() + 10 * SECOND;
        while *ex.answered.borrow() < k as u64 && clock.now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for l in &lanes {
            l.close();
        }
        for t in tasks {
            let _ = t.await;
        }
        let answered = *ex.answered.borrow();
        let stats = std::mem::take(&mut *ex.recorder.borrow_mut()).finish();
        (k as u64, answered, stats)
    });
    assert_eq!(sent, 5_000);
    assert_eq!(answered, sent, "the server answered every request");
    let beat = stats.op(Op::Beat);
    assert_eq!(
        beat.send_lag.len(),
        sent,
        "every request's send lag is in its operation's record"
    );
    assert_eq!(stats.send_lag.len(), sent, "and in the overall one");
    assert_eq!(
        beat.conn_wait.len(),
        sent,
        "what each request waited for its connection is recorded apart from send lag"
    );
    assert_eq!(
        stats.sched_lag.len(),
        sent,
        "the scheduling lag is recorded apart"
    );
    assert_eq!(beat.corrected.len(), sent);
    assert_eq!(beat.sent_in.iter().sum::<u64>(), sent);
}
