//! Discovery: which resources an API server serves, read from its resource lists (`/api`,
//! `/api/v1`, `/apis`, `/apis/GROUP/VERSION`), and how a name a person types (`po`, `pods`,
//! `Pod`, `deployments.apps`, `widgets.v1.example.com`) maps to one of them, in kubectl's order.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use kinformer_core::{ApiResource, Scope, validation};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::{Client, Error};

/// One resource the server serves, with the names discovery gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredResource {
    /// Group, version, kind, plural and scope: what [`Api`](crate::Api) needs to list and watch
    /// it.
    pub resource: ApiResource,
    /// The singular name (`pod`); the kind in lower case when the server gives none.
    pub singular: String,
    /// kubectl's short names (`po`), as the server declares them.
    pub short_names: Vec<String>,
    /// The verbs the server allows (`list`, `watch`, ...).
    pub verbs: Vec<String>,
    /// The categories the resource belongs to (`all`).
    pub categories: Vec<String>,
    /// Whether its version is its group's preferred version.
    pub preferred: bool,
}

impl DiscoveredResource {
    /// Whether the server allows `verb` on this resource.
    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }
}

/// The resources an API server serves, in the order kubectl prefers them: the core group first,
/// then the groups in the order the server lists them (its priority order; custom resources
/// come after the built-in groups), and within a group the preferred version first.
///
/// Fetch it with [`Discovery::fetch`] (or [`Discovery::fetch_with`], with a disk cache and
/// per-group bounds), then turn what a person typed into a resource with
/// [`Discovery::resolve`]:
///
/// ```no_run
/// use std::time::Duration;
/// use kinformer_client::{Client, Discovery};
///
/// # async fn run() -> Result<(), kinformer_client::Error> {
/// let client = Client::try_default()?;
/// let discovery = Discovery::fetch(&client, Some(Duration::from_secs(10))).await?;
/// match discovery.resolve("widgets.example.com") {
///     Some(found) => println!("listing {}", found.resource.list_path(None)),
///     None => eprintln!("the server doesn't have a resource type \"widgets.example.com\""),
/// }
/// # Ok(()) }
/// ```
///
/// `/api` and `/apis` are asked for aggregated discovery (`apidiscovery.k8s.io/v2`, every
/// group's resources in one document, as kubectl 1.30 and later ask); a server that does not
/// serve it answers with the plain group lists, and each group version's resource list is then
/// fetched on its own, each within its own bound. A group version whose list cannot be had (an
/// aggregated API that is down or hung, or one the server marks stale) is left out and named in
/// [`failures`](Self::failures), as kubectl carries on without it; `/api` and `/apis`
/// themselves must answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    resources: Vec<DiscoveredResource>,
    failed: Vec<FailedGroupVersion>,
    from_cache: bool,
}

/// A group version discovery could not read, and why.
///
/// ```
/// use kinformer_client::FailedGroupVersion;
///
/// let failed = FailedGroupVersion {
///     group_version: "metrics.k8s.io/v1beta1".into(),
///     reason: "the server is currently unable to handle the request".into(),
/// };
/// assert_eq!(
///     failed.to_string(),
///     "couldn't get resource list for metrics.k8s.io/v1beta1: the server is currently unable \
///      to handle the request"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedGroupVersion {
    /// `GROUP/VERSION`, or `VERSION` for the core group.
    pub group_version: String,
    /// The error, as a line.
    pub reason: String,
}

impl std::fmt::Display for FailedGroupVersion {
    /// kubectl's words for it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "couldn't get resource list for {}: {}",
            self.group_version, self.reason
        )
    }
}

/// How [`Discovery::fetch_with`] fetches: its bounds and its disk cache.
///
/// ```
/// use std::time::Duration;
/// use kinformer_client::DiscoveryOptions;
///
/// let options = DiscoveryOptions {
///     timeout: Some(Duration::from_secs(10)),
///     group_timeout: Some(Duration::from_secs(5)),
///     cache_dir: Some(DiscoveryOptions::cache_dir_for(
///         std::path::Path::new("/home/me/.kube/cache"),
///         "https://10.0.0.1:6443",
///     )),
///     ..DiscoveryOptions::default()
/// };
/// assert_eq!(
///     options.cache_dir.unwrap(),
///     std::path::Path::new("/home/me/.kube/cache/discovery/10.0.0.1_6443")
/// );
/// assert_eq!(options.ttl, DiscoveryOptions::DEFAULT_TTL);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryOptions {
    /// The bound on `/api` and `/apis` together ([`Error::Timeout`] waiting for "the discovery
    /// documents"); `None`: only the client's own bounds.
    pub timeout: Option<Duration>,
    /// The bound on each group version's own resource list (asked for only when the server does
    /// not serve aggregated discovery, or its cache file is stale); a group version that takes
    /// longer is a [`FailedGroupVersion`] and the others are still resolved.
    pub group_timeout: Option<Duration>,
    /// The directory of this server's cache, kubectl's layout
    /// ([`cache_dir_for`](Self::cache_dir_for)): `servergroups.json`, and
    /// `GROUP/VERSION/serverresources.json` per group version (`v1/serverresources.json` for
    /// the core group). `None`: no cache.
    pub cache_dir: Option<PathBuf>,
    /// How long a cache file is used after it was written (its modification time), kubectl's
    /// 6 hours by default.
    pub ttl: Duration,
    /// Fetch everything again, ignoring the cache (and rewriting it): what to do when a name
    /// was not found in a discovery read from the cache.
    pub refresh: bool,
}

impl Default for DiscoveryOptions {
    fn default() -> Self {
        Self {
            timeout: None,
            group_timeout: None,
            cache_dir: None,
            ttl: Self::DEFAULT_TTL,
            refresh: false,
        }
    }
}

impl DiscoveryOptions {
    /// kubectl's time to live of its discovery cache: 6 hours.
    ///
    /// ```
    /// use kinformer_client::DiscoveryOptions;
    ///
    /// assert_eq!(DiscoveryOptions::DEFAULT_TTL.as_secs(), 6 * 3600);
    /// ```
    pub const DEFAULT_TTL: Duration = Duration::from_secs(6 * 3600);

    /// The cache directory kubectl uses for a server: `ROOT/discovery/HOST_PORT`, where
    /// `ROOT` is the cache root (`~/.kube/cache`, [`default_cache_root`](Self::default_cache_root))
    /// and `HOST_PORT` the server URL without its scheme, every character but letters, digits,
    /// `_`, `.`, `/`, `(` and `)` replaced by `_` (`https://10.0.0.1:6443` gives
    /// `10.0.0.1_6443`). A path segment `.` or `..` becomes `_`, so that the directory stays
    /// under `ROOT`, and user information (`user:password@`) is left out.
    ///
    /// ```
    /// use std::path::Path;
    /// use kinformer_client::DiscoveryOptions;
    ///
    /// let dir = DiscoveryOptions::cache_dir_for(Path::new("/c"), "http://h:8080/../x");
    /// assert_eq!(dir, Path::new("/c/discovery/h_8080/_/x"));
    /// ```
    pub fn cache_dir_for(root: &Path, server: &str) -> PathBuf {
        let schemeless = server
            .strip_prefix("https://")
            .or_else(|| server.strip_prefix("http://"))
            .unwrap_or(server);
        // Never a credential in a file name: user information before `@` is dropped.
        let authority_end = schemeless.find('/').unwrap_or(schemeless.len());
        let schemeless = match schemeless[..authority_end].rfind('@') {
            Some(at) => &schemeless[at + 1..],
            None => schemeless,
        };
        let safe: String = schemeless
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '/' | '.' | '(' | ')') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let mut dir = root.join("discovery");
        for segment in safe.split('/').filter(|s| !s.is_empty()) {
            dir.push(if matches!(segment, "." | "..") {
                "_"
            } else {
                segment
            });
        }
        dir
    }

    /// kubectl's cache root: `$KUBECACHEDIR`, else `$HOME/.kube/cache`; `None` without either.
    ///
    /// ```
    /// use kinformer_client::DiscoveryOptions;
    ///
    /// if let Some(root) = DiscoveryOptions::default_cache_root() {
    ///     println!("discovery is cached under {}", root.join("discovery").display());
    /// }
    /// ```
    pub fn default_cache_root() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("KUBECACHEDIR").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(dir));
        }
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
        Some(Path::new(&home).join(".kube").join("cache"))
    }
}

/// What `/api` and `/apis` are asked for: aggregated discovery first, the plain documents
/// otherwise (a server without aggregated discovery ignores the parameters and sends those).
const ACCEPT_AGGREGATED: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

/// `/api`: the core group's versions.
#[derive(Debug, Deserialize)]
struct ApiVersions {
    #[serde(default)]
    versions: Vec<String>,
}

/// `/apis`: the groups and their versions; also the cache's `servergroups.json` (with the core
/// group as the group named `""`, as kubectl writes it).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApiGroupList {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    groups: Vec<ApiGroup>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApiGroup {
    name: String,
    #[serde(default)]
    versions: Vec<GroupVersion>,
    #[serde(skip_serializing_if = "Option::is_none")]
    preferred_version: Option<GroupVersion>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupVersion {
    #[serde(default)]
    group_version: String,
    version: String,
}

/// `/api/v1`, `/apis/GROUP/VERSION`: the resources of one group version; also the cache's
/// `serverresources.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApiResourceList {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    group_version: String,
    #[serde(default)]
    resources: Vec<ApiResourceEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApiResourceEntry {
    name: String,
    #[serde(default)]
    singular_name: String,
    #[serde(default)]
    namespaced: bool,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    short_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    categories: Vec<String>,
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`): every group, each
/// version in order of preference, with its resources.
#[derive(Debug, Deserialize)]
struct GroupDiscoveryList {
    #[serde(default)]
    items: Vec<GroupDiscovery>,
}

#[derive(Debug, Deserialize)]
struct GroupDiscovery {
    #[serde(default)]
    metadata: GroupMeta,
    #[serde(default)]
    versions: Vec<VersionDiscovery>,
}

#[derive(Debug, Default, Deserialize)]
struct GroupMeta {
    #[serde(default)]
    name: String,
}

#[derive(Debug, Deserialize)]
struct VersionDiscovery {
    version: String,
    #[serde(default)]
    resources: Vec<ResourceDiscovery>,
    /// `Current`, or `Stale` when the server could not refresh it (an aggregated API down).
    #[serde(default)]
    freshness: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceDiscovery {
    resource: String,
    #[serde(default)]
    response_kind: Option<ResponseKind>,
    #[serde(default)]
    scope: String,
    #[serde(default)]
    singular_resource: String,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    short_names: Vec<String>,
    #[serde(default)]
    categories: Vec<String>,
    #[serde(default)]
    subresources: Vec<SubresourceDiscovery>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SubresourceDiscovery {
    subresource: String,
    #[serde(default)]
    response_kind: Option<ResponseKind>,
    #[serde(default)]
    verbs: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct ResponseKind {
    #[serde(default)]
    kind: String,
}

/// A resource of aggregated discovery as the plain list has it: the resource, then each of its
/// subresources (`pods/status`), as kubectl writes them to its cache.
fn entries_of(r: ResourceDiscovery) -> Vec<ApiResourceEntry> {
    let namespaced = r.scope == "Namespaced";
    let kind = r.response_kind.map(|k| k.kind).unwrap_or_default();
    let mut entries = Vec::with_capacity(1 + r.subresources.len());
    for sub in r.subresources {
        entries.push(ApiResourceEntry {
            name: format!("{}/{}", r.resource, sub.subresource),
            singular_name: r.singular_resource.clone(),
            namespaced,
            kind: sub.response_kind.map_or_else(|| kind.clone(), |k| k.kind),
            verbs: sub.verbs,
            short_names: Vec::new(),
            categories: Vec::new(),
        });
    }
    entries.insert(
        0,
        ApiResourceEntry {
            name: r.resource,
            singular_name: r.singular_resource,
            namespaced,
            kind,
            verbs: r.verbs,
            short_names: r.short_names,
            categories: r.categories,
        },
    );
    entries
}

/// Whether a response's media type is aggregated discovery (`application/json` with
/// `g=apidiscovery.k8s.io`, `v=v2` and `as=APIGroupDiscoveryList`).
fn is_aggregated(content_type: Option<&str>) -> bool {
    let Some(ct) = content_type else { return false };
    let mut parts = ct.split(';').map(str::trim);
    if !parts
        .next()
        .is_some_and(|t| t.eq_ignore_ascii_case("application/json"))
    {
        return false;
    }
    let (mut g, mut v, mut kind) = (false, false, false);
    for p in parts {
        match p.split_once('=') {
            Some(("g", "apidiscovery.k8s.io")) => g = true,
            Some(("v", "v2")) => v = true,
            Some(("as", "APIGroupDiscoveryList")) => kind = true,
            _ => {}
        }
    }
    g && v && kind
}

/// `GROUP/VERSION`, or `VERSION` for the core group.
fn gv_name(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// One group version to read: where its resources come from.
#[derive(Debug)]
struct Wanted {
    group: String,
    version: String,
    preferred: bool,
    /// Its resources, when aggregated discovery gave them.
    resources: Option<Vec<ApiResourceEntry>>,
    /// Why it failed, when the server already says (stale).
    failed: Option<String>,
}

/// What `/api` or `/apis` answered.
enum Root {
    /// Aggregated: the groups with their resources.
    Aggregated(GroupDiscoveryList),
    /// `/api`'s versions.
    Core(ApiVersions),
    /// `/apis`'s groups.
    Groups(ApiGroupList),
}

impl Discovery {
    /// Fetches every group version's resources, with no cache: `/api` and `/apis` bounded
    /// together by `timeout` ([`Error::Timeout`] when it is hit), and each group version's own
    /// list, when the server does not serve aggregated discovery, bounded by `timeout` too. With
    /// `None`, only the client's own bounds apply (connecting, the response headers, the body's
    /// progress).
    ///
    /// Fails with the error of `/api` or `/apis` (a refused connection, 401, 403, ...); a group
    /// version that fails on its own is skipped, logged (at info) and named in
    /// [`failures`](Self::failures).
    pub async fn fetch(client: &Client, timeout: Option<Duration>) -> Result<Self, Error> {
        let options = DiscoveryOptions {
            timeout,
            group_timeout: timeout,
            ..DiscoveryOptions::default()
        };
        Self::fetch_with(client, &options).await
    }

    /// Fetches every group version's resources as kubectl does: from the disk cache where its
    /// files are younger than the TTL, else from the server (aggregated discovery, or `/api`,
    /// `/apis` and each group version's list), writing what it fetched back to the cache. A
    /// cache that cannot be read or written is logged and otherwise ignored.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use kinformer_client::{Client, Discovery, DiscoveryOptions};
    ///
    /// # async fn run() -> Result<(), kinformer_client::Error> {
    /// let client = Client::try_default()?;
    /// let cache_dir = DiscoveryOptions::default_cache_root()
    ///     .map(|root| DiscoveryOptions::cache_dir_for(&root, client.url()));
    /// let options = DiscoveryOptions {
    ///     timeout: Some(Duration::from_secs(10)),
    ///     group_timeout: Some(Duration::from_secs(5)),
    ///     cache_dir,
    ///     ..DiscoveryOptions::default()
    /// };
    /// let mut discovery = Discovery::fetch_with(&client, &options).await?;
    /// if discovery.resolve("widgets").is_none() && discovery.from_cache() {
    ///     // The cache may predate the resource: ask the server, as kubectl does.
    ///     let refresh = DiscoveryOptions { refresh: true, ..options };
    ///     discovery = Discovery::fetch_with(&client, &refresh).await?;
    /// }
    /// for failed in discovery.failures() {
    ///     eprintln!("{failed}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn fetch_with(client: &Client, options: &DiscoveryOptions) -> Result<Self, Error> {
        let cache = options.cache_dir.as_deref().map(|dir| Cache {
            dir,
            ttl: options.ttl,
        });
        let cached_groups = match (&cache, options.refresh) {
            (Some(c), false) => c.read::<ApiGroupList>(&c.dir.join(GROUPS_FILE)).await,
            _ => None,
        };
        let from_cache = cached_groups.is_some();
        let mut wanted = match cached_groups {
            Some(groups) => {
                tracing::debug!("discovery: groups from the cache");
                wanted_of_groups(groups.groups)
            }
            None => {
                let wanted = Self::fetch_roots(client, options.timeout).await?;
                if let Some(c) = &cache {
                    c.write_groups(&wanted).await;
                }
                wanted
            }
        };
        // The names come from the server (or a file) and become request and file paths: a
        // group that is not a DNS-1123 subdomain, or a version that is not a path segment, is
        // not asked for.
        wanted.retain(|w| {
            let valid = (w.group.is_empty() || validation::is_dns1123_subdomain(&w.group).is_empty())
                && validation::is_valid_path_segment_name(&w.version).is_empty();
            if !valid {
                tracing::warn!(group = %w.group, version = %w.version, "discovery: skipping an invalid group version");
            }
            valid
        });
        let lists = futures_util::future::join_all(wanted.iter_mut().map(|w| {
            let cache = cache.as_ref();
            async move {
                if let Some(reason) = w.failed.take() {
                    return Err(reason);
                }
                let gv = gv_name(&w.group, &w.version);
                if let Some(resources) = w.resources.take() {
                    if let Some(c) = cache {
                        c.write_resources(&gv, &resources).await;
                    }
                    return Ok(resources);
                }
                if let Some(c) = cache.filter(|_| from_cache) {
                    let file = c.dir.join(&gv).join(RESOURCES_FILE);
                    if let Some(list) = c.read::<ApiResourceList>(&file).await {
                        return Ok(list.resources);
                    }
                }
                let resources =
                    fetch_group_version(client, &w.group, &w.version, options.group_timeout)
                        .await
                        .map_err(|e| e.to_string())?;
                if let Some(c) = cache {
                    c.write_resources(&gv, &resources).await;
                }
                Ok(resources)
            }
        }))
        .await;
        let mut discovery = Self {
            from_cache,
            ..Self::default()
        };
        for (w, list) in wanted.into_iter().zip(lists) {
            match list {
                Ok(entries) => discovery.push(&w.group, &w.version, w.preferred, entries),
                Err(reason) => {
                    let failed = FailedGroupVersion {
                        group_version: gv_name(&w.group, &w.version),
                        reason,
                    };
                    tracing::info!("discovery: {failed}");
                    discovery.failed.push(failed);
                }
            }
        }
        tracing::debug!(
            resources = discovery.resources.len(),
            failed = discovery.failed.len(),
            from_cache,
            "discovery done"
        );
        Ok(discovery)
    }

    /// `/api` and `/apis`, at once, bounded together: the group versions to read, with their
    /// resources when the server served aggregated discovery.
    async fn fetch_roots(client: &Client, timeout: Option<Duration>) -> Result<Vec<Wanted>, Error> {
        let work = async {
            let (core, groups) =
                futures_util::future::join(fetch_root(client, "/api"), fetch_root(client, "/apis"))
                    .await;
            Ok::<_, Error>((core?, groups?))
        };
        let (core, groups) = match timeout {
            Some(limit) => {
                tokio::time::timeout(limit, work)
                    .await
                    .map_err(|_| Error::Timeout {
                        waiting_for: "the discovery documents",
                        limit,
                    })??
            }
            None => work.await?,
        };
        let mut wanted = Vec::new();
        for root in [core, groups] {
            match root {
                Root::Aggregated(list) => {
                    for g in list.items {
                        for (i, v) in g.versions.into_iter().enumerate() {
                            let stale = v.freshness == "Stale";
                            wanted.push(Wanted {
                                group: g.metadata.name.clone(),
                                version: v.version,
                                preferred: i == 0,
                                resources: (!stale).then(|| {
                                    v.resources.into_iter().flat_map(entries_of).collect()
                                }),
                                failed: stale.then(|| "stale GroupVersion discovery".to_owned()),
                            });
                        }
                    }
                }
                Root::Core(core) => {
                    for (i, v) in core.versions.into_iter().enumerate() {
                        wanted.push(Wanted {
                            group: String::new(),
                            version: v,
                            preferred: i == 0,
                            resources: None,
                            failed: None,
                        });
                    }
                }
                Root::Groups(list) => wanted.extend(wanted_of_groups(list.groups)),
            }
        }
        Ok(wanted)
    }

    fn push(
        &mut self,
        group: &str,
        version: &str,
        preferred: bool,
        entries: Vec<ApiResourceEntry>,
    ) {
        for r in entries {
            // Subresources (`pods/log`) are not listable types.
            if r.name.contains('/') || r.name.is_empty() {
                continue;
            }
            let scope = if r.namespaced {
                Scope::Namespaced
            } else {
                Scope::Cluster
            };
            let singular = if r.singular_name.is_empty() {
                r.kind.to_ascii_lowercase()
            } else {
                r.singular_name
            };
            self.resources.push(DiscoveredResource {
                resource: ApiResource::new(group, version, &r.kind, &r.name, scope),
                singular,
                short_names: r.short_names,
                verbs: r.verbs,
                categories: r.categories,
                preferred,
            });
        }
    }

    /// A discovery made of these resources, in this order of preference (for tests, and for
    /// callers that cache discovery themselves).
    ///
    /// ```
    /// use kinformer_client::Discovery;
    ///
    /// let empty = Discovery::from_resources(Vec::new());
    /// assert!(empty.resources().is_empty() && empty.failures().is_empty());
    /// ```
    pub fn from_resources(resources: Vec<DiscoveredResource>) -> Self {
        Self {
            resources,
            ..Self::default()
        }
    }

    /// The group versions whose resource lists could not be had, each with its reason
    /// (kubectl's words: [`FailedGroupVersion`]'s `Display`).
    ///
    /// ```
    /// use kinformer_client::Discovery;
    ///
    /// assert!(Discovery::default().failures().is_empty());
    /// ```
    pub fn failures(&self) -> &[FailedGroupVersion] {
        &self.failed
    }

    /// Whether the group list came from the disk cache: a name not found may be newer than
    /// the cache, and worth a [`refresh`](DiscoveryOptions::refresh).
    ///
    /// ```
    /// use kinformer_client::Discovery;
    ///
    /// assert!(!Discovery::default().from_cache());
    /// ```
    pub fn from_cache(&self) -> bool {
        self.from_cache
    }

    /// Every resource served, in order of preference.
    pub fn resources(&self) -> &[DiscoveredResource] {
        &self.resources
    }

    /// The group versions (`metrics.k8s.io/v1beta1`) whose resource lists could not be fetched.
    ///
    /// ```
    /// use kinformer_client::Discovery;
    ///
    /// assert!(Discovery::default().failed_group_versions().is_empty());
    /// ```
    pub fn failed_group_versions(&self) -> Vec<&str> {
        self.failed
            .iter()
            .map(|f| f.group_version.as_str())
            .collect()
    }

    /// The resource `name` stands for, as kubectl resolves it, or `None` when the server serves
    /// nothing by that name.
    ///
    /// `name` is a plural, singular, short name or kind (`pods`, `pod`, `po`, `Pod`), optionally
    /// followed by its group (`deployments.apps`, `widgets.example.com`, `pods.` for the core
    /// group) or by its version and group (`deployments.v1.apps`). Where several resources
    /// answer to the name, the first in the order of preference wins (the core group first);
    /// short names are matched before plural and singular names, then kinds, as kubectl does.
    ///
    /// ```
    /// use kinformer_client::{DiscoveredResource, Discovery};
    /// use kinformer_core::{ApiResource, Scope, validation};
    ///
    /// let widget = DiscoveredResource {
    ///     resource: ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced),
    ///     singular: "widget".into(),
    ///     short_names: vec!["wd".into()],
    ///     verbs: vec!["list".into(), "watch".into()],
    ///     categories: vec![],
    ///     preferred: true,
    /// };
    /// let discovery = Discovery::from_resources(vec![widget]);
    /// for name in ["widgets", "widget", "wd", "Widget", "widgets.example.com", "widgets.v1.example.com"] {
    ///     assert_eq!(discovery.resolve(name).unwrap().resource.plural, "widgets");
    /// }
    /// assert!(discovery.resolve("widgets.apps").is_none());
    /// ```
    pub fn resolve(&self, name: &str) -> Option<&DiscoveredResource> {
        // `resource.version.group` first, then `resource.group` (kubectl's order): the second
        // dot-separated part of `widgets.v1.example.com` may be a version or part of the group.
        let parts: Vec<&str> = name.splitn(3, '.').collect();
        if let [resource, version, group] = parts[..]
            && let Some(found) = self.find(resource, Some(group), Some(version))
        {
            return Some(found);
        }
        match name.split_once('.') {
            Some((resource, group)) => self.find(resource, Some(group), None),
            None => self.find(name, None, None),
        }
    }

    fn find(
        &self,
        name: &str,
        group: Option<&str>,
        version: Option<&str>,
    ) -> Option<&DiscoveredResource> {
        if name.is_empty() {
            return None;
        }
        let lower = name.to_ascii_lowercase();
        let candidates = || {
            self.resources.iter().filter(move |r| {
                group.is_none_or(|g| r.resource.group.eq_ignore_ascii_case(g))
                    && version.is_none_or(|v| r.resource.version == v)
            })
        };
        candidates()
            .find(|r| r.short_names.contains(&lower))
            .or_else(|| candidates().find(|r| r.resource.plural == lower || r.singular == lower))
            .or_else(|| candidates().find(|r| r.resource.kind.eq_ignore_ascii_case(name)))
    }
}

/// The group versions of a group list, in kubectl's order: each group's preferred version
/// first. The group named `""` is the core group (as the cache stores it).
fn wanted_of_groups(groups: Vec<ApiGroup>) -> Vec<Wanted> {
    let mut wanted = Vec::new();
    for g in groups {
        let preferred = g
            .preferred_version
            .map(|p| p.version)
            .or_else(|| g.versions.first().map(|v| v.version.clone()));
        let mut versions: Vec<String> = g.versions.into_iter().map(|v| v.version).collect();
        if let Some(p) = &preferred
            && let Some(at) = versions.iter().position(|v| v == p)
        {
            let p = versions.remove(at);
            versions.insert(0, p);
        }
        for (i, version) in versions.into_iter().enumerate() {
            wanted.push(Wanted {
                group: g.name.clone(),
                version,
                preferred: i == 0,
                resources: None,
                failed: None,
            });
        }
    }
    wanted
}

/// `/api` or `/apis`, asking for aggregated discovery.
async fn fetch_root(client: &Client, path: &'static str) -> Result<Root, Error> {
    let what = if path == "/api" {
        "discovery document /api"
    } else {
        "discovery document /apis"
    };
    let (body, content_type) = client.get_bytes(path, ACCEPT_AGGREGATED).await?;
    let decode = |source| Error::Decode {
        what,
        line: None,
        offset: None,
        source: kinformer_core::Error::Decode { what, source },
    };
    if is_aggregated(content_type.as_deref()) {
        tracing::debug!(path, "aggregated discovery");
        return serde_json::from_slice(&body)
            .map(Root::Aggregated)
            .map_err(decode);
    }
    if path == "/api" {
        serde_json::from_slice(&body)
            .map(Root::Core)
            .map_err(decode)
    } else {
        serde_json::from_slice(&body)
            .map(Root::Groups)
            .map_err(decode)
    }
}

/// One group version's resource list, within `bound`.
async fn fetch_group_version(
    client: &Client,
    group: &str,
    version: &str,
    bound: Option<Duration>,
) -> Result<Vec<ApiResourceEntry>, Error> {
    let path = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let work = client.get_json::<ApiResourceList>(&path, "discovery document");
    let list = match bound {
        Some(limit) => tokio::time::timeout(limit, work)
            .await
            .map_err(|_| Error::Timeout {
                waiting_for: "the group version's discovery document",
                limit,
            })??,
        None => work.await?,
    };
    Ok(list.resources)
}

/// kubectl's cache files.
const GROUPS_FILE: &str = "servergroups.json";
const RESOURCES_FILE: &str = "serverresources.json";

/// The disk cache of one server's discovery.
struct Cache<'a> {
    dir: &'a Path,
    ttl: Duration,
}

impl Cache<'_> {
    /// A cache file, if it exists, is younger than the TTL and decodes.
    async fn read<T: DeserializeOwned>(&self, file: &Path) -> Option<T> {
        let meta = tokio::fs::metadata(file).await.ok()?;
        let age = meta
            .modified()
            .ok()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .unwrap_or_default();
        if age > self.ttl {
            tracing::debug!(file = %file.display(), "discovery cache: expired");
            return None;
        }
        let bytes = tokio::fs::read(file).await.ok()?;
        match serde_json::from_slice(&bytes) {
            Ok(v) => Some(v),
            Err(error) => {
                tracing::debug!(file = %file.display(), %error, "discovery cache: does not decode");
                None
            }
        }
    }

    async fn write_groups(&self, wanted: &[Wanted]) {
        let mut list = ApiGroupList {
            kind: "APIGroupList".to_owned(),
            api_version: "v1".to_owned(),
            groups: Vec::new(),
        };
        for w in wanted {
            let version = GroupVersion {
                group_version: gv_name(&w.group, &w.version),
                version: w.version.clone(),
            };
            match list.groups.iter_mut().find(|g| g.name == w.group) {
                Some(g) => g.versions.push(version),
                None => list.groups.push(ApiGroup {
                    name: w.group.clone(),
                    versions: vec![version.clone()],
                    preferred_version: Some(version),
                }),
            }
        }
        if list.groups.is_empty() {
            return;
        }
        self.write(&self.dir.join(GROUPS_FILE), &list).await;
    }

    async fn write_resources(&self, gv: &str, resources: &[ApiResourceEntry]) {
        // As kubectl: an empty list is not cached.
        if resources.is_empty() {
            return;
        }
        let list = ApiResourceList {
            kind: "APIResourceList".to_owned(),
            api_version: "v1".to_owned(),
            group_version: gv.to_owned(),
            resources: resources.to_vec(),
        };
        self.write(&self.dir.join(gv).join(RESOURCES_FILE), &list)
            .await;
    }

    /// Writes a file as kubectl does: directories 0750, the file 0660, through a temporary file
    /// renamed into place, so a reader never sees half of it.
    async fn write(&self, file: &Path, value: &impl Serialize) {
        let result = async {
            let dir = file.parent().unwrap_or(self.dir);
            let mut builder = tokio::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            builder.mode(0o750);
            builder.create(dir).await?;
            let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("cache");
            let temp = dir.join(format!(
                ".{name}.{}.{}",
                std::process::id(),
                fastrand_suffix()
            ));
            let mut options = tokio::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            options.mode(0o660);
            let written = async {
                let mut f = options.open(&temp).await?;
                tokio::io::AsyncWriteExt::write_all(&mut f, &bytes).await?;
                tokio::io::AsyncWriteExt::flush(&mut f).await?;
                drop(f);
                tokio::fs::rename(&temp, file).await
            }
            .await;
            if written.is_err() {
                let _ = tokio::fs::remove_file(&temp).await;
            }
            written
        }
        .await;
        if let Err(error) = result {
            tracing::debug!(file = %file.display(), %error, "discovery cache: cannot write");
        }
    }
}

/// A suffix that keeps two writers of one process apart.
fn fastrand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(
        group: &str,
        version: &str,
        kind: &str,
        plural: &str,
        short: &[&str],
    ) -> DiscoveredResource {
        DiscoveredResource {
            resource: ApiResource::new(group, version, kind, plural, Scope::Namespaced),
            singular: kind.to_ascii_lowercase(),
            short_names: short.iter().map(|s| (*s).to_owned()).collect(),
            verbs: vec!["list".into(), "watch".into()],
            categories: Vec::new(),
            preferred: true,
        }
    }

    fn sample() -> Discovery {
        Discovery::from_resources(vec![
            entry("", "v1", "Pod", "pods", &["po"]),
            entry("", "v1", "Event", "events", &["ev"]),
            entry("apps", "v1", "Deployment", "deployments", &["deploy"]),
            entry("events.k8s.io", "v1", "Event", "events", &["ev"]),
            // A custom resource that claims a short name the core group has: the core group wins.
            entry("example.com", "v1", "Widget", "widgets", &["wd", "po"]),
            entry("example.com", "v1beta1", "Widget", "widgets", &["wd"]),
            entry("example.com", "v1", "Gadget", "gadgets", &[]),
        ])
    }

    #[test]
    fn names_resolve_in_kubectls_order() {
        let d = sample();
        // (typed, expected group/version/plural)
        for (typed, expected) in [
            ("pods", "/v1/pods"),
            ("pod", "/v1/pods"),
            ("po", "/v1/pods"),
            ("Pod", "/v1/pods"),
            ("PODS", "/v1/pods"),
            ("pods.", "/v1/pods"),
            ("events", "/v1/events"),
            ("ev", "/v1/events"),
            ("events.events.k8s.io", "events.k8s.io/v1/events"),
            ("ev.events.k8s.io", "events.k8s.io/v1/events"),
            ("deploy", "apps/v1/deployments"),
            ("deployments.apps", "apps/v1/deployments"),
            ("deployments.v1.apps", "apps/v1/deployments"),
            ("Deployment.apps", "apps/v1/deployments"),
            ("widgets", "example.com/v1/widgets"),
            ("wd", "example.com/v1/widgets"),
            ("widgets.example.com", "example.com/v1/widgets"),
            ("widgets.v1beta1.example.com", "example.com/v1beta1/widgets"),
            ("gadget", "example.com/v1/gadgets"),
        ] {
            let r = &d
                .resolve(typed)
                .unwrap_or_else(|| panic!("{typed}"))
                .resource;
            assert_eq!(
                format!("{}/{}/{}", r.group, r.version, r.plural),
                expected,
                "{typed}"
            );
        }
        for unknown in [
            "foo",
            "",
            ".",
            "deployments.batch",
            "widgets.v2.example.com",
            "pods.apps",
            "po.example.org",
        ] {
            assert!(d.resolve(unknown).is_none(), "{unknown}");
        }
    }

    #[test]
    fn documents_decode_with_missing_fields() {
        let list: ApiResourceList = serde_json::from_str(
            r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods","namespaced":true,"kind":"Pod"},{"name":"pods/log","namespaced":true,"kind":"Pod"}]}"#,
        )
        .unwrap();
        assert_eq!(list.resources.len(), 2);
        assert!(list.resources[0].short_names.is_empty());
        let groups: ApiGroupList = serde_json::from_str(
            r#"{"groups":[{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}]}]}"#,
        )
        .unwrap();
        assert!(groups.groups[0].preferred_version.is_none());
    }

    #[test]
    fn aggregated_media_types_are_recognised() {
        for yes in [
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            "application/json; g=apidiscovery.k8s.io; v=v2; as=APIGroupDiscoveryList",
            "application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io",
        ] {
            assert!(is_aggregated(Some(yes)), "{yes}");
        }
        for no in [
            "application/json",
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            "text/plain",
        ] {
            assert!(!is_aggregated(Some(no)), "{no}");
        }
        assert!(!is_aggregated(None));
    }

    #[test]
    fn preferred_versions_come_first() {
        let groups: ApiGroupList = serde_json::from_str(
            r#"{"groups":[{"name":"example.com","versions":[{"version":"v1beta1"},{"version":"v1"}],"preferredVersion":{"version":"v1"}}]}"#,
        )
        .unwrap();
        let wanted = wanted_of_groups(groups.groups);
        let order: Vec<(&str, bool)> = wanted
            .iter()
            .map(|w| (w.version.as_str(), w.preferred))
            .collect();
        assert_eq!(order, [("v1", true), ("v1beta1", false)]);
    }
}
