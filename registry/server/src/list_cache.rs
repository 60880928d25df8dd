//! Encoded instance lists, computed at most once per service revision and
//! view while cached, shared by every reader and every push of it.
//!
//! # Keys and revisions
//! The cache is keyed by (service, revision, view): the map key names the
//! service and the view (clusters exactly as sent, healthy-only, and
//! whether the reader is a push subscriber, which changes `cacheMillis`),
//! and the value carries the revision it encodes. A lookup hits only the
//! revision asked for. An insert replaces a cached entry only with a
//! *newer* revision: a reader that loaded an older snapshot and encoded it
//! late never pushes the newer encoding out (it still answers with its
//! own). 600k cold services cost nothing until they are read.
//!
//! # Admission: what is hot, not what was ever read
//! A list read once is not cached: an encoding is kept on its key's second
//! miss within a round (a doorkeeper: one bit per hash of the key in a
//! fixed 512 KiB bitmap, cleared once per idle period by eviction and after
//! about [`ROUND_MISSES`] first misses, whichever comes first), or at once
//! when the key already has an entry (a newer revision of a list that was
//! hot). Under `nacos-1x-report` most of the 6.5k queries a second land on
//! one of 600k services once; caching those filled the whole budget with
//! lists nobody read again. Polled and pushed lists are read again within
//! seconds and are cached from their second read on.
//!
//! # Memory and eviction
//! Eviction runs on the sweeper's thread ([`ListCache::evict`]) with a
//! CLOCK policy (second chance): entries sit on a ring in insertion order;
//! a hit marks its entry (one relaxed load, and a store only the first
//! time); the hand pops the ring's head, gives a marked entry another round
//! (clearing its mark), and drops an unmarked one. The hand moves for two
//! reasons:
//! - **Idle lists go.** Even under budget the hand goes once round the
//!   whole ring per idle period (`idle_ms`, 30 s by default), paced by the
//!   time the sweeper passes in. So an entry not read for a whole period
//!   is dropped: a list polled every 3 s or pushed every 10 s (Nacos 1.x
//!   clients' `cacheMillis`) stays, while a one-off read, or an entry for
//!   a revision nobody asks for any more (a stale one can never hit again),
//!   leaves within one to two periods instead of sitting there until the
//!   budget is reached. Under `nacos-1x-report` this keeps the cache at
//!   what the last period read instead of growing to the budget.
//! - **The budget.** The cache holds about `budget` bytes (bodies, keys and
//!   a fixed overhead per entry). Requests never evict: an insert only
//!   adds, and above 1.25 × budget it stops caching (the reader still gets
//!   its encoding), so memory is bounded even when eviction falls behind.
//!   Over budget the hand goes on until the cache is under three quarters
//!   of it or the call's bounded number of steps is spent.
//!
//! So lists read since the hand last passed stay, one-off reads go first,
//! and no request waits for it.

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use foldhash::fast::FixedState;
use papaya::{Compute, Operation};
use parking_lot::Mutex;
use registry_core::Millis;

/// One encoded list.
pub struct CachedList {
    /// The service revision it encodes.
    pub revision: u64,
    /// The JSON body.
    pub body: Box<[u8]>,
    /// Read since eviction last looked at it.
    referenced: AtomicBool,
}

impl CachedList {
    pub(crate) fn new(revision: u64, body: Vec<u8>) -> CachedList {
        CachedList {
            revision,
            body: body.into_boxed_slice(),
            referenced: AtomicBool::new(false),
        }
    }

    fn mark(&self) {
        // Loaded first, so a hot entry's cache line stays shared between
        // cores instead of being written on every hit.
        if !self.referenced.load(Ordering::Relaxed) {
            self.referenced.store(true, Ordering::Relaxed);
        }
    }
}

/// The cache.
pub struct ListCache {
    map: papaya::HashMap<Arc<str>, Arc<CachedList>, FixedState>,
    /// Keys in insertion order, for the CLOCK hand. Locked by inserts of
    /// new keys (cache misses) and by eviction in short batches.
    ring: Mutex<VecDeque<Arc<str>>>,
    /// Where the idle hand stands (see [`ListCache::evict`]).
    hand: Mutex<Hand>,
    bytes: AtomicUsize,
    budget: usize,
    /// The idle period: the hand goes round the ring once per period.
    idle_ms: u64,
    /// The doorkeeper: keys missed once this round, one bit per hash.
    seen: Box<[AtomicU64]>,
    /// First misses this round.
    round: AtomicUsize,
    hasher: FixedState,
}

/// Bits of the doorkeeper (2^22: 512 KiB).
const SEEN_BITS: usize = 1 << 22;
/// First misses after which the doorkeeper forgets (an eighth of its bits,
/// so a one-off key is mistaken for a seen one about 12 % of the time at
/// worst).
const ROUND_MISSES: usize = SEEN_BITS / 8;

/// The idle hand's turn: when it began, how many entries the ring held
/// then, and how many of them the hand has passed. Entries added during a
/// turn are behind them on the ring and wait for the next turn.
#[derive(Default)]
struct Hand {
    start: Option<Millis>,
    len: usize,
    done: usize,
}

impl Hand {
    /// A turn starting at `now` over the `len` entries now on the ring.
    fn starting(now: Millis, len: usize) -> Hand {
        Hand {
            start: Some(now),
            len,
            done: 0,
        }
    }
}

/// The default idle period: twice the Nacos 1.x push subscribers' 10 s
/// poll (`cacheMillis`), so a watched list is read at least once between
/// two turns of the hand; almost seven times the plain pollers' 3 s. At
/// 30 s the cache held ~50 MB under `nacos-1x-report` (one-off reads of
/// 600k services kept a period longer); at 20 s the registry's peak RSS
/// in that profile fell from 395.1 to 370.1 MiB
/// (`issue-14-memory-2.md`).
pub const DEFAULT_IDLE_MS: u64 = 20_000;

/// Overhead charged per entry beyond its body and key.
const ENTRY_OVERHEAD: usize = 128;
/// Ring entries eviction handles per hold of the ring's lock.
const EVICT_BATCH: usize = 256;

fn weight(key: &str, entry: &CachedList) -> usize {
    entry.body.len() + key.len() + ENTRY_OVERHEAD
}

impl ListCache {
    /// A cache holding about `budget` bytes (0 disables caching) and
    /// dropping what was not read for `idle_ms` (0: only the budget
    /// evicts).
    pub fn new(budget: usize, idle_ms: u64) -> ListCache {
        ListCache {
            map: papaya::HashMap::builder()
                .hasher(FixedState::with_seed(0x11))
                .build(),
            ring: Mutex::new(VecDeque::new()),
            hand: Mutex::new(Hand::default()),
            bytes: AtomicUsize::new(0),
            budget,
            idle_ms,
            seen: (0..SEEN_BITS / 64).map(|_| AtomicU64::new(0)).collect(),
            round: AtomicUsize::new(0),
            hasher: FixedState::with_seed(0x5ee),
        }
    }

    /// Writes the cache key of a view into `key`.
    pub fn key(
        key: &mut String,
        namespace: &str,
        grouped: &str,
        clusters: &str,
        healthy_only: bool,
        subscribed: bool,
    ) {
        key.clear();
        key.push_str(namespace);
        key.push('\u{1}');
        key.push_str(grouped);
        key.push('\u{1}');
        key.push_str(clusters);
        key.push('\u{1}');
        key.push(if healthy_only { 'h' } else { 'a' });
        key.push(if subscribed { 's' } else { 'p' });
    }

    /// The cached list for `key` if it encodes `revision`.
    pub fn get(&self, key: &str, revision: u64) -> Option<Arc<CachedList>> {
        let map = self.map.pin();
        let hit = map.get(key).filter(|c| c.revision == revision)?;
        hit.mark();
        Some(hit.clone())
    }

    /// Caches `body` as the encoding of `revision`, unless this is the
    /// key's first miss this round (see the module header), the same or a
    /// newer revision is already there, or the cache is full. Returns the
    /// entry for the caller to answer with (its own revision either way).
    pub fn put(&self, key: &str, revision: u64, body: Vec<u8>) -> Arc<CachedList> {
        let entry = Arc::new(CachedList::new(revision, body));
        if self.budget == 0 {
            return entry;
        }
        let size = weight(key, &entry);
        if self.bytes.load(Ordering::Relaxed) + size > self.ceiling() {
            // Full until the sweeper's eviction catches up: no work here.
            return entry;
        }
        let map = self.map.pin();
        if !map.contains_key(key) && !self.seen_before(key) {
            return entry;
        }
        let key: Arc<str> = Arc::from(key);
        let outcome = map.compute(key.clone(), |old| match old {
            Some((_, cached)) if cached.revision >= revision => Operation::Abort(()),
            _ => Operation::Insert(entry.clone()),
        });
        match outcome {
            Compute::Inserted(..) => {
                self.bytes.fetch_add(size, Ordering::Relaxed);
                self.ring.lock().push_back(key);
            }
            Compute::Updated { old: (_, old), .. } => {
                // A newer revision is encoded because someone read it: it
                // starts marked, so a list that changes more often than it
                // is polled is not dropped for being new each time.
                entry.mark();
                self.bytes.fetch_add(size, Ordering::Relaxed);
                self.bytes.fetch_sub(weight(&key, old), Ordering::Relaxed);
            }
            Compute::Removed(..) | Compute::Aborted(()) => {}
        }
        entry
    }

    /// Marks `key` seen; true if it was already (or its hash collides with
    /// a key that was). Relaxed: a lost race only caches one read later.
    fn seen_before(&self, key: &str) -> bool {
        let bit = self.hasher.hash_one(key) as usize & (SEEN_BITS - 1);
        let mask = 1u64 << (bit % 64);
        if self.seen[bit / 64].fetch_or(mask, Ordering::Relaxed) & mask != 0 {
            return true;
        }
        if self.round.fetch_add(1, Ordering::Relaxed) + 1 >= ROUND_MISSES {
            // A new round: ~65k stores, once per half a million misses.
            self.forget();
        }
        false
    }

    /// Starts a new doorkeeper round.
    fn forget(&self) {
        self.round.store(0, Ordering::Relaxed);
        for word in self.seen.iter() {
            word.store(0, Ordering::Relaxed);
        }
    }

    /// The most the cache holds before inserts stop.
    fn ceiling(&self) -> usize {
        self.budget.saturating_add(self.budget / 4)
    }

    /// Whether [`ListCache::evict`] has work to do.
    pub fn over_budget(&self) -> bool {
        self.budget > 0 && self.bytes.load(Ordering::Relaxed) > self.budget
    }

    /// Moves the CLOCK hand at time `now`: first the idle steps due since
    /// the last call (one turn of the ring per idle period), then, while
    /// the cache is over its budget, on until it is under three quarters
    /// of it; no more than `max_steps` entries in all. Returns the entries
    /// removed. Called off the request path (the sweeper).
    pub fn evict(&self, now: Millis, max_steps: usize) -> usize {
        let (mut removed, mut steps) = (0, 0);
        if self.idle_ms > 0 {
            let mut hand = self.hand.lock();
            let start = match hand.start {
                Some(start) => start,
                None => {
                    *hand = Hand::starting(now, self.ring.lock().len());
                    now
                }
            };
            let elapsed = now.0.saturating_sub(start.0);
            let due = if elapsed >= self.idle_ms {
                hand.len
            } else {
                // u128: a ring of millions times a period of minutes.
                (hand.len as u128 * u128::from(elapsed) / u128::from(self.idle_ms)) as usize
            };
            steps = due.saturating_sub(hand.done).min(max_steps);
            removed += self.turn(steps, |_| false);
            hand.done += steps;
            if hand.done >= hand.len && elapsed >= self.idle_ms {
                // A new turn, and a new doorkeeper round with it, so that
                // admission, too, asks for two reads within about a period.
                *hand = Hand::starting(now, self.ring.lock().len());
                self.forget();
            }
        }
        if self.over_budget() {
            let target = self.budget / 4 * 3;
            removed += self.turn(max_steps - steps, |bytes| bytes <= target);
        }
        if removed > 0 {
            let mut ring = self.ring.lock();
            // A ring that once held a full cache gives its memory back.
            if ring.capacity() > 1024 && ring.len() < ring.capacity() / 4 {
                let keep = ring.len() * 2;
                ring.shrink_to(keep);
            }
        }
        removed
    }

    /// Makes up to `steps` moves of the hand, stopping early once `enough`
    /// holds for the bytes held. Returns the entries removed.
    fn turn(&self, steps: usize, enough: impl Fn(usize) -> bool) -> usize {
        let map = self.map.pin();
        let (mut done, mut removed) = (0, 0);
        while done < steps && !enough(self.bytes.load(Ordering::Relaxed)) {
            let mut ring = self.ring.lock();
            if ring.is_empty() {
                break;
            }
            for _ in 0..EVICT_BATCH.min(steps - done) {
                let Some(key) = ring.pop_front() else { break };
                done += 1;
                let Some(entry) = map.get(&*key) else {
                    continue;
                };
                if entry.referenced.swap(false, Ordering::Relaxed) {
                    ring.push_back(key);
                    continue;
                }
                if let Some(old) = map.remove(&*key) {
                    self.bytes.fetch_sub(weight(&key, old), Ordering::Relaxed);
                    removed += 1;
                }
                if enough(self.bytes.load(Ordering::Relaxed)) {
                    break;
                }
            }
        }
        removed
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> String {
        let mut k = String::new();
        ListCache::key(&mut k, "public", name, "", false, false);
        k
    }

    /// A cache where `keys` were each missed once, so their next put caches.
    fn warmed<'a>(budget: usize, keys: impl IntoIterator<Item = &'a str>) -> ListCache {
        let c = ListCache::new(budget, 0);
        for k in keys {
            c.seen_before(k);
        }
        c
    }

    #[test]
    fn a_list_read_once_is_not_kept_and_one_read_again_is() {
        let c = ListCache::new(1 << 20, 0);
        let (once, twice) = (key("G@@once"), key("G@@twice"));
        c.put(&once, 1, b"a".to_vec());
        c.put(&twice, 1, b"b".to_vec());
        assert!(c.get(&once, 1).is_none() && c.get(&twice, 1).is_none());
        assert_eq!(c.bytes(), 0);
        c.put(&twice, 1, b"b".to_vec());
        assert_eq!(&*c.get(&twice, 1).expect("second miss kept").body, b"b");
        // A newer revision of a kept list is kept at once.
        c.put(&twice, 2, b"c".to_vec());
        assert_eq!(&*c.get(&twice, 2).expect("hot key").body, b"c");
        assert!(c.get(&once, 1).is_none());
    }

    #[test]
    fn the_doorkeeper_forgets_after_a_round() {
        let c = ListCache::new(1 << 20, 0);
        let k = key("G@@a");
        assert!(!c.seen_before(&k));
        let mut i = 0;
        while c.round.load(Ordering::Relaxed) != 0 {
            c.seen_before(&format!("other{i}"));
            i += 1;
        }
        assert!(i >= ROUND_MISSES - 1, "{i}");
        assert!(!c.seen_before(&k), "a new round starts empty");
        assert!(c.seen_before(&k));
    }

    #[test]
    fn hits_only_the_same_revision() {
        let k = key("G@@a");
        let c = warmed(1 << 20, [k.as_str()]);
        c.put(&k, 3, b"three".to_vec());
        assert_eq!(&*c.get(&k, 3).unwrap().body, b"three");
        assert!(c.get(&k, 4).is_none());
        c.put(&k, 4, b"four".to_vec());
        assert!(c.get(&k, 3).is_none());
        assert_eq!(c.len(), 1);
    }

    /// A reader that encoded an older revision late does not replace the
    /// newer one; it still gets its own encoding back.
    #[test]
    fn an_older_revision_never_replaces_a_newer_one() {
        let k = key("G@@a");
        let c = warmed(1 << 20, [k.as_str()]);
        c.put(&k, 5, b"five".to_vec());
        let late = c.put(&k, 4, b"four".to_vec());
        assert_eq!((late.revision, &*late.body), (4, &b"four"[..]));
        assert_eq!(&*c.get(&k, 5).expect("newer kept").body, b"five");
        assert!(c.get(&k, 4).is_none());
        let again = c.put(&k, 5, b"other".to_vec());
        assert_eq!(&*again.body, b"other");
        assert_eq!(&*c.get(&k, 5).unwrap().body, b"five", "first encoding kept");
        assert_eq!(c.bytes(), weight(&k, &CachedList::new(5, b"five".to_vec())));
    }

    /// Inserts never evict; they stop at 1.25 × budget. Eviction (the
    /// sweeper's) brings it under three quarters in bounded steps, and
    /// spares entries read since its last round.
    #[test]
    fn eviction_is_the_sweepers_bounded_clock() {
        let budget = 64 * 1024;
        let keys: Vec<String> = (0..200).map(|i| key(&format!("G@@s{i}"))).collect();
        let c = warmed(budget, keys.iter().map(String::as_str));
        for i in 0..200 {
            c.put(&key(&format!("G@@s{i}")), 1, vec![b'x'; 1000]);
            assert!(c.bytes() <= budget + budget / 4, "{} bytes", c.bytes());
        }
        let full = c.len();
        assert!(full > budget / 1200, "filled past the budget: {full}");
        assert!(c.over_budget());
        // The first entry was read: it gets a second chance.
        assert!(c.get(&key("G@@s0"), 1).is_some());
        assert_eq!(c.evict(Millis(0), 10), 10 - 1, "ten steps, one spared");
        assert_eq!(c.len(), full - 9);
        c.evict(Millis(0), usize::MAX);
        assert!(c.bytes() <= budget / 4 * 3, "{} bytes", c.bytes());
        assert!(c.get(&key("G@@s0"), 1).is_some(), "the read entry stayed");
        assert!(c.get(&key("G@@s1"), 1).is_none(), "an unread old one went");
        assert_eq!(
            c.evict(Millis(0), usize::MAX),
            0,
            "nothing to do under budget"
        );
    }

    /// Under budget, the hand still goes round once per idle period: a
    /// list read within each period stays, a one-off read and a stale
    /// revision nobody asks for go, all on injected time.
    #[test]
    fn lists_not_read_for_an_idle_period_go_even_under_budget() {
        let (polled, once, stale) = (key("G@@polled"), key("G@@once"), key("G@@stale"));
        let c = ListCache::new(1 << 30, 30_000);
        for k in [&polled, &once, &stale] {
            c.seen_before(k);
        }
        c.put(&polled, 1, b"p".to_vec());
        c.put(&once, 1, b"o".to_vec());
        c.put(&stale, 1, b"s".to_vec());
        assert_eq!(c.evict(Millis(0), usize::MAX), 0, "the hand starts");
        // A poller reads its list every 10 s; the stale list's service has
        // moved on to revision 2, so its readers miss (no mark).
        for t in (10_000..=90_000).step_by(10_000) {
            assert!(c.get(&polled, 1).is_some(), "polled list gone at {t} ms");
            assert!(c.get(&stale, 2).is_none());
            c.evict(Millis(t), usize::MAX);
        }
        assert!(c.get(&polled, 1).is_some());
        assert!(c.get(&once, 1).is_none(), "one-off read kept");
        assert_eq!(c.len(), 1, "the stale revision went too");
        assert_eq!(
            c.bytes(),
            weight(&polled, &CachedList::new(1, b"p".to_vec()))
        );
        // Once nobody polls it, it goes within two periods.
        c.evict(Millis(120_000), usize::MAX);
        c.evict(Millis(150_000), usize::MAX);
        assert!(c.is_empty() && c.bytes() == 0);
    }

    /// The hand is paced: half a period moves it over about half the ring,
    /// whatever the sweeper's interval.
    #[test]
    fn the_idle_hand_makes_one_turn_per_period() {
        let keys: Vec<String> = (0..1000).map(|i| key(&format!("G@@s{i}"))).collect();
        let c = ListCache::new(1 << 30, 30_000);
        for k in &keys {
            c.seen_before(k);
            c.put(k, 1, b"x".to_vec());
        }
        c.evict(Millis(1_000), usize::MAX);
        for t in (1_100..=16_000).step_by(100) {
            c.evict(Millis(t), usize::MAX);
        }
        // 15 s of a 30 s period: half the (unread) ring.
        assert_eq!(c.len(), 500);
        // The oldest half (looked at without marking it).
        let map = c.map.pin();
        assert!(!map.contains_key(keys[499].as_str()) && map.contains_key(keys[500].as_str()));
        drop(map);
        // A long pause owes one turn, not many.
        c.evict(Millis(1_000_000), usize::MAX);
        assert!(c.is_empty());
    }

    /// Admission asks for two reads within about one idle period: the
    /// doorkeeper is cleared by time, not only after a round of misses.
    #[test]
    fn the_doorkeeper_forgets_after_an_idle_period() {
        let k = key("G@@a");
        let c = ListCache::new(1 << 30, 30_000);
        c.evict(Millis(0), usize::MAX);
        assert!(!c.seen_before(&k));
        c.evict(Millis(29_999), usize::MAX);
        assert!(c.seen_before(&k), "within the period");
        c.evict(Millis(30_000), usize::MAX);
        c.put(&k, 1, b"x".to_vec());
        assert!(c.is_empty(), "a read a period ago does not admit");
        c.put(&k, 1, b"x".to_vec());
        assert_eq!(c.len(), 1);
    }
}
