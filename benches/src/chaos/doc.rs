//! Writing the soak's report into `docs/reliability.md`, between the markers
//! `<!-- chaos:begin -->` and `<!-- chaos:end -->`, one block per seed; the rest of the file is
//! left as it is.

const BEGIN: &str = "<!-- chaos:begin -->";
const END: &str = "<!-- chaos:end -->";

/// What the chaos section says above the per-seed blocks.
const INTRO: &str = "## Chaos soak

`cargo xtask chaos [--seconds N] [--seed S] [--docs]` (`--docs` writes its report here) runs a
seeded workload on the simulated API server over HTTP on 127.0.0.1 (creates, updates and
deletes of pods across four namespaces; graceful deletions with grace periods of 1-3 s;
finalizers taken off after the delete; names of deleted pods used again; pods moving into and
out of a label selector) while a seeded schedule fires
every fault class the server has (a stream cut mid-line, watches closed, stalls, 410 on a watch
and on a continue token, compaction, 429/500/503 bursts with and without Retry-After, malformed,
large and over-the-limit lines, slow chunks, and a restart that drops every connection).
Against it runs a `SharedInformerFactory` with four informers (typed pods, compact pods
`kinformer_compact::Compact<Pod>`, metadata-only pods, typed pods behind the `chaos/tier=in`
selector) and seven handlers (on typed pods: a fast one, a slow one that stalls 2 s on every
150th call, one that panics on every 97th call, and one behind a `FilteringHandler` with the
selector's filter; a fast one on each of the other three).

Beside the factory runs a sharded group: three replicas of a typed pod informer
(`kinformer::partition::sharded`), each with a client of its own so that the faults hit it too,
splitting the pods by uid hash through `ShardMembership` on one Lease each (group `chaos-shards`
in `default`; lease 2 s, renew deadline 1.5 s, retry period 250 ms). The server is a 1.34 one,
which ignores `shardSelector`: each replica lists and watches every pod and keeps those of its
ranges. At the start of every phase, and every 2-5 s after (seeded), one replica is taken down
and started again under the same identity, as a StatefulSet pod comes back. Four kinds take
turns: a graceful stop (the owner lets go of its ranges, then the Lease is deleted) and an
abrupt death (the membership is aborted and the informer shut down, releasing nothing), each
first waiting, within 60 s, until the others hold the whole hash space (at their next look
after a graceful stop, once the Lease has expired after an abrupt death; slower is a
violation), then the same two coming back without waiting. Each stays down up to a lease
duration more (seeded). The group's informers select `chaos/tier`, which every pod carries, so
that their requests can be told apart in the server's log: the relist and watch-restart figures
below are the factory's alone.

Invariants, checked continuously: every handler's calls form a valid history per key (no add
while the key is held, no update or delete of a key not held, an update's old object is the one
last heard, versions only grow, an incarnation's delete arrives before a new incarnation of the
name is heard); no cached object is ahead of the server or goes back; no handler but the slow
one ever has a notification waiting as long as the slow handler's stall; memory follows what is
held (below); no panic but the deliberate ones; no hash range is acted on by two replicas of the
group at once (a recording `ShardOwner` around each replica's owner, shared by the group, counts
a range as acted on from the moment `set_ranges` is called with it until a call without it has
returned, and a replica that died abruptly as acting on nothing once its informer has stopped);
no replica keeps a pod outside the ranges its membership holds for a lease duration, or caches
one ahead of the server. Every 60 s (and at the end) writes and faults pause, and within 60 s
every cache, and what every handler believes, must equal the server's pods for its filter (keys,
uids and resourceVersions): a delete that never reached a handler leaves it holding the key.
Every deliberate panic must have been caught and counted. Once the restart under way has brought
its replica back, the group must have every replica up, holding ranges that cover the hash space
exactly once, each caching only pods of its ranges, and its caches together must equal the
server's pods (keys, uids and resourceVersions), none in two caches. During the faults and at
each quiescence, each informer's consistency check lists the server at the cache's own version
and compares keys and resourceVersions (skipped where the server compacted that version away or
a fault failed the list); a mismatch is a violation.

The memory invariant weighs what the soak holds. The `chaos` binary counts its live heap (a
counting global allocator), and before the informers start it decodes the pods the server holds
into each cached form and weighs one object of each: on the simulated cluster's pods, with the
`managedFields` real writers leave, a typed `Pod` takes about 51 KiB, a `Compact<Pod>` 7 KiB and
a `PartialObjectMetadata` 32 KiB (its `managedFields` decoded too). What is held at a sample is
every cached object once, the sharded group's included (its replicas decode their own pods, a
third of them each, so about one more set of typed pods), and every pending notification twice
(an update holds the old object as well as the new one, and nothing else may hold the old). Two
bounds follow: the live heap stays under 96 MiB above its start plus 5/4 of what is held now
(objects grow a little as updates add `managedFields` entries), and resident memory stays under
96 MiB above its start plus 3/2 of the most that was ever held (an allocator keeps freed memory
for reuse, so resident memory follows the high-water mark). A program without the counting
allocator (the short test has one) falls back to 64 KiB per cached object or pending
notification. The 96 MiB covers the simulated server's bounded history, the runtime, buffers,
and a relist's or a consistency check's list in flight.

Relists and watch restarts are counted from the server's request log: lists without a continue
token, and watches, beyond each informer's first (the sharded group's are counted apart, with
its restarts, its hand-overs, which are the calls of its owners' `set_ranges`, and the times a
range was acted on by two replicas at once). Peak RSS is the whole process, the simulated
server included (its history is capped at 2,000 events and compacted every 20 s). The soak is
built with the dev profile (dependencies optimised, as `cargo test` builds them) and was run on
a shared 2-core machine beside other work (builds, benchmarks, other seeds), so settle times
and lags run long.

What the soak found, each fixed with a regression test: a label selector whose value is a
keyword (`chaos/tier=in`) was refused with 400 (`kinformer-core`'s parser; Kubernetes reads `in`
and `notin` as values there); and a pod deleted and created again under the same name while the
watch was away reached the handlers, after the relist, as an update from the old pod to the new
one, so the old pod's delete never arrived (now a tombstone and an add; see semantics.md); and
a slow handler catching up took some 5,000 notifications as one batch and kept the objects of
all it had handled (the pods its updates replaced, about 120 MiB) until the whole batch was
done, past the end of the quiescence that waited for it, over the live-heap bound (now handed
back every 64 notifications, and dropped on the handler's thread past 256 that no push took:
`kinformer-shared-informer`'s `a_long_batch_lets_go_of_what_it_has_handled_as_it_goes`).

`cargo test -p kinformer-benches --test chaos` runs 8 s of the same soak with seed 1, in two
phases of 4 s: at least a graceful stop and an abrupt death of a replica of the sharded group,
each followed by the others' take-over.
The blocks below are written by the command; replay a seed with the command it shows.
";

/// `doc` with the chaos section holding `block` for `seed` (replacing that seed's block, other
/// seeds' blocks kept, in seed order). A missing section is appended; a missing file is `""`.
pub fn write_block(doc: &str, seed: u64, block: &str) -> String {
    let (before, section, after) = match (doc.find(BEGIN), doc.find(END)) {
        (Some(b), Some(e)) if b < e => (&doc[..b], &doc[b + BEGIN.len()..e], &doc[e + END.len()..]),
        _ => (doc, "", ""),
    };
    let mut blocks = blocks(section);
    blocks.retain(|(s, _)| *s != seed);
    blocks.push((seed, block.trim().to_owned()));
    blocks.sort_by_key(|(s, _)| *s);
    let mut out = String::new();
    if before.is_empty() {
        out.push_str("# Reliability\n\nHow kinformer is shown to keep its promises under faults, bad input and hostile servers.\n\n");
    } else {
        out.push_str(before);
        if !before.ends_with("\n\n") {
            out.push_str(if before.ends_with('\n') { "\n" } else { "\n\n" });
        }
    }
    out.push_str(BEGIN);
    out.push('\n');
    out.push_str(INTRO);
    for (s, b) in &blocks {
        out.push_str(&format!(
            "\n<!-- chaos:seed={s} -->\n{b}\n<!-- chaos:seed={s}:end -->\n"
        ));
    }
    out.push_str(END);
    if after.is_empty() {
        out.push('\n');
    } else {
        out.push_str(after);
    }
    out
}

/// The per-seed blocks of a chaos section.
fn blocks(section: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut rest = section;
    while let Some(start) = rest.find("<!-- chaos:seed=") {
        let tail = &rest[start + "<!-- chaos:seed=".len()..];
        let Some(close) = tail.find(" -->") else {
            break;
        };
        let Ok(seed) = tail[..close].parse::<u64>() else {
            break;
        };
        let end_marker = format!("<!-- chaos:seed={seed}:end -->");
        let body = &tail[close + " -->".len()..];
        let Some(end) = body.find(&end_marker) else {
            break;
        };
        out.push((seed, body[..end].trim().to_owned()));
        rest = &body[end + end_marker.len()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_replaced_per_seed_and_the_rest_of_the_file_is_kept() {
        let first = write_block("", 2, "two");
        assert!(first.starts_with("# Reliability"));
        let doc = format!("{first}\n<!-- fuzz:begin -->\nfuzz figures\n<!-- fuzz:end -->\n");
        let doc = write_block(&doc, 1, "one");
        let doc = write_block(&doc, 2, "two again");
        assert_eq!(blocks(&doc), [(1, "one".into()), (2, "two again".into())]);
        assert!(doc.contains("<!-- fuzz:begin -->\nfuzz figures\n<!-- fuzz:end -->"));
        assert_eq!(doc.matches(BEGIN).count(), 1);
        assert_eq!(
            write_block(&doc, 2, "two again"),
            doc,
            "writing the same is a fixed point"
        );
        // A file without the section gets it appended.
        let other = write_block("# Reliability\n\nother text\n", 5, "five");
        assert!(other.starts_with("# Reliability\n\nother text\n\n<!-- chaos:begin -->"));
    }
}
