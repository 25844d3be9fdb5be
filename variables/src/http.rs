//! The HTTP face: `/v1/var/<path>` and `/v1/vars` as Nomad's agent serves them, plus the
//! Task API socket's authentication, and the request log.
//!
//! Source: contract B.2, B.6 and D, read against `command/agent/variable_endpoint.go` and
//! `command/agent/http.go`:
//! - GET/PUT/POST/DELETE on `/v1/var/<path>` (other methods: 400 "Invalid method"); empty path:
//!   400 "missing variable path"; `GET /v1/vars` lists (other methods: 405);
//! - lock flags are query keys whose value is ignored (`?lock-acquire`, `?lock-acquire=`);
//!   more than one: 400 "multiple lock operations"; with a non-empty `cas`: 400 "CAS can't be
//!   used with lock operations";
//! - the token comes from `X-Nomad-Token`, else `Authorization: Bearer <token>`; the namespace
//!   from `?namespace=` (default `default`);
//! - errors are plain text; `X-Nomad-Index` is set on set/cas/delete answers (the conflict's
//!   `ModifyIndex` on 409, 0 on errors from the server), on lock acquire/release successes and
//!   errors (0) but not on their 409s (the status is written before the deferred header), never
//!   on renew; GET and list also send `X-Nomad-KnownLeader` and `X-Nomad-LastContact`;
//! - the JSON of a lock-acquire or lock-release 409 goes out as `text/plain; charset=utf-8`:
//!   its status is written before `wrap` sets `Content-Type: application/json`, so Go's
//!   `net/http` sniffs the body instead;
//! - like Go's `ServeMux`, a non-canonical path (`//`, `.`, `..`) is answered with a 301 to the
//!   cleaned path, and `/v1/var` with a 301 to `/v1/var/`;
//! - `/v1/acl/...` and `/v1/namespace...` go to the ACL and namespace APIs ([`crate::admin`]);
//! - on the Task API socket every request needs a token: none gives 401 "Unauthorized", an
//!   unknown one (with ACLs on) 403 "Forbidden"; the anonymous policy is never used.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use axum::routing::any;
use serde_json::Value;

use crate::admin::Answer;
use crate::engine::{ApplyOutcome, Engine, HttpError, Op, lock};
use crate::faults::Fault;
use crate::history::{RequestRecord, excerpt};
use crate::wire::{RequestVariable, decode_body};

const MAX_BODY: usize = 16 * 1024 * 1024;

/// Which kind of listener a router serves (recorded in the request log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListenerKind {
    Tcp,
    Unix,
    TaskApi,
}

impl ListenerKind {
    fn name(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Unix => "unix",
            Self::TaskApi => "task-api",
        }
    }
}

#[derive(Clone)]
struct AppState {
    engine: Arc<Engine>,
    kind: ListenerKind,
}

/// The router for one listener.
pub(crate) fn router(engine: Arc<Engine>, kind: ListenerKind) -> Router {
    Router::new()
        .route("/v1/vars", any(respond))
        .route("/v1/var", any(respond))
        .route("/v1/var/", any(respond))
        .route("/v1/var/{*path}", any(respond))
        .fallback(respond)
        .with_state(AppState { engine, kind })
}

/// What to send back.
#[derive(Debug)]
struct Reply {
    status: u16,
    body: ReplyBody,
    index: Option<u64>,
    query_meta: bool,
    location: Option<String>,
    /// The content type Go's `net/http` sniffs, for a body written after an early
    /// `WriteHeader` (lock-operation conflicts).
    sniffed: bool,
}

#[derive(Debug)]
enum ReplyBody {
    Empty,
    Json(Value),
    Text(String),
}

impl Reply {
    fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            body: ReplyBody::Json(body),
            index: None,
            query_meta: false,
            location: None,
            sniffed: false,
        }
    }

    fn text(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            body: ReplyBody::Text(message.into()),
            index: None,
            query_meta: false,
            location: None,
            sniffed: false,
        }
    }

    fn empty(status: u16) -> Self {
        Self {
            status,
            body: ReplyBody::Empty,
            index: None,
            query_meta: false,
            location: None,
            sniffed: false,
        }
    }

    fn error(err: HttpError) -> Self {
        Self::text(err.status, err.message)
    }

    fn with_index(mut self, index: u64) -> Self {
        self.index = Some(index);
        self
    }

    fn sniffed(mut self) -> Self {
        self.sniffed = true;
        self
    }

    fn with_query_meta(mut self, index: u64) -> Self {
        self.index = Some(index);
        self.query_meta = true;
        self
    }

    fn redirect(location: String, method: &Method) -> Self {
        let mut reply = if method == Method::GET || method == Method::HEAD {
            Self::text(
                301,
                format!("<a href=\"{location}\">Moved Permanently</a>.\n\n"),
            )
        } else {
            Self::empty(301)
        };
        reply.location = Some(location);
        reply
    }

    /// The body bytes and content type.
    fn encode(&self) -> (Vec<u8>, Option<&'static str>) {
        match &self.body {
            ReplyBody::Empty => (Vec::new(), None),
            ReplyBody::Json(value) => (
                serde_json::to_vec(value).unwrap_or_default(),
                Some(if self.sniffed {
                    "text/plain; charset=utf-8"
                } else {
                    "application/json"
                }),
            ),
            ReplyBody::Text(text) => {
                let kind = if self.location.is_some() {
                    "text/html; charset=utf-8"
                } else {
                    "text/plain; charset=utf-8"
                };
                (text.clone().into_bytes(), Some(kind))
            }
        }
    }
}

/// The request's query, decoded like Go's `url.Values`.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(raw: &str) -> Self {
        Self(
            url::form_urlencoded::parse(raw.as_bytes())
                .into_owned()
                .collect(),
        )
    }

    /// First value of `key` (`""` if absent), like `Values.Get`.
    fn get(&self, key: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// `parseNamespace`.
    fn namespace(&self) -> String {
        match self.get("namespace") {
            "" => "default".to_string(),
            ns => ns.to_string(),
        }
    }
}

/// `parseToken`: `X-Nomad-Token`, else `Authorization: Bearer <token>`; empty when neither.
pub fn parse_token(headers: &HeaderMap) -> String {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let nomad = text("x-nomad-token");
    if !nomad.is_empty() {
        return nomad.trim().to_string();
    }
    let auth = text("authorization");
    let parts: Vec<&str> = auth.split(' ').collect();
    if parts.len() > 1 && parts[0].eq_ignore_ascii_case("bearer") {
        let value = parts[1..].join(" ");
        return value
            .trim()
            .split(' ')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
    }
    String::new()
}

/// Percent-decodes a URL path; `None` for a malformed escape.
fn percent_decode(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Go `ServeMux`'s `cleanPath`: resolve `.`/`..`, collapse `//`, keep a trailing slash.
fn clean_path(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    let mut cleaned = format!("/{}", segments.join("/"));
    if path.ends_with('/') && cleaned != "/" {
        cleaned.push('/');
    }
    cleaned
}

async fn respond(State(app): State<AppState>, request: Request) -> Response {
    let (at, wall) = (app.engine.clock.now(), app.engine.clock.wall());
    let (parts, body) = request.into_parts();
    let raw_path = parts.uri.path().to_string();
    let raw_query = parts.uri.query().unwrap_or("").to_string();
    let token = parse_token(&parts.headers);
    let (body, reply) = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => {
            let reply = dispatch(&app, &parts.method, &raw_path, &raw_query, &token, &bytes);
            (bytes, reply)
        }
        Err(_) => (Bytes::new(), Reply::text(413, "request body too large")),
    };
    let (bytes, content_type) = reply.encode();
    let record = RequestRecord {
        seq: 0,
        at,
        wall,
        duration: app.engine.clock.now().saturating_duration_since(at),
        listener: app.kind.name(),
        method: parts.method.to_string(),
        path: raw_path,
        query: raw_query,
        status: reply.status,
        token_sent: !token.is_empty(),
        request_body: excerpt(&body),
        response_body: excerpt(&bytes),
    };
    lock(&app.engine.history).push_request(record);
    build_response(&reply, bytes, content_type)
}

fn build_response(reply: &Reply, bytes: Vec<u8>, content_type: Option<&'static str>) -> Response {
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() =
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    if let Some(kind) = content_type {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    }
    if let Some(index) = reply.index {
        headers.insert("x-nomad-index", HeaderValue::from(index));
    }
    if reply.query_meta {
        headers.insert("x-nomad-knownleader", HeaderValue::from_static("true"));
        headers.insert("x-nomad-lastcontact", HeaderValue::from_static("0"));
    }
    if let Some(location) = &reply.location
        && let Ok(value) = HeaderValue::from_str(location)
    {
        headers.insert(header::LOCATION, value);
    }
    response
}

fn dispatch(
    app: &AppState,
    method: &Method,
    raw_path: &str,
    raw_query: &str,
    token: &str,
    body: &[u8],
) -> Reply {
    if app.kind == ListenerKind::TaskApi {
        if token.is_empty() {
            return Reply::text(401, "Unauthorized");
        }
        let acl = app.engine.acl.read().unwrap_or_else(|e| e.into_inner());
        if acl.enabled && !acl.knows(token) {
            return Reply::text(403, "Forbidden");
        }
    }
    let Some(path) = percent_decode(raw_path) else {
        return Reply::text(400, "Bad Request");
    };
    let with_query = |p: String| {
        if raw_query.is_empty() {
            p
        } else {
            format!("{p}?{raw_query}")
        }
    };
    let cleaned = clean_path(&path);
    if cleaned != path {
        return Reply::redirect(with_query(cleaned), method);
    }
    let query = Query::parse(raw_query);
    let request = Ctx {
        engine: &app.engine,
        method,
        query: &query,
        token,
        body,
    };
    if path == "/v1/vars" {
        request.list()
    } else if path == "/v1/var" {
        Reply::redirect(with_query("/v1/var/".to_string()), method)
    } else if let Some(var_path) = path.strip_prefix("/v1/var/") {
        request.variable(var_path)
    } else if let Some(answer) = app.engine.admin(method, &path, token, body) {
        match answer {
            Answer::Json(status, value) => Reply::json(status, value),
            Answer::Text(status, message) => Reply::text(status, message),
            Answer::Written(index) => Reply::empty(200).with_index(index),
        }
    } else {
        Reply::text(404, "404 page not found\n")
    }
}

/// One decoded request.
struct Ctx<'a> {
    engine: &'a Arc<Engine>,
    method: &'a Method,
    query: &'a Query,
    token: &'a str,
    body: &'a [u8],
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LockFlag {
    Acquire,
    Renew,
    Release,
}

impl Ctx<'_> {
    /// `parseNamespace` (always `default` with the `namespace-ignored` fault).
    fn namespace(&self) -> String {
        if self.engine.has(Fault::NamespaceIgnored) {
            return "default".to_string();
        }
        self.query.namespace()
    }

    /// `VariablesListRequest`.
    fn list(&self) -> Reply {
        if self.method != Method::GET {
            return Reply::text(405, "Invalid method");
        }
        let Some(caller) = self.engine.caller(self.token) else {
            return Reply::text(403, "Permission denied");
        };
        let (items, index) = self
            .engine
            .list(&self.namespace(), self.query.get("prefix"), &caller);
        Reply::json(200, items).with_query_meta(index)
    }

    /// `VariableSpecificRequest`.
    fn variable(&self, path: &str) -> Reply {
        if path.is_empty() {
            return Reply::text(400, "missing variable path");
        }
        match *self.method {
            Method::GET => self.read(path),
            Method::PUT | Method::POST => {
                let flags: Vec<LockFlag> = [
                    ("lock-renew", LockFlag::Renew),
                    ("lock-acquire", LockFlag::Acquire),
                    ("lock-release", LockFlag::Release),
                ]
                .into_iter()
                .filter(|(key, _)| self.query.has(key))
                .map(|(_, flag)| flag)
                .collect();
                if flags.len() > 1 {
                    return Reply::text(400, "multiple lock operations");
                }
                let cas = self.query.get("cas");
                if !cas.is_empty() && !flags.is_empty() {
                    return Reply::text(400, "CAS can't be used with lock operations");
                }
                match flags.first() {
                    None => self.upsert(path),
                    Some(LockFlag::Renew) => self.renew(path),
                    Some(LockFlag::Acquire) => self.lock_operation(path, Op::LockAcquire),
                    Some(LockFlag::Release) => self.lock_operation(path, Op::LockRelease),
                }
            }
            Method::DELETE => self.delete(path),
            _ => Reply::text(400, "Invalid method"),
        }
    }

    /// `parseCAS`: `Some(index)` when `cas` is non-empty.
    fn cas(&self) -> Result<Option<u64>, Reply> {
        let raw = self.query.get("cas");
        if raw.is_empty() {
            return Ok(None);
        }
        if !raw.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Reply::text(
                400,
                format!("can not parse cas: strconv.ParseUint: parsing \"{raw}\": invalid syntax"),
            ));
        }
        raw.parse::<u64>().map(Some).map_err(|_| {
            Reply::text(
                400,
                format!(
                    "can not parse cas: strconv.ParseUint: parsing \"{raw}\": value out of range"
                ),
            )
        })
    }

    fn apply(&self, op: Op, var: RequestVariable) -> Result<ApplyOutcome, HttpError> {
        let caller = self
            .engine
            .caller(self.token)
            .ok_or_else(|| HttpError::new(403, "Permission denied"))?;
        self.engine.apply(op, var, &self.namespace(), &caller)
    }

    fn read(&self, path: &str) -> Reply {
        let Some(caller) = self.engine.caller(self.token) else {
            return Reply::text(403, "Permission denied");
        };
        match self.engine.read(&self.namespace(), path, &caller) {
            Err(err) => Reply::error(err),
            Ok((Some(body), index)) => Reply::json(200, body).with_query_meta(index),
            Ok((None, index)) if self.engine.has(Fault::MissingIs200) => {
                Reply::json(200, Value::Null).with_query_meta(index)
            }
            Ok((None, index)) => Reply::text(404, "variable not found").with_query_meta(index),
        }
    }

    /// `variableUpsert` (set and cas).
    fn upsert(&self, path: &str) -> Reply {
        let mut var = match decode_body(self.body) {
            Ok(var) => var,
            Err(message) => return Reply::text(400, message),
        };
        if var.items.as_ref().is_none_or(|items| items.is_empty())
            && !self.engine.has(Fault::EmptyItemsAccepted)
        {
            return Reply::text(400, "variable missing required Items object");
        }
        var.metadata.path = path.to_string();
        let op = match self.cas() {
            Ok(Some(index)) => Op::Cas(index),
            Ok(None) => Op::Set,
            Err(reply) => return reply,
        };
        match self.apply(op, var) {
            Ok(ApplyOutcome::Output { index, .. }) if self.engine.has(Fault::SetAnswersEmpty) => {
                Reply::empty(200).with_index(index)
            }
            Ok(ApplyOutcome::Output { body, index }) => {
                Reply::json(200, body.unwrap_or(Value::Null)).with_index(index)
            }
            Ok(ApplyOutcome::Conflict { body, modify_index }) => {
                Reply::json(409, body).with_index(modify_index)
            }
            Err(err) => Reply::error(err).with_index(0),
        }
    }

    /// `variableDelete`.
    fn delete(&self, path: &str) -> Reply {
        let op = match self.cas() {
            Ok(Some(index)) => Op::DeleteCas(index),
            Ok(None) => Op::Delete,
            Err(reply) => return reply,
        };
        let mut var = RequestVariable::default();
        var.metadata.path = path.to_string();
        match self.apply(op, var) {
            Ok(ApplyOutcome::Output { index, .. }) => Reply::empty(204).with_index(index),
            Ok(ApplyOutcome::Conflict { body, modify_index }) => {
                Reply::json(409, body).with_index(modify_index)
            }
            Err(err) => Reply::error(err).with_index(0),
        }
    }

    /// `variableLockOperation` (acquire and release).
    fn lock_operation(&self, path: &str, op: Op) -> Reply {
        let mut var = match decode_body(self.body) {
            Ok(var) => var,
            Err(message) => return Reply::text(400, message),
        };
        var.metadata.path = path.to_string();
        match self.apply(op, var) {
            Ok(ApplyOutcome::Output { body, index }) => {
                let mut body = body.unwrap_or(Value::Null);
                if op == Op::LockAcquire
                    && self.engine.has(Fault::AcquireNoId)
                    && let Some(map) = body.as_object_mut()
                {
                    map.remove("Lock");
                }
                Reply::json(200, body).with_index(index)
            }
            // command/agent/variable_endpoint.go (variableLockOperation) registers
            // `defer setIndex(resp, out.WriteMeta.Index)` and answers a conflict with
            // `resp.WriteHeader(409)` first: header changes after WriteHeader are lost, so a
            // lock conflict has no X-Nomad-Index (set, cas and delete conflicts set it before)
            // and no JSON content type. Its body is the zero-value variable the state store
            // built (namespace and path only, see `conflict_body`).
            Ok(ApplyOutcome::Conflict { body, modify_index }) => {
                let reply = Reply::json(409, body).sniffed();
                if self.engine.has(Fault::LockConflictIndexed) {
                    reply.with_index(modify_index)
                } else {
                    reply
                }
            }
            // An RPC error (400 validation, 403, and the release state errors' 500s): the
            // reply is zero, so the deferred setIndex writes X-Nomad-Index: 0.
            Err(err) => Reply::error(err).with_index(0),
        }
    }

    /// `variableLockRenew`: namespace from the query only, path from the URL only.
    fn renew(&self, path: &str) -> Reply {
        let var = match decode_body(self.body) {
            Ok(var) => var,
            Err(message) => return Reply::text(400, message),
        };
        let lock_id = var.metadata.lock.map(|l| l.id).unwrap_or_default();
        let Some(caller) = self.engine.caller(self.token) else {
            return Reply::text(403, "Permission denied");
        };
        match self
            .engine
            .renew(&self.namespace(), path, &lock_id, &caller)
        {
            Ok(body) => Reply::json(200, body),
            Err(err) => Reply::error(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_path_table() {
        let table = [
            ("/v1/var/a/b", "/v1/var/a/b"),
            ("/v1/var/a//b", "/v1/var/a/b"),
            ("/v1/var//a", "/v1/var/a"),
            ("/v1/var/a/", "/v1/var/a/"),
            ("/v1/var/./a", "/v1/var/a"),
            ("/v1/var/x/../a", "/v1/var/a"),
            ("/v1/var/", "/v1/var/"),
        ];
        for (input, want) in table {
            assert_eq!(clean_path(input), want, "{input}");
        }
    }

    #[test]
    fn token_table() {
        let table: [(&[(&str, &str)], &str); 6] = [
            (&[("x-nomad-token", "abc")], "abc"),
            (&[("x-nomad-token", " abc ")], "abc"),
            (&[("authorization", "Bearer xyz")], "xyz"),
            (&[("authorization", "bearer  xyz extra")], "xyz"),
            (&[("authorization", "Basic xyz")], ""),
            (
                &[("x-nomad-token", "a"), ("authorization", "Bearer b")],
                "a",
            ),
        ];
        for (pairs, want) in table {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.insert(*name, HeaderValue::from_str(value).unwrap());
            }
            assert_eq!(parse_token(&headers), want, "{pairs:?}");
        }
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(
            percent_decode("/v1/var/a%2Fb").as_deref(),
            Some("/v1/var/a/b")
        );
        assert_eq!(
            percent_decode("/v1/var/a+b").as_deref(),
            Some("/v1/var/a+b")
        );
        assert_eq!(percent_decode("/v1/var/%zz"), None);
        assert_eq!(percent_decode("/v1/var/%4"), None);
        assert_eq!(percent_decode("/v1/var/%+1"), None);
    }
}
