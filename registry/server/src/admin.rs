//! The operator's side of a running registry's admin API, for the
//! `registry members add|remove` commands: one blocking HTTP/1.1 request at
//! a time over plain TCP, logging in first when credentials are given.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs as _};
use std::time::Duration;

use anyhow::Context as _;

/// Where the admin requests go and as whom.
pub struct Target {
    /// `host:port` of the registry's HTTP listener.
    pub server: String,
    /// User name and password, when the registry runs with `--auth-users`.
    pub credentials: Option<(String, String)>,
    /// Longest wait for one answer.
    pub timeout: Duration,
}

/// An answer: status and body text.
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Body as text.
    pub body: String,
}

impl Target {
    /// `server` as `http://host:port`, `host:port` or `host:port/`.
    pub fn new(server: &str, credentials: Option<(String, String)>, timeout: Duration) -> Target {
        let server = server
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        Target {
            server,
            credentials,
            timeout,
        }
    }

    /// Sends `method path?query`, adding an `accessToken` from a login
    /// when credentials are set.
    ///
    /// # Errors
    /// When the server cannot be reached, the login fails, or the answer
    /// is not HTTP.
    pub fn call(&self, method: &str, path: &str, query: &str) -> anyhow::Result<Answer> {
        let mut query = query.to_owned();
        if let Some((user, password)) = &self.credentials {
            let token = self.login(user, password)?;
            query.push_str("&accessToken=");
            query.push_str(&encode(&token));
        }
        self.request(method, path, &query)
    }

    fn login(&self, user: &str, password: &str) -> anyhow::Result<String> {
        let q = format!("username={}&password={}", encode(user), encode(password));
        let a = self.request("POST", "/nacos/v1/auth/login", &q)?;
        anyhow::ensure!(
            a.status == 200,
            "login as {user} refused: {} {}",
            a.status,
            a.body
        );
        let v: serde_json::Value =
            serde_json::from_str(&a.body).context("the login answer is not JSON")?;
        v["accessToken"]
            .as_str()
            .map(str::to_owned)
            .context("the login answer has no accessToken")
    }

    fn request(&self, method: &str, path: &str, query: &str) -> anyhow::Result<Answer> {
        let addr: SocketAddr = self
            .server
            .to_socket_addrs()
            .with_context(|| format!("resolving {}", self.server))?
            .next()
            .with_context(|| format!("{} has no address", self.server))?;
        let mut s = TcpStream::connect_timeout(&addr, self.timeout)
            .with_context(|| format!("connecting to {addr}"))?;
        s.set_read_timeout(Some(self.timeout))?;
        s.set_write_timeout(Some(self.timeout))?;
        let head = format!(
            "{method} {path}?{query} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.server
        );
        s.write_all(head.as_bytes())?;
        read_answer(&mut s).with_context(|| format!("reading the answer of {addr}"))
    }
}

/// Reads one response with a `Content-Length` body (what the registry
/// sends), or up to the close.
fn read_answer(s: &mut TcpStream) -> anyhow::Result<Answer> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let status: u16 = head
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .context("no status line")?;
            let len = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            });
            let body_start = end + 4;
            while len.is_some_and(|n| buf.len() < body_start + n) {
                let n = s.read(&mut chunk)?;
                anyhow::ensure!(n > 0, "the connection closed inside the body");
                buf.extend_from_slice(&chunk[..n]);
            }
            if len.is_none() {
                s.read_to_end(&mut buf)?;
            }
            let body_end = len.map_or(buf.len(), |n| body_start + n);
            return Ok(Answer {
                status,
                body: String::from_utf8_lossy(&buf[body_start..body_end]).into_owned(),
            });
        }
        let n = s.read(&mut chunk)?;
        anyhow::ensure!(n > 0, "the connection closed before an answer");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Percent-encodes everything but unreserved characters.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_reserved_characters() {
        assert_eq!(super::encode("a b&c=d:1"), "a%20b%26c%3Dd%3A1");
    }
}
