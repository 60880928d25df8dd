//! The MySQL check of a persistent instance, as Nacos's
//! `healthcheck/v2/processor/MysqlHealthCheckProcessor` runs it: log in to
//! the instance's port with the cluster checker's `user` and `pwd`, run its
//! `cmd`, and when that is the `read_only` query call a server answering
//! `ON` (a replica) unhealthy.
//!
//! What fails how follows the processor: an error the server sends back
//! (wrong password, unknown user, a statement it refuses: a JDBC
//! `SQLException`) fails the instance at once (`checkFailNow`); a read-only
//! server, a refused or reset connection and a timeout count toward the
//! threshold like a TCP check's failure (`checkFail`). Nacos keeps one
//! connection per instance between rounds; this check logs in afresh each
//! round and says goodbye (`COM_QUIT`), so a server never holds a session
//! for the registry between checks.

use std::net::SocketAddr;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Row};
use registry_proto::openapi::admin::MysqlCheck;

use super::Probe;

/// One check of the MySQL server at `addr`; the caller bounds its time.
pub(super) async fn probe(check: &MysqlCheck, addr: SocketAddr) -> Probe {
    let opts = OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(check.user.as_str()))
        .pass(Some(check.pwd.as_str()))
        // The check probes the instance's TCP port; a local server must not
        // be reached through its Unix socket instead.
        .prefer_socket(false)
        .stmt_cache_size(0);
    let mut conn = match Conn::new(opts).await {
        Ok(conn) => conn,
        Err(e) => return failure(&e),
    };
    let verdict = match conn.query::<Row, _>(check.statement()).await {
        Ok(rows) if check.reads_read_only() && is_read_only(&rows) => Probe::Down,
        Ok(_) => Probe::Up,
        Err(e) => failure(&e),
    };
    // A goodbye that fails changes nothing the check found.
    let _ = conn.disconnect().await;
    verdict
}

/// How an error counts: the server's own refusal fails at once.
fn failure(e: &mysql_async::Error) -> Probe {
    match e {
        mysql_async::Error::Server(_) => Probe::DownNow,
        _ => Probe::Down,
    }
}

/// The `read_only` row's value (its second column, as the processor reads
/// `getString(2)`) is `ON`.
fn is_read_only(rows: &[Row]) -> bool {
    rows.first()
        .and_then(|row| row.get_opt::<String, usize>(1))
        .and_then(Result::ok)
        .is_some_and(|value| value == "ON")
}
