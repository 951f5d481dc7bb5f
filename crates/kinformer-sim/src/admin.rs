//! The admin endpoints: the fault knobs of [`Faults`](crate::Faults) over HTTP, for clients and
//! people outside the process (`kinformer sim --admin`). Served under `/kinformer-sim/admin/`
//! only when [`SimConfig::admin`](crate::SimConfig::admin) is set, behind the same
//! authentication as the API; every action is a `POST`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use hyper::Response;
use kinformer_core::Status;
use serde_json::json;

use crate::faults::{Faults, RequestKind};
use crate::request::Query;
use crate::response::{Body, json_response, status_response};
use crate::state::Shared;
use crate::store::status;
use crate::workload::ChurnConfig;

/// The path prefix of the admin endpoints.
pub(crate) const PREFIX: &str = "kinformer-sim";

fn bad(message: impl Into<String>) -> Status {
    status(400, "BadRequest", message)
}

fn number<T: std::str::FromStr>(q: &Query, key: &str) -> Result<Option<T>, Status> {
    q.get(key)
        .map(|v| {
            v.parse()
                .map_err(|_| bad(format!("{key} must be a number, not {v:?}")))
        })
        .transpose()
}

/// Handles `POST /kinformer-sim/admin/<action>`.
pub(crate) fn route(
    shared: &Arc<Shared>,
    method: &Method,
    action: &str,
    q: &Query,
) -> Response<Body> {
    if method != Method::POST {
        return status_response(&status(
            405,
            "MethodNotAllowed",
            "admin actions are POST requests",
        ));
    }
    match act(shared, action, q) {
        Ok(done) => json_response(
            StatusCode::OK,
            Bytes::from(json!({"action": action, "done": done}).to_string()),
        ),
        Err(s) => status_response(&s),
    }
}

fn act(shared: &Arc<Shared>, action: &str, q: &Query) -> Result<String, Status> {
    let faults = Faults {
        state: Arc::clone(&shared.faults),
        store: shared.store.clone(),
    };
    match action {
        "compact" => {
            faults.compact_now();
            Ok(format!(
                "history compacted at {}",
                shared.store.resource_version()
            ))
        }
        "close-watches" => {
            faults.close_all_watches_now();
            Ok("every open watch ended".to_owned())
        }
        "drop-connections" => {
            faults.drop_all_connections();
            Ok("every connection dropped".to_owned())
        }
        "gone-next-watch" => {
            faults.gone_next_watch();
            Ok("the next watch gets 410 Gone".to_owned())
        }
        "gone-next-continue" => {
            faults.gone_next_continue();
            Ok("the next list with a continue token gets 410 Gone".to_owned())
        }
        "fail" => {
            let code: u16 = number(q, "code")?.ok_or_else(|| bad("code is required"))?;
            if !(400..600).contains(&code) {
                return Err(bad("code must be an HTTP error code (400-599)"));
            }
            let count: usize = number(q, "count")?.unwrap_or(1);
            let retry_after: Option<u32> = number(q, "retryAfter")?;
            let kind = match q.get("kind").unwrap_or("any") {
                "list" => RequestKind::List,
                "watch" => RequestKind::Watch,
                "any" => RequestKind::Any,
                other => {
                    return Err(bad(format!(
                        "kind must be list, watch or any, not {other:?}"
                    )));
                }
            };
            faults.fail_next(kind, code, count, retry_after);
            Ok(format!("the next {count} {kind:?} requests answer {code}"))
        }
        "stall" => {
            let ms: u64 = number(q, "ms")?.ok_or_else(|| bad("ms is required"))?;
            faults.stall_watches(Duration::from_millis(ms));
            Ok(format!("watches stalled for {ms} ms"))
        }
        "churn" => {
            let rate = match q.get("rate") {
                Some(r) => ChurnConfig::parse_rate(r).map_err(|e| bad(e.to_string()))?,
                None => return Err(bad("rate is required (50/s; 0 stops)")),
            };
            let seed: u64 = number(q, "seed")?.unwrap_or(1);
            let churn = (rate > 0.0).then_some(ChurnConfig {
                rate_per_sec: rate,
                seed,
            });
            shared.set_churn(churn);
            Ok(if rate > 0.0 {
                format!("churning at {rate}/s")
            } else {
                "churn stopped".to_owned()
            })
        }
        "clear" => {
            faults.clear();
            Ok("every fault disarmed".to_owned())
        }
        other => Err(status(
            404,
            "NotFound",
            format!(
                "no admin action {other:?}: compact, close-watches, drop-connections, gone-next-watch, gone-next-continue, fail, stall, churn, clear"
            ),
        )),
    }
}
