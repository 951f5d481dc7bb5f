//! Discovery: which resources an API server serves, read from its resource lists (`/api`,
//! `/api/v1`, `/apis`, `/apis/GROUP/VERSION`), and how a name a person types (`po`, `pods`,
//! `Pod`, `deployments.apps`, `widgets.v1.example.com`) maps to one of them, in kubectl's order.

use std::time::Duration;

use kinformer_core::{ApiResource, Scope, validation};
use serde::Deserialize;

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
/// Fetch it with [`Discovery::fetch`], then turn what a person typed into a resource with
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
/// A group version whose list cannot be fetched (an aggregated API that is down) is left out and
/// named in [`failed_group_versions`](Self::failed_group_versions), as kubectl carries on
/// without it; `/api` and `/apis` themselves must answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    resources: Vec<DiscoveredResource>,
    failed: Vec<String>,
}

/// `/api`: the core group's versions.
#[derive(Debug, Deserialize)]
struct ApiVersions {
    #[serde(default)]
    versions: Vec<String>,
}

/// `/apis`: the groups and their versions.
#[derive(Debug, Deserialize)]
struct ApiGroupList {
    #[serde(default)]
    groups: Vec<ApiGroup>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApiGroup {
    name: String,
    #[serde(default)]
    versions: Vec<GroupVersion>,
    preferred_version: Option<GroupVersion>,
}

#[derive(Debug, Deserialize)]
struct GroupVersion {
    version: String,
}

/// `/api/v1`, `/apis/GROUP/VERSION`: the resources of one group version.
#[derive(Debug, Deserialize)]
struct ApiResourceList {
    #[serde(default)]
    resources: Vec<ApiResourceEntry>,
}

#[derive(Debug, Deserialize)]
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
    #[serde(default)]
    short_names: Vec<String>,
    #[serde(default)]
    categories: Vec<String>,
}

impl Discovery {
    /// Fetches every group version's resource list: `/api` and `/apis` first, then each list,
    /// all at once. The whole of it is bounded by `timeout` ([`Error::Timeout`] when it is hit);
    /// with `None`, only the client's own bounds apply (connecting, the response headers, the
    /// body's progress).
    ///
    /// Fails with the error of `/api` or `/apis` (a refused connection, 401, 403, ...); a group
    /// version that fails on its own is skipped and logged.
    pub async fn fetch(client: &Client, timeout: Option<Duration>) -> Result<Self, Error> {
        let work = Self::fetch_unbounded(client);
        match timeout {
            Some(limit) => tokio::time::timeout(limit, work)
                .await
                .map_err(|_| Error::Timeout {
                    waiting_for: "the discovery documents",
                    limit,
                })?,
            None => work.await,
        }
    }

    async fn fetch_unbounded(client: &Client) -> Result<Self, Error> {
        let (core, groups) = futures_util::future::join(
            client.get_json::<ApiVersions>("/api", "discovery document /api"),
            client.get_json::<ApiGroupList>("/apis", "discovery document /apis"),
        )
        .await;
        let (core, groups) = (core?, groups?);
        // (group, version, preferred), in kubectl's order of preference.
        let mut wanted: Vec<(String, String, bool)> = Vec::new();
        for (i, v) in core.versions.iter().enumerate() {
            wanted.push((String::new(), v.clone(), i == 0));
        }
        for g in groups.groups {
            let preferred = g
                .preferred_version
                .map(|p| p.version)
                .or_else(|| g.versions.first().map(|v| v.version.clone()));
            if let Some(p) = &preferred {
                wanted.push((g.name.clone(), p.clone(), true));
            }
            for v in g.versions {
                if preferred.as_deref() != Some(v.version.as_str()) {
                    wanted.push((g.name.clone(), v.version, false));
                }
            }
        }
        // The names come from the server and become request paths: a group that is not a
        // DNS-1123 subdomain, or a version that is not a path segment, is not asked for.
        wanted.retain(|(g, v, _)| {
            let valid = (g.is_empty() || validation::is_dns1123_subdomain(g).is_empty())
                && validation::is_valid_path_segment_name(v).is_empty()
                && !v.is_empty();
            if !valid {
                tracing::warn!(group = %g, version = %v, "discovery: skipping an invalid group version");
            }
            valid
        });
        let lists = futures_util::future::join_all(wanted.iter().map(|(g, v, _)| {
            let path = if g.is_empty() {
                format!("/api/{v}")
            } else {
                format!("/apis/{g}/{v}")
            };
            async move {
                client
                    .get_json::<ApiResourceList>(&path, "discovery document")
                    .await
            }
        }))
        .await;
        let mut discovery = Self::default();
        for ((group, version, preferred), list) in wanted.into_iter().zip(lists) {
            let gv = if group.is_empty() {
                version.clone()
            } else {
                format!("{group}/{version}")
            };
            match list {
                Ok(list) => {
                    for r in list.resources {
                        // Subresources (`pods/log`) are not listable types.
                        if r.name.contains('/') {
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
                        discovery.resources.push(DiscoveredResource {
                            resource: ApiResource::new(&group, &version, &r.kind, &r.name, scope),
                            singular,
                            short_names: r.short_names,
                            verbs: r.verbs,
                            categories: r.categories,
                            preferred,
                        });
                    }
                }
                Err(error) => {
                    tracing::warn!(group_version = %gv, %error, "discovery: skipping a group version");
                    discovery.failed.push(gv);
                }
            }
        }
        tracing::debug!(
            resources = discovery.resources.len(),
            failed = discovery.failed.len(),
            "discovery done"
        );
        Ok(discovery)
    }

    /// A discovery made of these resources, in this order of preference (for tests, and for
    /// callers that cache discovery themselves).
    pub fn from_resources(resources: Vec<DiscoveredResource>) -> Self {
        Self {
            resources,
            failed: Vec::new(),
        }
    }

    /// Every resource served, in order of preference.
    pub fn resources(&self) -> &[DiscoveredResource] {
        &self.resources
    }

    /// The group versions (`metrics.k8s.io/v1beta1`) whose resource lists could not be fetched.
    pub fn failed_group_versions(&self) -> &[String] {
        &self.failed
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
}
