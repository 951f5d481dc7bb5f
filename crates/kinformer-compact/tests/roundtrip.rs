//! Property tests: for generated pods, the compact and compressed forms decoded from the pod's
//! JSON answer the same `Object` facts as the pod, and `.typed()` equals a direct decode of the
//! same bytes; malformed bytes give an error, never a panic.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kinformer_compact::{Codec, CodecConfig, Compact, Compressed, Error};
use kinformer_core::Object;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

/// Strings with the characters JSON escapes, and some that it does not.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]([-a-z0-9.]{0,14}[a-z0-9])?",
        "[a-zA-Z0-9 \"\\\\/\\n\\t\u{e9}\u{4e2d}\u{1f600}]{0,12}",
    ]
}

fn owner() -> impl Strategy<Value = OwnerReference> {
    (
        text(),
        text(),
        text(),
        text(),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(
            |(api_version, kind, name, uid, controller)| OwnerReference {
                api_version,
                kind,
                name,
                uid,
                controller,
                block_owner_deletion: None,
            },
        )
}

fn meta() -> impl Strategy<Value = ObjectMeta> {
    (
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of("[0-9]{1,8}"),
        proptest::option::of(proptest::collection::btree_map(text(), text(), 0..6)),
        proptest::option::of(proptest::collection::btree_map(text(), text(), 0..3)),
        proptest::option::of(proptest::collection::vec(owner(), 0..3)),
    )
        .prop_map(
            |(name, namespace, uid, resource_version, labels, annotations, owners)| ObjectMeta {
                name,
                namespace,
                uid,
                resource_version,
                labels,
                annotations,
                owner_references: owners,
                ..ObjectMeta::default()
            },
        )
}

fn pod() -> impl Strategy<Value = Pod> {
    (
        meta(),
        proptest::option::of((
            proptest::collection::vec((text(), proptest::option::of(text())), 0..3),
            proptest::option::of(text()),
        )),
        proptest::option::of(proptest::option::of(text())),
    )
        .prop_map(|(metadata, spec, status)| Pod {
            metadata,
            spec: spec.map(|(containers, node_name)| PodSpec {
                containers: containers
                    .into_iter()
                    .map(|(name, image)| Container {
                        name,
                        image,
                        ..Container::default()
                    })
                    .collect(),
                node_name,
                ..PodSpec::default()
            }),
            status: status.map(|phase| PodStatus {
                phase,
                ..PodStatus::default()
            }),
        })
}

fn config() -> Config {
    Config {
        cases: 256,
        rng_seed: RngSeed::Fixed(0x6b69_6e66),
        failure_persistence: None,
        ..Config::default()
    }
}

/// The `Object` facts of an object, owned, for comparison.
#[derive(Debug, PartialEq)]
struct Facts {
    key: String,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: BTreeMap<String, String>,
    owners: Vec<String>,
}

fn facts<O: Object>(o: &O) -> Facts {
    Facts {
        key: o.key().to_string(),
        namespace: o.namespace().map(str::to_owned),
        uid: o.uid().map(str::to_owned),
        resource_version: o.resource_version().map(str::to_owned),
        labels: o.labels().clone(),
        owners: o
            .owner_references()
            .iter()
            .map(|r| format!("{r:?}"))
            .collect(),
    }
}

/// A codec that trains early, so that the cases run both with and without a dictionary.
fn codec() -> &'static Codec {
    static CODEC: std::sync::OnceLock<Codec> = std::sync::OnceLock::new();
    CODEC.get_or_init(|| {
        Codec::new(CodecConfig {
            train_after: 32,
            dictionary_size: 4096,
            ..CodecConfig::default()
        })
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_forms_answer_as_the_pod_and_type_to_a_direct_decode(pod in pod()) {
        let bytes = serde_json::to_vec(&pod).unwrap();
        let direct: Pod = serde_json::from_slice(&bytes).unwrap();

        let compact = Compact::<Pod>::from_json(&bytes).unwrap();
        prop_assert_eq!(facts(&compact), facts(&pod));
        prop_assert_eq!(compact.typed().unwrap(), direct.clone());
        prop_assert_eq!(compact.json().as_bytes(), &bytes[..]);
        let via_serde: Compact<Pod> = serde_json::from_slice(&bytes).unwrap();
        prop_assert_eq!(&via_serde, &compact);
        prop_assert_eq!(serde_json::to_vec(&via_serde).unwrap(), bytes.clone());

        let compressed = Compressed::<Pod>::from_json_with(codec(), &bytes).unwrap();
        prop_assert_eq!(facts(&compressed), facts(&pod));
        prop_assert_eq!(compressed.typed().unwrap(), direct.clone());
        prop_assert_eq!(serde_json::to_vec(&compressed).unwrap(), bytes.clone());
        let via_serde: Compressed<Pod> = serde_json::from_slice(&bytes).unwrap();
        prop_assert_eq!(via_serde.typed().unwrap(), direct);
    }

    #[test]
    fn malformed_bytes_are_an_error_never_a_panic(
        pod in pod(),
        cut in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        noise in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let bytes = serde_json::to_vec(&pod).unwrap();
        // A cut object is never a whole JSON object.
        let cut = &bytes[..cut.index(bytes.len())];
        let compact_refused = matches!(Compact::<Pod>::from_json(cut), Err(Error::Decode { .. }));
        prop_assert!(compact_refused);
        let compressed_refused = matches!(
            Compressed::<Pod>::from_json_with(codec(), cut),
            Err(Error::Decode { .. })
        );
        prop_assert!(compressed_refused);
        // Flipped bytes and noise may still be JSON; whatever decodes must type or fail cleanly,
        // the same way as a direct decode.
        let mut flipped = bytes.clone();
        for (at, byte) in &flips {
            flipped[at.index(bytes.len())] = *byte;
        }
        for input in [&flipped[..], &noise[..]] {
            let direct = serde_json::from_slice::<Pod>(input);
            if let Ok(c) = Compact::<Pod>::from_json(input) {
                prop_assert_eq!(c.typed().ok(), direct.as_ref().ok().cloned());
            }
            if let Ok(c) = Compressed::<Pod>::from_json_with(codec(), input) {
                prop_assert_eq!(c.typed().ok(), direct.as_ref().ok().cloned());
            }
            // The forms keep the JSON as a string, so they refuse what is not UTF-8, even in a
            // field a typed decode skips; anything else the typed decode takes, they take.
            if direct.is_ok() && std::str::from_utf8(input).is_ok() {
                prop_assert!(Compact::<Pod>::from_json(input).is_ok());
            }
        }
    }
}
