//! Model-based: random writes, missed events and relists through the whole informer (reflector,
//! in-order or classic delta FIFO, indexer, two handlers). At the end each handler's calls form
//! a valid history per key, replaying them gives the server's state, and the cache equals it.

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_delta_fifo::{DeltaFifo, Mode};
use kinformer_indexer::Indexer;
use kinformer_shared_informer::{
    InformerConfig, Registration, SharedIndexInformer, wait_for_cache_sync,
};
use proptest::prelude::*;
use support::{Fake, History, cached_state, catch_up, settle};

#[derive(Debug, Clone)]
enum Op {
    Write {
        name: u8,
        delete: bool,
        silent: bool,
    },
    Expire,
    Settle,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..5, any::<bool>(), prop::bool::weighted(0.15))
            .prop_map(|(name, delete, silent)| Op::Write { name, delete, silent }),
        1 => Just(Op::Expire),
        1 => Just(Op::Settle),
    ]
}

fn check(ops: Vec<Op>, classic: bool) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async move {
        let fake = Fake::default();
        let cache = Arc::new(Indexer::<Pod>::new());
        let mode = if classic {
            Mode::Classic
        } else {
            Mode::InOrder
        };
        let queue = Arc::new(
            DeltaFifo::builder()
                .mode(mode)
                .known_objects(cache.clone())
                .build()
                .unwrap(),
        );
        let informer = Arc::new(SharedIndexInformer::new(
            support::events(fake.clone()),
            queue,
            Arc::clone(&cache),
            InformerConfig::default(),
        ));
        let histories = [History::default(), History::default()];
        let regs: Vec<Registration<Pod>> = histories
            .iter()
            .map(|h| informer.add_handler(h.clone()).unwrap())
            .collect();
        let run = tokio::spawn({
            let informer = Arc::clone(&informer);
            async move { informer.run().await }
        });
        assert!(wait_for_cache_sync(&[&*informer], None).await);
        for op in ops {
            match op {
                Op::Write {
                    name,
                    delete,
                    silent,
                } => fake.write(&format!("p{name}"), delete, silent),
                Op::Expire => fake.expire(),
                Op::Settle => tokio::time::sleep(Duration::from_secs(2)).await,
            }
            tokio::task::yield_now().await;
        }
        // The end: one last relist catches up whatever a watch missed.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let target = catch_up(&fake, &*cache, Duration::from_secs(1), 200).await;
        prop_assert_eq!(cached_state(&*cache), target.clone());
        settle(&regs);
        for h in &histories {
            let believed = h.replay().map_err(TestCaseError::fail)?;
            prop_assert_eq!(&believed, &target);
        }
        informer.shutdown().await;
        run.await.unwrap();
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b69_6e66),
        ..ProptestConfig::default()
    })]

    #[test]
    fn handlers_hear_valid_histories_and_the_cache_ends_as_the_server(
        ops in prop::collection::vec(op(), 1..60),
        classic in any::<bool>(),
    ) {
        check(ops, classic)?;
    }
}
