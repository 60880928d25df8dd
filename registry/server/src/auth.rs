//! Optional access control, compatible with Nacos 1.x clients: they
//! `POST /nacos/v1/auth/login` with `username` and `password`, get
//! `{"accessToken":…,"tokenTtl":…,"globalAdmin":false}`, and send
//! `accessToken` on every call (query or form).
//!
//! Enabled by `--auth-users FILE`; off by default, and then nothing here
//! runs. There are no built-in users and no built-in secret.
//!
//! # The users file
//! One user per line, `name:pbkdf2-sha256$ITERATIONS$SALT_HEX$HASH_HEX`,
//! where HASH is PBKDF2-HMAC-SHA256 of the password (32 bytes) with at
//! least [`MIN_ITERATIONS`] iterations (600 000 is today's advice). Blank
//! lines and lines starting with `#` are ignored. Names are 1–64 characters
//! of `A-Z a-z 0-9 _ . @ -`. One way to make a line:
//!
//! ```text
//! python3 -c 'import hashlib,os,sys;s=os.urandom(16);n=600000;print("%s:pbkdf2-sha256$%d$%s$%s"%(sys.argv[1],n,s.hex(),hashlib.pbkdf2_hmac("sha256",sys.argv[2].encode(),s,n).hex()))' alice 'secret'
//! ```
//!
//! # Tokens
//! A token is `hex(expiry) hex(mac) hex(name)`: the expiry in Unix seconds,
//! the user name, and an HMAC-SHA256 of both under a 32-byte key drawn from
//! the OS at random. With `--data-dir` the key is kept in the database, so
//! tokens outlive a restart (as Nacos's do: its clients only log in again
//! when their token's TTL runs out); without it, each process has its own.
//! Checking a token allocates nothing and takes no lock: decode, one HMAC,
//! one constant-time comparison, one map lookup.
//!
//! # What is not trusted
//! Nothing but a valid token opens the API: no header (Nacos once let any
//! request whose `User-Agent` started with `Nacos-Server` through), no
//! source address. Passwords and MACs are compared in constant time, and a
//! login for an unknown user runs the same key derivation as a known one,
//! so timing tells neither. Logins are CPU-heavy by design: they run off
//! the runtime threads, at most `--auth-max-logins` at once, past which a
//! login gets 503.
//!
//! `/metrics` stays open: Prometheus scrapers cannot log in the Nacos way,
//! and it carries only aggregate counters (no service, instance or user
//! names). Everything else, `/operator/*` included, needs a token.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::Counter;
use registry_proto::prometheus::{Exposition, Kind};

/// Fewest PBKDF2 iterations a users file may use.
pub const MIN_ITERATIONS: u32 = 10_000;
/// Longest user name.
const MAX_NAME: usize = 64;
/// Separates this use of the key from any other.
const TOKEN_DOMAIN: &[u8] = b"registry access token v1\0";
const SCHEME: &str = "pbkdf2-sha256";

type HmacSha256 = Hmac<Sha256>;

/// Why a request or login was refused: 403 with Nacos's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// No `accessToken` parameter: log in first.
    #[error("user not found!")]
    NoToken,
    /// The token was not issued by this server (or was altered).
    #[error("token invalid!")]
    Invalid,
    /// The token's TTL has run out: log in again.
    #[error("token expired!")]
    Expired,
    /// Wrong user name or password at login.
    #[error("unknown user!")]
    BadCredentials,
}

/// A users file that cannot be used; fix the line it names.
#[derive(Debug, thiserror::Error)]
pub enum UsersFileError {
    /// The file cannot be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not `name:pbkdf2-sha256$ITERATIONS$SALT_HEX$HASH_HEX`.
    #[error("line {line}: {reason}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The file names no user, which would lock everyone out.
    #[error("no users in the file")]
    Empty,
}

/// A stored PBKDF2-HMAC-SHA256 password hash.
#[derive(Clone)]
struct PasswordHash {
    iterations: u32,
    salt: Vec<u8>,
    hash: [u8; 32],
}

impl PasswordHash {
    fn parse(text: &str) -> Result<PasswordHash, String> {
        let mut parts = text.split('$');
        let (Some(scheme), Some(iterations), Some(salt), Some(hash), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(format!("expected {SCHEME}$ITERATIONS$SALT_HEX$HASH_HEX"));
        };
        if scheme != SCHEME {
            return Err(format!("unknown hash scheme {scheme:?}, expected {SCHEME}"));
        }
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| format!("iterations {iterations:?} is not a number"))?;
        if iterations < MIN_ITERATIONS {
            return Err(format!(
                "{iterations} iterations is too few (at least {MIN_ITERATIONS})"
            ));
        }
        let salt = hex_vec(salt).ok_or("the salt is not hex")?;
        if salt.len() < 8 {
            return Err("the salt must be at least 8 bytes".into());
        }
        let mut out = [0u8; 32];
        if hash.len() != 64 || !hex_into(hash.as_bytes(), &mut out) {
            return Err("the hash must be 32 bytes of hex".into());
        }
        Ok(PasswordHash {
            iterations,
            salt,
            hash: out,
        })
    }

    /// Derives and compares in constant time.
    fn verify(&self, password: &str) -> bool {
        let mut derived = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(
            password.as_bytes(),
            &self.salt,
            self.iterations,
            &mut derived,
        );
        derived.ct_eq(&self.hash).into()
    }
}

/// Counters for `/metrics`.
#[derive(Default)]
pub struct AuthStats {
    /// Successful logins.
    pub logins: Counter,
    /// Refused logins.
    pub login_failures: Counter,
    /// Requests refused for a missing, invalid or expired token.
    pub refused: Counter,
}

impl AuthStats {
    /// Appends the login and token families.
    pub fn render(&self, e: &mut Exposition<'_>) {
        const LOGINS: &str = "registry_auth_logins_total";
        e.family(LOGINS, Kind::Counter, "Logins, by result.");
        e.sample(LOGINS, &[("result", "ok")], self.logins.get());
        e.sample(LOGINS, &[("result", "refused")], self.login_failures.get());
        e.counter(
            "registry_auth_refused_total",
            "Requests refused for a missing, invalid or expired token.",
            self.refused.get(),
        );
    }
}

/// Users, the token key and the login limiter. Read-only after start.
pub struct Auth {
    users: HashMap<String, PasswordHash>,
    /// Verified against for unknown names, so they cost the same.
    decoy: PasswordHash,
    /// Keyed once; cloned per use (a copy of its state, no allocation).
    mac: HmacSha256,
    ttl_secs: u64,
    logins: Arc<Semaphore>,
    /// Counters.
    pub stats: AuthStats,
}

impl Auth {
    /// Reads the users file. `key` signs tokens.
    ///
    /// # Errors
    /// When the file cannot be read, a line is malformed, or it is empty.
    pub fn load(
        path: &Path,
        key: [u8; 32],
        ttl_secs: u64,
        max_logins: usize,
    ) -> Result<Auth, UsersFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| UsersFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Auth::from_text(&text, key, ttl_secs, max_logins)
    }

    /// [`Auth::load`] from the file's text.
    ///
    /// # Errors
    /// As [`Auth::load`].
    pub fn from_text(
        text: &str,
        key: [u8; 32],
        ttl_secs: u64,
        max_logins: usize,
    ) -> Result<Auth, UsersFileError> {
        let mut users = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |reason: String| UsersFileError::Line {
                line: i + 1,
                reason,
            };
            let (name, hash) = line
                .split_once(':')
                .ok_or_else(|| bad("expected name:hash".into()))?;
            if !valid_name(name) {
                return Err(bad(format!(
                    "user names are 1-{MAX_NAME} characters of A-Z a-z 0-9 _ . @ -"
                )));
            }
            let hash = PasswordHash::parse(hash).map_err(bad)?;
            if users.insert(name.to_owned(), hash).is_some() {
                return Err(bad(format!("user {name} appears twice")));
            }
        }
        let Some(strongest) = users.values().max_by_key(|h| h.iterations) else {
            return Err(UsersFileError::Empty);
        };
        let decoy = PasswordHash {
            iterations: strongest.iterations,
            salt: vec![0x5a; 16],
            hash: [0; 32],
        };
        let mac = HmacSha256::new_from_slice(&key).expect("HMAC takes keys of any length");
        Ok(Auth {
            users,
            decoy,
            mac,
            ttl_secs,
            logins: Arc::new(Semaphore::new(max_logins)),
            stats: AuthStats::default(),
        })
    }

    /// Token lifetime in seconds.
    pub fn ttl_secs(&self) -> u64 {
        self.ttl_secs
    }

    /// A place among the logins allowed to run at once; `None` when all
    /// are taken.
    pub fn login_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.logins.clone().try_acquire_owned().ok()
    }

    /// Checks a name and password (slow by design: call off the runtime
    /// threads) and issues a token.
    ///
    /// # Errors
    /// [`Denied::BadCredentials`] for an unknown name or a wrong password,
    /// alike.
    pub fn login(&self, name: &str, password: &str) -> Result<String, Denied> {
        let (hash, known) = match self.users.get(name) {
            Some(h) => (h, true),
            None => (&self.decoy, false),
        };
        // Always derive, so an unknown name takes as long as a known one.
        let matches = hash.verify(password);
        if matches && known {
            self.stats.logins.inc();
            Ok(self.issue(name, unix_now().saturating_add(self.ttl_secs)))
        } else {
            self.stats.login_failures.inc();
            Err(Denied::BadCredentials)
        }
    }

    /// A token for `name` valid until `expiry` (Unix seconds).
    pub fn issue(&self, name: &str, expiry: u64) -> String {
        let tag = self.tag(expiry, name.as_bytes());
        let mut token = String::with_capacity(16 + 64 + 2 * name.len());
        push_hex(&mut token, &expiry.to_be_bytes());
        push_hex(&mut token, &tag);
        push_hex(&mut token, name.as_bytes());
        token
    }

    /// Checks an `accessToken`.
    ///
    /// # Errors
    /// Which of [`Denied::NoToken`], [`Denied::Invalid`] or
    /// [`Denied::Expired`] applies.
    pub fn check(&self, token: Option<&str>) -> Result<(), Denied> {
        let result = self.check_at(token, unix_now());
        if result.is_err() {
            self.stats.refused.inc();
        }
        result
    }

    fn check_at(&self, token: Option<&str>, now: u64) -> Result<(), Denied> {
        let token = token.map(str::trim).filter(|t| !t.is_empty());
        let Some(token) = token.map(str::as_bytes) else {
            return Err(Denied::NoToken);
        };
        // hex(8) + hex(32) + hex(1..=MAX_NAME)
        if token.len() < 2 * (8 + 32 + 1) || token.len() > 2 * (8 + 32 + MAX_NAME) {
            return Err(Denied::Invalid);
        }
        let (mut expiry, mut tag, mut name) = ([0u8; 8], [0u8; 32], [0u8; MAX_NAME]);
        let name_len = token.len() / 2 - 40;
        if token.len() % 2 != 0
            || !hex_into(&token[..16], &mut expiry)
            || !hex_into(&token[16..80], &mut tag)
            || !hex_into(&token[80..], &mut name[..name_len])
        {
            return Err(Denied::Invalid);
        }
        let name = &name[..name_len];
        let expiry = u64::from_be_bytes(expiry);
        if !bool::from(self.tag(expiry, name).ct_eq(&tag)) {
            return Err(Denied::Invalid);
        }
        if expiry <= now {
            return Err(Denied::Expired);
        }
        // Signed by us, but for a user no longer in the file.
        let known = std::str::from_utf8(name).is_ok_and(|n| self.users.contains_key(n));
        if !known {
            return Err(Denied::Invalid);
        }
        Ok(())
    }

    fn tag(&self, expiry: u64, name: &[u8]) -> [u8; 32] {
        let mut mac = self.mac.clone();
        mac.update(TOKEN_DOMAIN);
        mac.update(&expiry.to_be_bytes());
        mac.update(name);
        mac.finalize().into_bytes().into()
    }
}

/// 32 random bytes from the OS.
///
/// # Errors
/// When the OS has no randomness to give.
pub fn random_key() -> anyhow::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("reading OS randomness: {e}"))?;
    Ok(key)
}

/// The token key of every member of a cluster, derived from its secret so
/// a token issued by one node is valid on all of them.
pub fn key_from_secret(secret: &str) -> [u8; 32] {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(b"registry cluster token key\0");
    h.update(secret.as_bytes());
    h.finalize().into()
}

/// A users-file hash of `password` with a random salt (tests, tooling).
///
/// # Errors
/// When the OS has no randomness to give.
pub fn hash_password(password: &str, iterations: u32) -> anyhow::Result<String> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| anyhow::anyhow!("reading OS randomness: {e}"))?;
    let mut hash = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), &salt, iterations, &mut hash);
    let mut out = format!("{SCHEME}${iterations}$");
    push_hex(&mut out, &salt);
    out.push('$');
    push_hex(&mut out, &hash);
    Ok(out)
}

pub(crate) fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'@' | b'-'))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Decodes `src` (exactly `2 * out.len()` hex digits) into `out`.
fn hex_into(src: &[u8], out: &mut [u8]) -> bool {
    if src.len() != 2 * out.len() {
        return false;
    }
    for (pair, byte) in src.chunks_exact(2).zip(out.iter_mut()) {
        match (hex_digit(pair[0]), hex_digit(pair[1])) {
            (Some(h), Some(l)) => *byte = h << 4 | l,
            _ => return false,
        }
    }
    true
}

fn hex_vec(src: &str) -> Option<Vec<u8>> {
    let mut out = vec![0u8; src.len() / 2];
    (src.len() % 2 == 0 && hex_into(src.as_bytes(), &mut out)).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> Auth {
        let line = format!("alice:{}", hash_password("s3cret", MIN_ITERATIONS).unwrap());
        Auth::from_text(&format!("# users\n\n{line}\n"), [7; 32], 60, 1).unwrap()
    }

    #[test]
    fn login_and_tokens() {
        let a = auth();
        assert_eq!(a.login("alice", "wrong"), Err(Denied::BadCredentials));
        assert_eq!(a.login("bob", "s3cret"), Err(Denied::BadCredentials));
        let token = a.login("alice", "s3cret").unwrap();
        assert_eq!(a.check(Some(&token)), Ok(()));
        assert_eq!(a.check(None), Err(Denied::NoToken));
        assert_eq!(a.check(Some("  ")), Err(Denied::NoToken));
        // Any flipped digit breaks the MAC (or the hex).
        for i in 0..token.len() {
            let mut t = token.clone().into_bytes();
            t[i] = if t[i] == b'0' { b'1' } else { b'0' };
            let t = String::from_utf8(t).unwrap();
            assert_eq!(a.check(Some(&t)), Err(Denied::Invalid), "digit {i}");
        }
        // Another key's token is invalid, even for a known user.
        let other = Auth::from_text(
            &format!("alice:{}", a.users["alice"].to_line()),
            [8; 32],
            60,
            1,
        )
        .unwrap();
        assert_eq!(other.check(Some(&token)), Err(Denied::Invalid));
        // A signed token for a name not in the file is refused.
        assert_eq!(
            a.check(Some(&a.issue("mallory", unix_now() + 60))),
            Err(Denied::Invalid)
        );
        assert_eq!(
            a.check(Some(&a.issue("alice", unix_now() - 1))),
            Err(Denied::Expired)
        );
        assert_eq!(a.check(Some("zz")), Err(Denied::Invalid));
        assert_eq!(a.check(Some(&"a".repeat(4000))), Err(Denied::Invalid));
    }

    #[test]
    fn one_login_at_a_time() {
        let a = auth();
        let first = a.login_slot();
        assert!(first.is_some());
        assert!(a.login_slot().is_none());
        drop(first);
        assert!(a.login_slot().is_some());
    }

    #[test]
    fn users_file_errors() {
        let err = |text: &str| {
            Auth::from_text(text, [0; 32], 60, 1)
                .err()
                .unwrap()
                .to_string()
        };
        assert_eq!(err("# nobody\n"), "no users in the file");
        assert!(err("alice").starts_with("line 1: expected name:hash"));
        assert!(err("alice:plain").contains("expected pbkdf2-sha256$"));
        assert!(err("alice:md5$1$00$00").contains("unknown hash scheme"));
        assert!(err(&format!(
            "alice:pbkdf2-sha256$100${}${}",
            "00".repeat(16),
            "00".repeat(32)
        ))
        .contains("too few"));
        assert!(err(&format!(
            "a b:pbkdf2-sha256$10000${}${}",
            "00".repeat(16),
            "00".repeat(32)
        ))
        .contains("user names"));
        let ok = format!(
            "pbkdf2-sha256$10000${}${}",
            "00".repeat(16),
            "00".repeat(32)
        );
        assert!(err(&format!("a:{ok}\na:{ok}")).contains("line 2: user a appears twice"));
    }

    impl PasswordHash {
        fn to_line(&self) -> String {
            let mut out = format!("{SCHEME}${}$", self.iterations);
            push_hex(&mut out, &self.salt);
            out.push('$');
            push_hex(&mut out, &self.hash);
            out
        }
    }
}
