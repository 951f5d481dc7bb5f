//! Names and hashes shaped like Kubernetes': the generated-name alphabet, `pod-template-hash`
//! values, five-character suffixes, container IDs and image digests.

use crate::store::splitmix;
use crate::workload::Rng;

use super::model::{Cluster, Key};

/// The alphabet Kubernetes draws generated names and encoded hashes from (no vowels, no
/// look-alike digits), as `k8s.io/apimachinery/pkg/util/rand` does.
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// 32-bit FNV-1a, the hash the deployment controller names replica sets with.
pub(super) fn fnv32(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5, |h: u32, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// A `pod-template-hash`: the decimal hash, each digit mapped into [`ALPHANUMS`] as
/// `rand.SafeEncodeString` does (so only `4-9` and `b c d f` appear, as in real clusters).
pub(super) fn template_hash(s: &str) -> String {
    fnv32(s)
        .to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// The five random characters a generated name ends with.
pub(super) fn suffix(rng: &mut Rng) -> String {
    (0..5)
        .map(|_| ALPHANUMS[rng.below(ALPHANUMS.len() as u64) as usize] as char)
        .collect()
}

/// 64 hex digits (a container ID or an image digest) from a number.
pub(super) fn hex64(x: u64) -> String {
    (0..4)
        .map(|i| format!("{:016x}", splitmix(x.wrapping_add(i))))
        .collect()
}

impl Cluster {
    /// A pod name its replica set `rs` has not used yet (`RS-NAME-xxxxx`).
    pub(super) fn new_pod_name(&mut self, rs: &Key) -> String {
        // Bounded: a collision among 27^5 names is rare, and a few tries end it.
        for _ in 0..16 {
            let name = format!("{}-{}", rs.1, suffix(&mut self.rng));
            if !self.pods.contains_key(&(rs.0.clone(), name.clone())) {
                return name;
            }
        }
        format!("{}-{}", rs.1, suffix(&mut self.rng))
    }
}
