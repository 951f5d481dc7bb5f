//! A dynamic informer on a custom resource: no Rust type for it, just its group, version, kind
//! and plural. Prints each widget as it comes and goes, with its `spec.size`.
//!
//! `cargo run -p kinformer --example dynamic_crd [GROUP VERSION KIND PLURAL]` (default:
//! `example.com v1 Widget widgets`). Without a kubeconfig it runs an in-process simulated cluster
//! that serves the resource and creates and deletes widgets.

mod support;

use std::time::Duration;

use kinformer::core::Scope;
use kinformer::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    support::init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [group, version, kind, plural] = match args.as_slice() {
        [g, v, k, p] => [g.as_str(), v, k, p],
        _ => ["example.com", "v1", "Widget", "widgets"],
    };
    let resource = ApiResource::new(group, version, kind, plural, Scope::Namespaced);
    let (client, sim) = support::connect().await?;
    if let Some(sim) = &sim {
        sim.store().register_crd(resource.clone());
        let store = sim.store();
        let resource = resource.clone();
        tokio::spawn(async move {
            for i in 0u64.. {
                let name = format!("widget-{}", i % 5);
                let object = serde_json::json!({
                    "apiVersion": resource.api_version, "kind": resource.kind,
                    "metadata": {"name": name, "namespace": "default"}, "spec": {"size": i},
                });
                if store.create(&resource, object).is_err() {
                    let _ = store.delete(&resource, Some("default"), &name);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }

    let size = |o: &DynamicObject| o.data["spec"]["size"].to_string();
    let kind: Arc<str> = Arc::from(resource.kind.as_str());
    let (added, updated, deleted) = (kind.clone(), kind.clone(), kind);
    let factory = Factory::new(client);
    let widgets = factory.dynamic(&resource);
    widgets.add_handler(
        HandlerFns::new()
            .on_add(move |o: &Arc<DynamicObject>, _| {
                println!("{added} Added: {} (size {})", o.key(), size(o));
            })
            .on_update(move |_, o: &Arc<DynamicObject>| {
                println!("{updated} Updated: {} (size {})", o.key(), size(o));
            })
            .on_delete(move |o: &DeltaObject<DynamicObject>| {
                println!("{deleted} Deleted: {}", o.key());
            }),
    )?;
    factory.start();
    support::synced_or_exit(factory.wait_synced_for(support::sync_timeout()).await);
    support::run_for_a_while().await;
    factory.shutdown().await;
    Ok(())
}
