//! The UDP push door (`--udp-listen`, always on): the socket 1.x pushes
//! leave from and their acks arrive on, served by the notifier
//! (`crate::notifier`), the one task that owns push state.
//!
//! It stops in the push [`Phase`], after the sweeper, not with the doors
//! that accept requests: the notifier still sends the pushes due for the
//! last changes those doors and the sweeper made (to 2.x streams as well,
//! which it also fans out to), then closes the socket.

use crate::config::Config;
use crate::door::{Bound, Door, Phase, Running};

/// The 1.x UDP push socket and the notifier that serves it.
pub struct UdpDoor;

impl Door for UdpDoor {
    fn name(&self) -> &'static str {
        "udp"
    }

    fn phase(&self) -> Phase {
        Phase::Push
    }

    fn bind(&self, config: &Config) -> anyhow::Result<Option<Bound>> {
        use anyhow::Context as _;
        let socket = std::net::UdpSocket::bind(config.udp_listen)
            .with_context(|| format!("binding UDP {}", config.udp_listen))?;
        socket.set_nonblocking(true)?;
        Ok(Some(Bound::new(socket.local_addr()?, move |views| {
            let socket = tokio::net::UdpSocket::from_std(socket)?;
            Ok(Running::spawn(crate::notifier::run(
                views.pushes(),
                socket,
                views.stop(),
            )))
        })))
    }
}
