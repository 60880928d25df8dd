//! Loadgen's memory per simulated client, measured with a counting allocator: at most
//! 256 bytes per instance (its state and wheel link) and 1 KiB per subscriber (its
//! state, its socket's registration with the runtime and its receive task; kernel
//! socket buffers are not heap and not counted).

use std::alloc::{GlobalAlloc, Layout, System};
use std::rc::Rc;
use std::sync::atomic::{AtomicIsize, Ordering};

use loadgen::fleet::Instances;
use loadgen::subscriber::{self, Inbox};
use loadgen::wheel::Wheel;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: delegates every call to the system allocator unchanged and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

#[test]
fn an_instance_costs_at_most_256_bytes() {
    let n = 200_000u32;
    let before = live();
    let instances = Instances::new(n, 0, 1, 5000);
    let mut wheel = Wheel::new(8192, 0);
    wheel.reserve_ids(n as usize);
    for l in 0..n {
        wheel.insert(l, 1 + l % 5000);
    }
    let per = (live() - before) as f64 / f64::from(n);
    println!("{per:.1} bytes per instance");
    assert!(per <= 256.0, "{per} bytes per instance");
    drop((instances, wheel));
}

struct Sink;

impl Inbox for Sink {
    fn receive(&self, _: u32, _: u32, s: &tokio::net::UdpSocket) -> std::io::Result<bool> {
        let mut buf = [0u8; 16];
        s.try_recv_from(&mut buf).map(|_| true)
    }

    fn driver_due(&self) -> bool {
        false
    }
}

#[test]
fn a_subscriber_costs_at_most_1_kib() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let n = 2000u32;
    let _ = loadgen::host::raise_nofile();
    let per = local.block_on(&rt, async {
        let inbox = Rc::new(Sink);
        // Warm the runtime's slabs with one subscriber first.
        let s = subscriber::bind("127.0.0.1".parse().unwrap()).unwrap();
        let warm = tokio::task::spawn_local(subscriber::receive(inbox.clone(), s, 0, 0));
        tokio::task::yield_now().await;
        let before = live();
        let mut state = Vec::with_capacity(n as usize);
        let mut tasks = Vec::with_capacity(n as usize);
        for i in 0..n {
            let s = subscriber::bind("127.0.0.1".parse().unwrap()).unwrap();
            state.push(loadgen::fleet::Subscriber::default());
            tasks.push(Some(
                tokio::task::spawn_local(subscriber::receive(inbox.clone(), s, i, 0))
                    .abort_handle(),
            ));
        }
        // Let every task poll once (registering its socket's readiness).
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        let per = (live() - before) as f64 / f64::from(n);
        for t in tasks.into_iter().flatten() {
            t.abort();
        }
        warm.abort();
        per
    });
    println!("{per:.1} bytes per subscriber");
    assert!(per <= 1024.0, "{per} bytes per subscriber");
}
