//! The 2.x fleet's verification, through the protocol under test: each checked
//! service is queried over gRPC (`ServiceQueryRequest`, as a client would) and its
//! hosts must be exactly the instances loadgen registered there and did not remove.
//!
//! A server's own counter (`/nacos/v1/ns/operator/metrics` `instanceCount`) is read
//! when the server has one, but only as a hint in the detail line: another server
//! need not count 2.x instances there (r-nacos reports 0 with every registration
//! answered), and a check that trusts it fails a correct server. Up to
//! [`LIST_ALL_UP_TO`] services every one is listed; beyond that a random sample of
//! that many (seeded, the seed is in the detail line) keeps a million-instance run's
//! check to seconds.

use std::collections::{HashSet, VecDeque};

use registry_proto::grpc::message::QueryServiceResponse;

use super::{churn_instance, fleet_instance, naming, unary, Fleet};

/// Services listed one by one before a sample is taken instead.
pub const LIST_ALL_UP_TO: u32 = 1000;

/// What one check found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Lists {
    /// Services listed.
    pub listed: u32,
    /// Services in the fleet.
    pub services: u32,
    /// Hosts loadgen expects in the listed services.
    pub expected: u64,
    /// Hosts the server listed in them.
    pub found: u64,
    /// Listed services whose hosts differ.
    pub bad: u32,
    /// The first few, for the message.
    pub examples: Vec<String>,
    /// The sample's seed (`None`: every service was listed).
    pub seed: Option<u64>,
}

impl Lists {
    /// Whether every listed service matched.
    pub fn ok(&self) -> bool {
        self.bad == 0 && self.listed > 0
    }

    /// One phrase for the detail line.
    pub fn describe(&self) -> String {
        let scope = match self.seed {
            None => format!("all {} services", self.services),
            Some(seed) => format!(
                "a random sample of {} of {} services (seed {seed})",
                self.listed, self.services
            ),
        };
        let verdict = if self.bad == 0 {
            "every list matches".to_owned()
        } else {
            format!("{} differ (e.g. {})", self.bad, self.examples.join(", "))
        };
        format!(
            "listed {scope} over gRPC: {} hosts, expected {}; {verdict}",
            self.found, self.expected
        )
    }
}

/// Which services to list: all of them, or a seeded sample of [`LIST_ALL_UP_TO`].
pub fn chosen(services: u32, seed: u64) -> Vec<u32> {
    if services <= LIST_ALL_UP_TO {
        return (0..services).collect();
    }
    let mut picked = HashSet::new();
    // Never zero (xorshift's fixed point), and every seed its own sequence.
    let mut x = (seed ^ 0x9e37_79b9_7f4a_7c15).max(1);
    while picked.len() < LIST_ALL_UP_TO as usize {
        // xorshift64*: a spread of services, reproducible from the seed.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        picked.insert((x.wrapping_mul(0x2545_f491_4f6c_dd1d) % u64::from(services)) as u32);
    }
    let mut v: Vec<u32> = picked.into_iter().collect();
    v.sort_unstable();
    v
}

/// The hosts service `s` should list: the fleet's instances there (unless drained)
/// and the churn instances still registered there.
fn expected(
    fleet: &Fleet,
    s: u32,
    live: &VecDeque<(u64, usize)>,
    drained: bool,
) -> HashSet<(String, i64)> {
    let p = &fleet.profile;
    let services = p.fleet.services.max(1);
    let watched = u64::from(p.fleet.watched_services.max(1));
    let mut want = HashSet::new();
    if !drained {
        for i in (s..p.fleet.instances).step_by(services as usize) {
            let inst = fleet_instance(p, i);
            want.insert((inst.ip, inst.port));
        }
        for (seq, _) in live.iter().filter(|(seq, _)| seq % watched == u64::from(s)) {
            let inst = churn_instance(p, *seq);
            want.insert((inst.ip, inst.port));
        }
    }
    want
}

/// Lists the chosen services and compares them with what loadgen registered.
pub async fn lists(fleet: &Fleet, live: &VecDeque<(u64, usize)>, drained: bool) -> Lists {
    let services = fleet.profile.fleet.services.max(1);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut out = Lists {
        services,
        seed: (services > LIST_ALL_UP_TO).then_some(seed),
        ..Lists::default()
    };
    for (k, s) in chosen(services, seed).into_iter().enumerate() {
        let want = expected(fleet, s, live, drained);
        let client = &fleet.clients[k % fleet.clients.len()];
        let got = server_hosts(fleet, client, s).await;
        out.listed += 1;
        out.expected += want.len() as u64;
        out.found += got.as_ref().map_or(0, |g| g.len() as u64);
        if got.as_ref() != Some(&want) {
            out.bad += 1;
            if out.examples.len() < 5 {
                let found = got.map_or("no answer".to_owned(), |g| format!("{} hosts", g.len()));
                out.examples.push(format!(
                    "{} has {found}, expected {}",
                    super::service_name(&fleet.profile, s),
                    want.len()
                ));
            }
        }
    }
    out
}

/// The hosts the server lists for service `s` (`None`: no valid answer).
pub(super) async fn server_hosts(
    fleet: &Fleet,
    client: &super::Client,
    s: u32,
) -> Option<HashSet<(String, i64)>> {
    let answer = unary(
        &client.channel,
        super::request::query(&naming(&fleet.profile, s)),
    )
    .await
    .ok()?;
    let info = serde_json::from_slice::<QueryServiceResponse>(answer.json())
        .ok()?
        .service_info?;
    Some(info.hosts.iter().map(|h| (h.ip.clone(), h.port)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_fleets_list_every_service_and_large_ones_a_stable_sample() {
        assert_eq!(chosen(3, 7), vec![0, 1, 2]);
        let a = chosen(50_000, 42);
        assert_eq!(a.len(), LIST_ALL_UP_TO as usize);
        assert!(a.iter().all(|s| *s < 50_000));
        assert_eq!(a, chosen(50_000, 42), "the seed reproduces the sample");
        assert_ne!(a, chosen(50_000, 43));
    }

    #[test]
    fn the_detail_says_what_was_listed() {
        let all = Lists {
            listed: 3,
            services: 3,
            expected: 9,
            found: 9,
            ..Lists::default()
        };
        assert!(all.ok());
        assert!(all.describe().contains("all 3 services"));
        let sample = Lists {
            listed: 1000,
            services: 50_000,
            seed: Some(5),
            bad: 1,
            examples: vec!["svc-9 has 2 hosts, expected 3".into()],
            ..Lists::default()
        };
        assert!(!sample.ok());
        assert!(sample
            .describe()
            .contains("random sample of 1000 of 50000 services (seed 5)"));
        assert!(sample.describe().contains("1 differ"));
        assert!(!Lists::default().ok(), "nothing listed is no verification");
    }
}
