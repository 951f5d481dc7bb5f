//! Unit tests of the cluster model's pieces; the behaviour as a whole is tested in
//! `tests/cluster.rs`.

use super::names::template_hash;
use super::objects::resource;
use super::{Cluster, ClusterConfig};
use crate::store::Store;

#[test]
fn template_hashes_use_the_encoded_digit_alphabet() {
    let h = template_hash("default/web/nginx:1.27.3/1");
    assert!((6..=10).contains(&h.len()), "{h}");
    assert!(h.chars().all(|c| "456789bcdf".contains(c)), "{h}");
    assert_eq!(h, template_hash("default/web/nginx:1.27.3/1"));
    assert_ne!(h, template_hash("default/web/nginx:1.27.4/2"));
}

#[test]
fn small_budgets_are_met_exactly() {
    for pods in [0, 1, 2, 5, 15, 16, 19, 20, 50, 333] {
        let s = Store::new(100_000);
        Cluster::seed(
            &s,
            &ClusterConfig {
                pods,
                ..ClusterConfig::default()
            },
        );
        assert_eq!(s.list(&resource("pods"), None).len(), pods, "{pods}");
    }
}
