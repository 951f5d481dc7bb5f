//! The merge: many partitions' event streams become one stream for one cache.
//!
//! Each partition (a shard grant, a namespace) runs its own reflector. The first lists of the
//! partitions there at the start form one relist of the whole cache; after that, a partition's
//! relist cannot replace the cache (the other partitions' objects are in it too), so it is
//! turned into adds, updates and, at its end, deletes of the objects of that partition the list
//! lacked. Every object is the responsibility of at most one partition (their scopes are
//! disjoint); events about objects outside their partition's scope are dropped.

use std::collections::{BTreeSet, VecDeque};
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use futures_util::Stream;
use kinformer_core::shard::ShardRanges;
use kinformer_core::{Object, ObjectKey, ResourceVersion, StoreEvent};
use tokio::sync::{mpsc, oneshot};

/// A partition's (or the namespace watch's) events.
pub(crate) type Events<K> = Pin<Box<dyn Stream<Item = StoreEvent<K>> + Send>>;

/// The part of the objects one partition is responsible for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The objects whose hash lies in these ranges.
    Shard(ShardRanges),
    /// The objects of one namespace.
    Namespace(String),
}

impl Scope {
    fn covers<K: Object>(&self, object: &K) -> bool {
        match self {
            Self::Shard(ranges) => ranges.contains(object),
            Self::Namespace(ns) => object.namespace() == Some(ns.as_str()),
        }
    }
}

/// Makes the event stream of a partition (its reflector) for a scope; the number tells the
/// partitions apart (in logs, and in the seed of their jitter).
pub(crate) type Spawn<K> = Box<dyn Fn(&Scope, u64) -> Events<K> + Send>;

/// A change of what the merge covers, from a handle.
pub(crate) enum Command {
    /// Own these shard ranges from now on.
    Shards(ShardRanges, oneshot::Sender<()>),
    /// Cover these namespaces from now on.
    Namespaces(BTreeSet<String>, oneshot::Sender<()>),
}

/// A change of the namespace set seen by a namespace label selector's watch.
pub(crate) enum NamespaceEvent {
    /// A list of the selected namespaces begins.
    ListBegin,
    /// Names of the list begun last.
    ListPage(Vec<String>),
    /// The list is complete.
    ListEnd,
    /// A namespace is selected (created, or relabelled into the selector).
    Selected(String),
    /// A namespace is no longer selected (deleted, or relabelled out).
    Unselected(String),
}

pub(crate) type NamespaceEvents = Pin<Box<dyn Stream<Item = NamespaceEvent> + Send>>;

enum Phase {
    /// In the first list of the whole cache: the keys this partition's list has brought.
    Initial {
        seen: HashSet<ObjectKey>,
        done: bool,
    },
    /// Watching.
    Live,
    /// In a later list of its own: the keys it has brought so far.
    Relisting(HashSet<ObjectKey>),
}

struct Partition<K> {
    number: u64,
    scope: Scope,
    events: Events<K>,
    phase: Phase,
    /// The version the partition has caught up to.
    reached: Option<ResourceVersion>,
    /// An event held back while the first list of the whole cache is unfinished.
    held: Option<StoreEvent<K>>,
    ended: bool,
}

enum Step<K> {
    Command(Command),
    Namespace(NamespaceEvent),
    /// The namespace selector's watch ended: the set stays as it is.
    NamespacesEnded,
    Event(usize, StoreEvent<K>),
    Ended(usize),
}

pub(crate) struct Merge<K> {
    partitions: Vec<Partition<K>>,
    spawn: Spawn<K>,
    numbers: u64,
    /// What the emitted events leave in the cache once applied: the merge's own view, so that
    /// its deletes never depend on how far the consumer has got.
    known: HashMap<ObjectKey, Arc<K>>,
    out: VecDeque<StoreEvent<K>>,
    /// The first list of the whole cache is unfinished.
    initial: bool,
    commands: mpsc::UnboundedReceiver<Command>,
    namespace_events: Option<NamespaceEvents>,
    /// The namespaces a selector's list is gathering, and whether that first list is done.
    namespace_list: Option<BTreeSet<String>>,
    namespaces_known: bool,
    /// The highest bookmark sent: the lowest version every partition has reached.
    bookmarked: Option<u64>,
    cursor: usize,
}

impl<K: Object + Send + Sync + 'static> Merge<K> {
    /// A merge over `scopes`, or over the namespaces `namespace_events` selects.
    pub(crate) fn new(
        scopes: Vec<Scope>,
        spawn: Spawn<K>,
        commands: mpsc::UnboundedReceiver<Command>,
        namespace_events: Option<NamespaceEvents>,
    ) -> Self {
        let mut merge = Self {
            partitions: Vec::new(),
            spawn,
            numbers: 0,
            known: HashMap::new(),
            out: VecDeque::new(),
            initial: true,
            commands,
            namespaces_known: namespace_events.is_none(),
            namespace_events,
            namespace_list: None,
            bookmarked: None,
            cursor: 0,
        };
        merge.out.push_back(StoreEvent::RelistBegin);
        for scope in scopes {
            merge.add_partition(scope);
        }
        merge.maybe_finish_initial();
        merge
    }

    /// The merged events, as a stream.
    pub(crate) fn into_stream(self) -> impl Stream<Item = StoreEvent<K>> + Send {
        futures_util::stream::unfold(self, |mut merge| async move {
            let event = merge.next().await;
            Some((event, merge))
        })
    }

    async fn next(&mut self) -> StoreEvent<K> {
        loop {
            if let Some(event) = self.out.pop_front() {
                return event;
            }
            let step = poll_fn(|cx| self.poll_step(cx)).await;
            match step {
                Step::Command(Command::Shards(owned, done)) => {
                    self.set_shards(&owned);
                    let _ = done.send(());
                }
                Step::Command(Command::Namespaces(names, done)) => {
                    self.set_namespaces(&names);
                    let _ = done.send(());
                }
                Step::Namespace(event) => self.namespace_event(event),
                Step::NamespacesEnded => {
                    tracing::warn!(
                        "the namespace selector's watch ended; the namespace set stays as it is"
                    );
                    self.namespaces_known = true;
                    // A list cut short proves no namespace gone, only those it named selected.
                    if let Some(listed) = self.namespace_list.take() {
                        let mut names = self.namespaces();
                        names.extend(listed);
                        self.set_namespaces(&names);
                    }
                    self.maybe_finish_initial();
                }
                Step::Event(i, event) => self.partition_event(i, event),
                Step::Ended(i) => {
                    tracing::warn!(
                        partition = self.partitions[i].number,
                        "a partition's events ended; its objects stay cached as they are"
                    );
                    self.partitions[i].ended = true;
                    if let Phase::Initial { done, .. } = &mut self.partitions[i].phase {
                        *done = true;
                    }
                    self.maybe_finish_initial();
                }
            }
        }
    }

    fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<Step<K>> {
        if let Poll::Ready(Some(command)) = self.commands.poll_recv(cx) {
            return Poll::Ready(Step::Command(command));
        }
        if let Some(events) = &mut self.namespace_events
            && let Poll::Ready(event) = events.as_mut().poll_next(cx)
        {
            match event {
                Some(event) => return Poll::Ready(Step::Namespace(event)),
                None => {
                    self.namespace_events = None;
                    return Poll::Ready(Step::NamespacesEnded);
                }
            }
        }
        let n = self.partitions.len();
        for turn in 0..n {
            let i = (self.cursor + turn) % n;
            let p = &mut self.partitions[i];
            if p.ended || p.held.is_some() {
                continue;
            }
            if let Poll::Ready(event) = p.events.as_mut().poll_next(cx) {
                self.cursor = i + 1;
                return Poll::Ready(match event {
                    Some(event) => Step::Event(i, event),
                    None => Step::Ended(i),
                });
            }
        }
        Poll::Pending
    }

    fn add_partition(&mut self, scope: Scope) {
        self.numbers += 1;
        let number = self.numbers;
        tracing::debug!(partition = number, ?scope, "a partition starts");
        let events = (self.spawn)(&scope, number);
        let phase = if self.initial {
            Phase::Initial {
                seen: HashSet::new(),
                done: false,
            }
        } else {
            Phase::Live
        };
        self.partitions.push(Partition {
            number,
            scope,
            events,
            phase,
            reached: None,
            held: None,
            ended: false,
        });
    }

    fn emit(&mut self, event: StoreEvent<K>) {
        match &event {
            StoreEvent::Added(o) | StoreEvent::Modified(o) => {
                self.known.insert(o.key(), Arc::clone(o));
            }
            StoreEvent::Deleted(o) => {
                self.known.remove(&o.key());
            }
            StoreEvent::RelistPage(page) => {
                for o in page {
                    self.known.insert(o.key(), Arc::clone(o));
                }
            }
            _ => {}
        }
        self.out.push_back(event);
    }

    /// Deletes of what is known that no partition covers any more. One look per object,
    /// whatever the number of partitions: the namespaces covered as a set, the ranges as one.
    fn sweep_uncovered(&mut self) {
        let mut namespaces: HashSet<&str> = HashSet::new();
        let mut ranges: Option<ShardRanges> = None;
        for p in &self.partitions {
            match &p.scope {
                Scope::Namespace(ns) => {
                    namespaces.insert(ns);
                }
                Scope::Shard(r) => {
                    ranges = Some(ranges.map_or_else(|| r.clone(), |all| all.union(r)));
                }
            }
        }
        let covered = |o: &K| {
            o.namespace().is_some_and(|ns| namespaces.contains(ns))
                || ranges.as_ref().is_some_and(|r| r.contains(o))
        };
        let mut gone: Vec<Arc<K>> = self
            .known
            .values()
            .filter(|o| !covered(o))
            .cloned()
            .collect();
        // In key order, so that a run replays the same.
        gone.sort_by_cached_key(|o| o.key());
        for o in gone {
            self.emit(StoreEvent::Deleted(o));
        }
    }

    /// Deletes of what partition `i` is responsible for that its list lacked.
    fn sweep_unlisted(&mut self, i: usize, seen: &HashSet<ObjectKey>) {
        let mut gone: Vec<Arc<K>> = self
            .known
            .iter()
            .filter(|(key, o)| !seen.contains(*key) && self.partitions[i].scope.covers(&***o))
            .map(|(_, o)| Arc::clone(o))
            .collect();
        gone.sort_by_cached_key(|o| o.key());
        for o in gone {
            self.emit(StoreEvent::Deleted(o));
        }
    }

    fn partition_event(&mut self, i: usize, event: StoreEvent<K>) {
        if !self.initial {
            self.live_event(i, event);
            return;
        }
        let p = &mut self.partitions[i];
        let Phase::Initial { seen, done } = &mut p.phase else {
            unreachable!("partitions begin in the initial phase while it lasts");
        };
        if *done {
            p.held = Some(event);
            return;
        }
        match event {
            // A list begun again: the keys of the one before may be gone; the sweep at the end
            // of the whole list deletes what this one lacks.
            StoreEvent::RelistBegin | StoreEvent::RelistAbandoned => seen.clear(),
            StoreEvent::RelistPage(page) => {
                let page: Vec<Arc<K>> = page.into_iter().filter(|o| p.scope.covers(&**o)).collect();
                seen.extend(page.iter().map(|o| o.key()));
                self.emit(StoreEvent::RelistPage(page));
            }
            StoreEvent::RelistEnd(rv) => {
                *done = true;
                p.reached = Some(rv);
                self.maybe_finish_initial();
            }
            other => p.held = Some(other),
        }
    }

    fn live_event(&mut self, i: usize, event: StoreEvent<K>) {
        match event {
            StoreEvent::RelistBegin => self.partitions[i].phase = Phase::Relisting(HashSet::new()),
            StoreEvent::RelistPage(page) => {
                for o in page {
                    if !self.partitions[i].scope.covers(&*o) {
                        continue;
                    }
                    let key = o.key();
                    let event = if self.known.contains_key(&key) {
                        StoreEvent::Modified(o)
                    } else {
                        StoreEvent::Added(o)
                    };
                    match &mut self.partitions[i].phase {
                        Phase::Relisting(seen) => {
                            seen.insert(key);
                        }
                        phase => *phase = Phase::Relisting(HashSet::from_iter([key])),
                    }
                    self.emit(event);
                }
            }
            StoreEvent::RelistEnd(rv) => {
                if let Phase::Relisting(seen) =
                    std::mem::replace(&mut self.partitions[i].phase, Phase::Live)
                {
                    self.sweep_unlisted(i, &seen);
                } else {
                    // An empty list: nothing of this partition is left.
                    self.sweep_unlisted(i, &HashSet::new());
                }
                self.partitions[i].reached = Some(rv);
                self.maybe_bookmark();
            }
            StoreEvent::RelistAbandoned => self.partitions[i].phase = Phase::Live,
            StoreEvent::Added(o) | StoreEvent::Modified(o) | StoreEvent::Deleted(o)
                if !self.partitions[i].scope.covers(&*o) => {}
            event @ (StoreEvent::Added(_) | StoreEvent::Modified(_) | StoreEvent::Deleted(_)) => {
                if let Some(rv) = event.synced_resource_version() {
                    self.partitions[i].reached = Some(rv.into());
                }
                self.emit(event);
            }
            StoreEvent::Bookmark(rv) => {
                self.partitions[i].reached = Some(rv);
                self.maybe_bookmark();
            }
            // The informer resyncs its handlers itself.
            StoreEvent::Resync => {}
        }
    }

    /// Ends the first list of the whole cache once every partition's first list is in.
    fn maybe_finish_initial(&mut self) {
        if !self.initial || !self.namespaces_known {
            return;
        }
        if self
            .partitions
            .iter()
            .any(|p| matches!(p.phase, Phase::Initial { done: false, .. }))
        {
            return;
        }
        self.initial = false;
        self.bookmarked = self.lowest_reached().map(|(n, _)| n);
        // Versions that are not numbers cannot be compared: any partition's then.
        let rv = self
            .lowest_reached()
            .map(|(_, rv)| rv)
            .or_else(|| self.partitions.iter().find_map(|p| p.reached.clone()))
            .unwrap_or_else(|| ResourceVersion::from(""));
        self.out.push_back(StoreEvent::RelistEnd(rv));
        for i in 0..self.partitions.len() {
            if let Phase::Initial { seen, .. } =
                std::mem::replace(&mut self.partitions[i].phase, Phase::Live)
            {
                // Only a partition whose list began again can have left stale keys.
                self.sweep_unlisted(i, &seen);
            }
        }
        self.sweep_uncovered();
        for i in 0..self.partitions.len() {
            if let Some(event) = self.partitions[i].held.take() {
                self.live_event(i, event);
            }
        }
    }

    /// The lowest version the running partitions have reached (by number: versions of one
    /// resource come from one etcd revision), when every one has reached one.
    fn lowest_reached(&self) -> Option<(u64, ResourceVersion)> {
        let mut lowest: Option<(u64, ResourceVersion)> = None;
        for p in self.partitions.iter().filter(|p| !p.ended) {
            let rv = p.reached.as_ref()?;
            let n: u64 = rv.as_str().parse().ok()?;
            if lowest.as_ref().is_none_or(|(l, _)| n < *l) {
                lowest = Some((n, rv.clone()));
            }
        }
        lowest
    }

    fn maybe_bookmark(&mut self) {
        if let Some((n, rv)) = self.lowest_reached()
            && self.bookmarked.is_none_or(|b| n > b)
        {
            self.bookmarked = Some(n);
            self.out.push_back(StoreEvent::Bookmark(rv));
        }
    }

    /// After partitions came or went: what no partition covers leaves the cache (at the end of
    /// the first list while it lasts: a delete in the middle of a relist would be undone by it).
    fn after_scope_change(&mut self) {
        if self.initial {
            self.maybe_finish_initial();
        } else {
            self.sweep_uncovered();
        }
    }

    fn set_shards(&mut self, owned: &ShardRanges) {
        let mut covered = ShardRanges::none(owned.key());
        for p in &mut self.partitions {
            if let Scope::Shard(ranges) = &mut p.scope {
                *ranges = ranges.intersection(owned);
                covered = covered.union(ranges);
            }
        }
        self.partitions.retain(|p| match &p.scope {
            Scope::Shard(ranges) if ranges.is_empty() => {
                tracing::debug!(
                    partition = p.number,
                    "a partition's ranges are all given up: it stops"
                );
                false
            }
            _ => true,
        });
        let taken = owned.difference(&covered);
        if !taken.is_empty() {
            self.add_partition(Scope::Shard(taken));
        }
        self.after_scope_change();
    }

    fn set_namespaces(&mut self, names: &BTreeSet<String>) {
        self.partitions.retain(|p| match &p.scope {
            Scope::Namespace(ns) if !names.contains(ns) => {
                tracing::debug!(partition = p.number, namespace = %ns, "a namespace leaves the scope");
                false
            }
            _ => true,
        });
        let present: BTreeSet<String> = self
            .partitions
            .iter()
            .filter_map(|p| match &p.scope {
                Scope::Namespace(ns) => Some(ns.clone()),
                Scope::Shard(_) => None,
            })
            .collect();
        for ns in names.difference(&present) {
            self.add_partition(Scope::Namespace(ns.clone()));
        }
        self.after_scope_change();
    }

    fn namespace_event(&mut self, event: NamespaceEvent) {
        match event {
            NamespaceEvent::ListBegin => self.namespace_list = Some(BTreeSet::new()),
            NamespaceEvent::ListPage(names) => {
                self.namespace_list
                    .get_or_insert_with(BTreeSet::new)
                    .extend(names);
            }
            NamespaceEvent::ListEnd => {
                let names = self.namespace_list.take().unwrap_or_default();
                self.namespaces_known = true;
                self.set_namespaces(&names);
            }
            NamespaceEvent::Selected(ns) => {
                let mut names = self.namespaces();
                if names.insert(ns) {
                    self.set_namespaces(&names);
                }
            }
            NamespaceEvent::Unselected(ns) => {
                let mut names = self.namespaces();
                if names.remove(&ns) {
                    self.set_namespaces(&names);
                }
            }
        }
    }

    fn namespaces(&self) -> BTreeSet<String> {
        self.partitions
            .iter()
            .filter_map(|p| match &p.scope {
                Scope::Namespace(ns) => Some(ns.clone()),
                Scope::Shard(_) => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    //! The merge driven step by step: each partition is a channel the test writes to, and the
    //! merged stream is polled once per step, so every interleaving below is exact.

    use std::sync::Mutex;

    use futures_util::FutureExt;
    use kinformer_core::DynamicObject;
    use kinformer_core::shard::{ShardKey, ShardRange};

    use super::*;

    type Senders = Arc<Mutex<Vec<(Scope, mpsc::UnboundedSender<StoreEvent<DynamicObject>>)>>>;

    struct Rig {
        merge: Merge<DynamicObject>,
        senders: Senders,
        commands: mpsc::UnboundedSender<Command>,
    }

    fn obj(ns: &str, name: &str, rv: u64) -> Arc<DynamicObject> {
        let mut o = DynamicObject::default();
        o.metadata.name = Some(name.into());
        o.metadata.namespace = Some(ns.into());
        o.metadata.uid = Some(format!("{ns}-{name}"));
        o.metadata.resource_version = Some(rv.to_string());
        Arc::new(o)
    }

    fn rig(scopes: Vec<Scope>) -> Rig {
        rig_with(scopes, None)
    }

    fn rig_with(scopes: Vec<Scope>, namespace_events: Option<NamespaceEvents>) -> Rig {
        let senders: Senders = Arc::default();
        let spawn: Spawn<DynamicObject> = {
            let senders = Arc::clone(&senders);
            Box::new(move |scope, _| {
                let (tx, rx) = mpsc::unbounded_channel();
                senders.lock().unwrap().push((scope.clone(), tx));
                Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|e| (e, rx))
                }))
            })
        };
        let (commands, receiver) = mpsc::unbounded_channel();
        Rig {
            merge: Merge::new(scopes, spawn, receiver, namespace_events),
            senders,
            commands,
        }
    }

    impl Rig {
        /// Sends `event` as the partition of `scope`.
        fn send(&self, scope: &Scope, event: StoreEvent<DynamicObject>) {
            let senders = self.senders.lock().unwrap();
            let (_, tx) = senders.iter().rev().find(|(s, _)| s == scope).unwrap();
            tx.send(event).unwrap();
        }

        /// Everything the merged stream has ready, in the order it sends it, one line each.
        fn drain(&mut self) -> Vec<String> {
            let mut out = Vec::new();
            while let Some(event) = self.merge.next().now_or_never() {
                out.push(match event {
                    StoreEvent::RelistBegin => "begin".to_string(),
                    StoreEvent::RelistPage(p) => format!(
                        "page {}",
                        p.iter()
                            .map(|o| o.key().to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                    StoreEvent::RelistEnd(rv) => format!("end {rv}"),
                    StoreEvent::RelistAbandoned => "abandoned".to_string(),
                    StoreEvent::Added(o) => format!("+{}", o.key()),
                    StoreEvent::Modified(o) => format!("~{}", o.key()),
                    StoreEvent::Deleted(o) => format!("-{}", o.key()),
                    StoreEvent::Bookmark(rv) => format!("bookmark {rv}"),
                    StoreEvent::Resync => "resync".to_string(),
                });
            }
            out
        }

        /// Sends a command and returns what the merged stream sends once it has taken it.
        fn command(&mut self, command: impl FnOnce(oneshot::Sender<()>) -> Command) -> Vec<String> {
            let (done, mut applied) = oneshot::channel();
            self.commands.send(command(done)).unwrap();
            let out = self.drain();
            assert!(applied.try_recv().is_ok(), "the command was not applied");
            out
        }
    }

    fn ns(name: &str) -> Scope {
        Scope::Namespace(name.into())
    }

    fn list(r: &Rig, scope: &Scope, objects: Vec<Arc<DynamicObject>>, rv: &str) {
        r.send(scope, StoreEvent::RelistBegin);
        r.send(scope, StoreEvent::RelistPage(objects));
        r.send(scope, StoreEvent::RelistEnd(rv.into()));
    }

    #[test]
    fn the_first_lists_are_one_list_and_early_watch_events_wait_for_its_end() {
        let mut r = rig(vec![ns("a"), ns("b")]);
        list(&r, &ns("a"), vec![obj("a", "1", 5)], "10");
        r.send(&ns("a"), StoreEvent::Added(obj("a", "2", 11)));
        // Objects of another scope in a page are not this partition's to send.
        r.send(&ns("b"), StoreEvent::RelistBegin);
        r.send(
            &ns("b"),
            StoreEvent::RelistPage(vec![obj("b", "1", 6), obj("x", "9", 6)]),
        );
        let early = r.drain();
        assert_eq!(early, ["begin", "page a/1", "page b/1"]);
        r.send(&ns("b"), StoreEvent::RelistEnd("8".into()));
        // The lowest version of the two lists, then what a waited with.
        assert_eq!(r.drain(), ["end 8", "+a/2"]);
    }

    #[test]
    fn a_later_list_of_one_partition_touches_only_its_own_objects() {
        let mut r = rig(vec![ns("a"), ns("b")]);
        list(&r, &ns("a"), vec![obj("a", "1", 5), obj("a", "2", 5)], "10");
        list(&r, &ns("b"), vec![obj("b", "1", 6)], "10");
        r.drain();
        // a's watch expired: it lists again, and a/2 is gone, a/3 new.
        list(
            &r,
            &ns("a"),
            vec![obj("a", "1", 12), obj("a", "3", 13)],
            "14",
        );
        assert_eq!(r.drain(), ["~a/1", "+a/3", "-a/2"]);
        // An abandoned list deletes nothing.
        r.send(&ns("a"), StoreEvent::RelistBegin);
        r.send(&ns("a"), StoreEvent::RelistPage(vec![obj("a", "1", 12)]));
        r.send(&ns("a"), StoreEvent::RelistAbandoned);
        assert_eq!(r.drain(), ["~a/1"]);
    }

    #[test]
    fn a_first_list_begun_again_leaves_no_stale_key() {
        let mut r = rig(vec![ns("a")]);
        r.send(&ns("a"), StoreEvent::RelistBegin);
        r.send(
            &ns("a"),
            StoreEvent::RelistPage(vec![obj("a", "1", 5), obj("a", "2", 5)]),
        );
        r.send(&ns("a"), StoreEvent::RelistAbandoned);
        list(&r, &ns("a"), vec![obj("a", "1", 7)], "9");
        assert_eq!(
            r.drain(),
            ["begin", "page a/1,a/2", "page a/1", "end 9", "-a/2"]
        );
    }

    #[test]
    fn namespaces_removed_leave_as_deletes_and_added_ones_list_and_join() {
        let mut r = rig(vec![ns("a"), ns("b")]);
        list(&r, &ns("a"), vec![obj("a", "1", 5)], "10");
        list(&r, &ns("b"), vec![obj("b", "1", 6), obj("b", "2", 6)], "10");
        r.drain();
        let out =
            r.command(|done| Command::Namespaces(["a".to_string(), "c".to_string()].into(), done));
        assert_eq!(out, ["-b/1", "-b/2"]);
        // b's partition is gone: what it would still send goes nowhere.
        assert!(
            r.senders
                .lock()
                .unwrap()
                .iter()
                .any(|(s, tx)| *s == ns("b") && tx.is_closed())
        );
        list(&r, &ns("c"), vec![obj("c", "1", 11)], "12");
        r.send(&ns("c"), StoreEvent::Modified(obj("c", "1", 13)));
        assert_eq!(r.drain(), ["+c/1", "~c/1"]);
    }

    #[test]
    fn a_namespace_selector_whose_watch_ends_keeps_its_set_and_the_first_list_ends() {
        // The selector's stream gives one namespace and ends before its list is complete.
        let events: NamespaceEvents = Box::pin(futures_util::stream::iter([
            NamespaceEvent::ListBegin,
            NamespaceEvent::ListPage(vec!["a".to_string()]),
        ]));
        let mut r = rig_with(Vec::new(), Some(events));
        // The set so far is what the merge works with: a's partition lists, and the first list
        // of the cache ends with it instead of waiting for a list end that never comes.
        assert_eq!(r.drain(), ["begin"]);
        list(&r, &ns("a"), vec![obj("a", "1", 5)], "7");
        let out = r.drain();
        assert_eq!(out, ["page a/1", "end 7"]);
    }

    #[test]
    fn bookmarks_follow_the_slowest_partition() {
        let mut r = rig(vec![ns("a"), ns("b")]);
        list(&r, &ns("a"), vec![], "10");
        list(&r, &ns("b"), vec![], "20");
        assert_eq!(r.drain(), ["begin", "page ", "page ", "end 10"]);
        r.send(&ns("b"), StoreEvent::Bookmark("30".into()));
        assert_eq!(r.drain(), Vec::<String>::new());
        r.send(&ns("a"), StoreEvent::Bookmark("25".into()));
        assert_eq!(r.drain(), ["bookmark 25"]);
        // An object's version moves the partition on; the next bookmark says so (one per
        // object would double the events).
        r.send(&ns("a"), StoreEvent::Modified(obj("a", "1", 40)));
        assert_eq!(r.drain(), ["~a/1"]);
        r.send(&ns("b"), StoreEvent::Bookmark("45".into()));
        assert_eq!(r.drain(), ["bookmark 40"]);
    }

    #[test]
    fn ranges_given_up_leave_ranges_taken_get_a_partition_of_their_own() {
        let half = |i: u64| {
            ShardRanges::new(
                ShardKey::Uid,
                ShardRange::new(i << 63, u128::from(i + 1) << 63),
            )
        };
        let objects: Vec<Arc<DynamicObject>> =
            (0..16).map(|i| obj("a", &i.to_string(), 5)).collect();
        let (low, high): (Vec<_>, Vec<_>) = objects
            .iter()
            .cloned()
            .partition(|o| half(0).contains(&**o));
        assert!(!low.is_empty() && !high.is_empty());
        let mut r = rig(vec![Scope::Shard(half(0))]);
        // The server ignored the selector: the page holds everything; only the half is kept.
        list(&r, &Scope::Shard(half(0)), objects.clone(), "10");
        let first = r.drain();
        assert_eq!(first.len(), 3, "{first:?}");
        assert_eq!(
            first[1].matches('/').count(),
            low.len(),
            "{first:?} {low:?}"
        );
        // Swap halves: every low object leaves, a partition for the high half starts.
        let left = r.command(|done| Command::Shards(half(1), done));
        assert_eq!(left.len(), low.len());
        assert!(left.iter().all(|l| l.starts_with('-')));
        list(&r, &Scope::Shard(half(1)), objects, "12");
        let joined = r.drain();
        assert_eq!(joined.len(), high.len() + 1, "{joined:?} {high:?}");
        assert!(joined[..high.len()].iter().all(|l| l.starts_with('+')));
        // The partition that listed is the only one left: its version is the merge's.
        assert_eq!(joined[high.len()], "bookmark 12");
    }
}
