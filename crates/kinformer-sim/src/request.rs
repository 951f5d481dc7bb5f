//! What a request asks for, read from its URL and headers: the decoded query, the object or
//! collection a resource path names, the selectors of a list or watch, resource versions, and
//! the headers that choose how the answer is encoded.

use std::borrow::Cow;

use http::header;
use kinformer_core::{FieldSelector, LabelSelector, Scope, Status};

use crate::shard::{ShardField, ShardSelector, shard_hash};
use crate::state::Shared;
use crate::store::{ResourceInfo, Stored, Write, status};
use crate::validation::{FieldError, invalid_list_options};

/// A decoded URL query.
#[derive(Debug, Default)]
pub(crate) struct Query(pub(crate) Vec<(String, String)>);

impl Query {
    pub(crate) fn parse(q: &str) -> Self {
        Self(
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (decode(k), decode(v))
                })
                .collect(),
        )
    }

    /// The first value of a parameter; empty values count as absent.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Which object or collection a resource path names.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) info: ResourceInfo,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) watch_path: bool,
    /// The request names the object's `/status` subresource.
    pub(crate) status: bool,
    /// The request names a namespace's `/finalize` subresource.
    pub(crate) finalize: bool,
}

impl Target {
    /// Which write a PUT or PATCH of this target is.
    pub(crate) fn write(&self) -> Write {
        if self.status {
            Write::Status
        } else if self.finalize {
            Write::Finalize
        } else {
            Write::Object
        }
    }
}

fn not_served() -> Status {
    status(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

pub(crate) fn parse_target(
    shared: &Shared,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Target, Status> {
    let (watch_path, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let store = &shared.store;
    let lookup = |plural: &str| {
        store
            .resource(group, plural)
            .filter(|i| i.api.version == version)
    };
    let (info, namespace, tail) = match rest {
        ["namespaces", ns, plural, tail @ ..] if !matches!(*plural, "status" | "finalize") => {
            let info = lookup(plural).ok_or_else(not_served)?;
            if info.api.scope == Scope::Cluster {
                return Err(not_served());
            }
            (info, Some((*ns).to_owned()), tail)
        }
        [plural, tail @ ..] => (lookup(plural).ok_or_else(not_served)?, None, tail),
        [] => return Err(not_served()),
    };
    let (name, status, finalize) = match tail {
        [] => (None, false, false),
        [name] => (Some((*name).to_owned()), false, false),
        // Only kinds served with a status subresource have the path.
        [name, "status"] if info.status_subresource && !watch_path => {
            (Some((*name).to_owned()), true, false)
        }
        // Namespaces' `/finalize` (`pkg/registry/core/namespace/storage/storage.go`).
        [name, "finalize"] if !info.custom && info.api.plural == "namespaces" && !watch_path => {
            (Some((*name).to_owned()), false, true)
        }
        _ => return Err(not_served()),
    };
    Ok(Target {
        info,
        namespace,
        name,
        watch_path,
        status,
        finalize,
    })
}

/// Which objects a list or watch selects: a namespace, a label selector, a field selector, and
/// a shard selector where the server reads one.
#[derive(Debug)]
pub(crate) struct Filter {
    pub(crate) namespace: Option<String>,
    pub(crate) label: LabelSelector,
    pub(crate) field: FieldSelector,
    /// The request's `shardSelector`, where the server honours it
    /// ([`SimConfig::sharded_list_and_watch`](crate::SimConfig::sharded_list_and_watch)).
    pub(crate) shard: Option<ShardSelector>,
}

impl Filter {
    /// The selectors of a list, watch or delete-collection. `shards`: whether the server reads
    /// `shardSelector`; one that does not ignores it, however malformed, as an unknown parameter.
    pub(crate) fn from_query(
        info: &ResourceInfo,
        namespace: Option<String>,
        q: &Query,
        shards: bool,
    ) -> Result<Self, Status> {
        let label: LabelSelector =
            q.get("labelSelector")
                .unwrap_or_default()
                .parse()
                .map_err(|e| {
                    status(
                        400,
                        "BadRequest",
                        format!("unable to parse requirement: {e}"),
                    )
                })?;
        let field: FieldSelector = q
            .get("fieldSelector")
            .unwrap_or_default()
            .parse()
            .map_err(|e| status(400, "BadRequest", format!("invalid field selector: {e}")))?;
        if let Some(r) = field
            .requirements()
            .iter()
            .find(|r| !info.supports_field(&r.field))
        {
            return Err(status(
                400,
                "BadRequest",
                format!("field label not supported: {}", r.field),
            ));
        }
        if !shards && let Some(s) = q.get("shardSelector") {
            tracing::debug!(
                selector = s,
                "shardSelector ignored: the server is not 1.36 or later with the \
                 ShardedListAndWatch gate on"
            );
        }
        // Validated with the rest of the list options, after the selectors are decoded
        // (a malformed label or field selector is a 400 first).
        let shard = q
            .get("shardSelector")
            .filter(|_| shards)
            .map(|s| {
                ShardSelector::parse(s).map_err(|why| {
                    invalid_list_options(&[FieldError::invalid(
                        "shardSelector",
                        s,
                        &why.to_string(),
                    )])
                })
            })
            .transpose()?;
        Ok(Self {
            namespace,
            label,
            field,
            shard,
        })
    }

    /// Label, field and shard selectors only (the namespace is checked apart).
    pub(crate) fn selects(&self, o: &Stored) -> bool {
        self.label.matches(&o.labels)
            && self.field.matches(|f| o.field(f).map(Cow::Borrowed))
            && self.shard.as_ref().is_none_or(|s| {
                s.selects(match s.field() {
                    ShardField::Uid => o.uid_hash,
                    ShardField::Namespace => shard_hash(&o.namespace),
                })
            })
    }

    pub(crate) fn in_namespace(&self, o: &Stored) -> bool {
        self.namespace.as_deref().is_none_or(|ns| o.namespace == ns)
    }

    pub(crate) fn matches(&self, o: &Stored) -> bool {
        self.in_namespace(o) && self.selects(o)
    }

    /// No selector at all: the list can count what it did not return.
    pub(crate) fn is_everything(&self) -> bool {
        self.label.is_everything() && self.field.is_everything() && self.shard.is_none()
    }

    /// The shard selector applied, which list responses echo in `metadata.shardInfo`.
    pub(crate) fn shard_selector(&self) -> Option<&str> {
        self.shard.as_ref().map(ShardSelector::as_str)
    }
}

/// Waits (bounded by the configured wait) for the store to reach `rv`.
pub(crate) async fn wait_for_version(shared: &Shared, rv: u64) -> bool {
    let mut rx = shared.store.subscribe();
    tokio::time::timeout(shared.config.too_large_wait, rx.wait_for(|cur| *cur >= rv))
        .await
        .is_ok_and(|r| r.is_ok())
}

pub(crate) fn parse_rv(s: &str) -> Result<u64, Status> {
    s.parse().map_err(|_| {
        status(
            400,
            "BadRequest",
            format!("invalid resource version: {s:?}"),
        )
    })
}

/// `timeoutSeconds`, if given: a whole number of seconds, or 400 as the parameter codec answers
/// anything else (`endpoints/handlers/get.go`, `listOpts`). Zero and negative numbers are
/// accepted; what they mean is the watch's business.
pub(crate) fn timeout_seconds(q: &Query) -> Result<Option<i64>, Status> {
    q.get("timeoutSeconds")
        .map(|t| {
            t.parse::<i64>().map_err(|_| {
                status(
                    400,
                    "BadRequest",
                    format!("timeoutSeconds: invalid value {t:?}: not an integer"),
                )
            })
        })
        .transpose()
}

/// Whether the client accepts gzip (`Accept-Encoding: gzip`, not with `q=0`).
pub(crate) fn accepts_gzip(parts: &http::request::Parts) -> bool {
    parts
        .headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut params = coding.split(';').map(str::trim);
            params
                .next()
                .is_some_and(|c| c.eq_ignore_ascii_case("gzip"))
                && !params.any(|p| {
                    p.strip_prefix("q=")
                        .and_then(|q| q.parse::<f32>().ok())
                        .is_some_and(|q| q == 0.0)
                })
        })
}

/// The `Accept` header, all of its values joined.
pub(crate) fn accept_header(parts: &http::request::Parts) -> Option<String> {
    let values: Vec<&str> = parts
        .headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join(","))
}

/// Refuses a request body in a media type the sim cannot decode (protobuf, CBOR), with the 415 a
/// server without that serializer answers.
pub(crate) fn check_body_type(parts: &http::request::Parts) -> Result<(), Status> {
    let ct = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let media = ct.split(';').next().unwrap_or_default().trim();
    if media.is_empty() || media == "application/json" || media.ends_with("+json") {
        return Ok(());
    }
    Err(status(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: application/json (got {ct:?})"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode() {
        let q = Query::parse("labelSelector=app%3Dweb%2Ctier+in+%28a%2Cb%29&watch=1&limit=&x=%zz");
        assert_eq!(q.get("labelSelector"), Some("app=web,tier in (a,b)"));
        assert!(q.flag("watch"));
        assert_eq!(q.get("limit"), None);
        assert_eq!(q.get("x"), Some("%zz"));
    }
}
