//! The gRPC door as the server registers it: `--grpc-listen` (by default
//! the HTTP port + 1000), its connections' counters on `/metrics`, and a
//! drain bounded by [`super::DRAIN`].

use crate::config::Config;
use crate::door::{Bound, Door, Running};
use crate::metrics::Render;
use registry_proto::prometheus::Exposition;

/// The Nacos 2.x gRPC protocol (always on).
pub struct GrpcDoor;

impl Door for GrpcDoor {
    fn name(&self) -> &'static str {
        "grpc"
    }

    fn bind(&self, config: &Config) -> anyhow::Result<Option<Bound>> {
        use anyhow::Context as _;
        let addr = config
            .grpc_addr()
            .context("the HTTP port + 1000 is past 65535: set --grpc-listen")?;
        let listener = std::net::TcpListener::bind(addr)
            .with_context(|| format!("binding gRPC {addr} (set --grpc-listen to move it)"))?;
        listener.set_nonblocking(true)?;
        Ok(Some(Bound::new(listener.local_addr()?, move |views| {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let app = views.state().clone();
            let stop = views.stop();
            let mut served = tokio::spawn(super::serve(app.clone(), listener, stop.clone()));
            // tonic's graceful stop waits until every client closes its half
            // of its stream, which a connected 2.x client need not do:
            // bounded, so that one idle client cannot spend the whole grace
            // period and cost the notifier's last pushes and the writer's
            // last commit.
            let drained = async move {
                stop.cancelled().await;
                if tokio::time::timeout(super::DRAIN, &mut served)
                    .await
                    .is_err()
                {
                    served.abort();
                }
            };
            Ok(Running::spawn(drained).with_metrics(app.grpc.clone()))
        })))
    }
}

impl Render for crate::hub::Grpc {
    fn render(&self, e: &mut Exposition<'_>) {
        self.metrics.render(e);
    }
}
