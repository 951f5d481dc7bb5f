//! Read-your-writes for work queues: keys held back until the cache has caught up with the
//! controller's own writes.

use std::future::Future;
use std::pin::Pin;

use kinformer_shared_informer::Freshness;
use kinformer_workqueue::Gate;

/// A work-queue [`Gate`] that holds a key until the informer's cache is at least as fresh for it
/// as the controller's last recorded write ([`Freshness::wrote`]), so a worker never reconciles
/// from a cache that does not show its own write yet.
///
/// A key whose freshness cannot be judged (the server makes opaque resource versions) is let
/// through, with a warning: holding it would hold it for ever.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use kinformer::prelude::*;
/// use k8s_openapi::api::core::v1::Pod;
/// # let sim = kinformer_sim::SimServer::start(kinformer_sim::SimConfig::default()).await?;
/// # let client = Client::new(kinformer::client::Config::new(sim.url()))?;
///
/// let pods = Informer::<Pod>::builder().list_watch(Api::all(client)).build()?;
/// let freshness = pods.freshness();
/// let queue: RateLimitingQueue<String> = RateLimitingQueue::with_rate_limiter_and_gate(
///     kinformer::workqueue::default_controller_rate_limiter(),
///     FreshKeys::new(freshness.clone()),
/// );
/// // After a write of default/web that returned resourceVersion 42:
/// freshness.wrote("default/web", "42".into());
/// queue.add("default/web".to_owned()); // handed out once the cache has reached 42
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FreshKeys(Freshness, metrics::Counter);

impl FreshKeys {
    /// The counter of keys held back, each time the gate found one not fresh yet (KEP-5647's
    /// `stale_sync_skips`), labelled `informer`.
    pub const METRIC: &str = "kinformer_informer_stale_sync_skips_total";

    /// A gate over this informer's freshness.
    pub fn new(freshness: Freshness) -> Self {
        let skips = metrics::counter!(
            Self::METRIC,
            "informer" => freshness.informer().to_owned(),
            "resource" => freshness.resource().to_owned()
        );
        Self(freshness, skips)
    }
}

impl<T: AsRef<str>> Gate<T> for FreshKeys {
    fn is_open(&self, key: &T) -> bool {
        match self.0.is_fresh(key.as_ref()) {
            Ok(true) => true,
            Ok(false) => {
                self.1.increment(1);
                false
            }
            Err(e) => {
                tracing::warn!(key = key.as_ref(), error = %e, "freshness cannot be judged; the key is let through");
                true
            }
        }
    }

    fn changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + Sync>> {
        Box::pin(self.0.changed())
    }
}
