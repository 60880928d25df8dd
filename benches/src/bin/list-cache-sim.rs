//! Replays `nacos-1x-report`'s list traffic against the server's real
//! [`ListCache`] on virtual time and prints, per 10 virtual seconds, the
//! bytes and entries it holds and its hit rate, for a policy given on the
//! command line. Deterministic (a fixed-seed generator, no clock, no
//! threads), so the figures do not depend on the machine's load.
//!
//! The traffic, per the profile: 6.5k queries a second of uniformly random
//! services among 600k; 6.5k writes a second (registers and deregisters)
//! to random services, each a new revision; 10k subscribers, one per
//! watched service, polling every 10 s (`cacheMillis`), and a push encode
//! of the subscribed view on every write to a watched service. The
//! sweeper moves the cache's hand every 500 ms, as the server's does.
//!
//! `cargo run -p benches --bin list-cache-sim -- --budget-mib 256 --idle-ms 0`
//! (the policy before idle eviction) and `-- --budget-mib 128 --idle-ms 30000`.

use benches::flags;
use registry_core::Millis;
use registry_server::list_cache::ListCache;

/// xorshift64*: enough to pick services.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n
    }
}

struct Sim {
    cache: ListCache,
    revisions: Vec<u64>,
    body: usize,
    key: String,
    reads: u64,
    hits: u64,
}

impl Sim {
    fn read(&mut self, service: usize, subscribed: bool) {
        let name = format!("DEFAULT_GROUP@@com.example.svc{service:06}");
        ListCache::key(&mut self.key, "public", &name, "", false, subscribed);
        let revision = self.revisions[service];
        self.reads += 1;
        if self.cache.get(&self.key, revision).is_some() {
            self.hits += 1;
        } else {
            self.cache.put(&self.key, revision, vec![b'x'; self.body]);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let parsed = (|| -> Result<[u64; 5], String> {
        Ok([
            flags::value(&args, "--budget-mib", 128)?,
            flags::value(&args, "--idle-ms", 30_000)?,
            flags::value(&args, "--seconds", 120)?,
            flags::value(&args, "--body-bytes", 700)?,
            flags::value(&args, "--services", 600_000)?,
        ])
    })();
    let [budget_mib, idle_ms, seconds, body, services] = match parsed {
        Ok(v) if v[4] >= 10_000 => v,
        Ok(_) => {
            eprintln!("list-cache-sim: --services must be at least the 10k watched");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("list-cache-sim: {e}\nusage: list-cache-sim [--budget-mib N] [--idle-ms N] [--seconds N] [--body-bytes N] [--services N]");
            std::process::exit(2);
        }
    };
    const WATCHED: usize = 10_000;
    const POLL_MS: u64 = 10_000;
    const STEP_MS: u64 = 100;
    let mut sim = Sim {
        cache: ListCache::new((budget_mib as usize) << 20, idle_ms),
        revisions: vec![1; services as usize],
        body: body as usize,
        key: String::new(),
        reads: 0,
        hits: 0,
    };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut peak = 0;
    for t in (STEP_MS..=seconds * 1000).step_by(STEP_MS as usize) {
        // 6.5k writes and 6.5k queries a second, 100 ms at a time.
        for _ in 0..650 {
            let s = rng.below(services) as usize;
            sim.revisions[s] += 1;
            if s < WATCHED {
                sim.read(s, true);
            }
            let q = rng.below(services) as usize;
            sim.read(q, false);
        }
        // Each watched service polled once per 10 s, spread evenly.
        let per_step = WATCHED as u64 * STEP_MS / POLL_MS;
        let first = (t / STEP_MS % (POLL_MS / STEP_MS)) * per_step;
        for s in first..first + per_step {
            sim.read(s as usize, true);
        }
        if t % 500 == 0 {
            sim.cache.evict(Millis(t), 1 << 16);
        }
        peak = peak.max(sim.cache.bytes());
        if t % 10_000 == 0 {
            println!(
                "{{\"second\":{},\"cache_bytes\":{},\"entries\":{},\"peak_bytes\":{},\"hit_rate\":{:.3}}}",
                t / 1000,
                sim.cache.bytes(),
                sim.cache.len(),
                peak,
                sim.hits as f64 / sim.reads.max(1) as f64
            );
            sim.reads = 0;
            sim.hits = 0;
        }
    }
}
