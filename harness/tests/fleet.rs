//! Fleet certification: `dhv --plugin-dir` (one record per plugin, as the Nomad client finds
//! plugins), the conform-fleet jobspec (parsed with hcl-rs), and `fleet collect` against a
//! small fake of the Nomad HTTP API, with records made for real by `dhv --plugin-dir`.
//!
//! What the fake serves, and why it is what Nomad serves:
//!
//! - `GET /v1/job/:job_id/allocations?namespace=NS`: command/agent/job_endpoint.go
//!   (jobAllocations) answers a JSON array of AllocListStub (nomad/structs/alloc.go: `ID`,
//!   `NodeID`, `NodeName`, `TaskGroup`, `JobVersion`, `ClientStatus`, `ClientDescription`,
//!   `TaskStates` with `State`, `Failed`, `Events[].Type/DisplayMessage`, `CreateIndex`,
//!   `CreateTime` in Unix nanoseconds...), every allocation of the job including earlier runs
//!   on the same node; a job that does not exist gives `[]` (nomad/job_endpoint.go,
//!   Job.Allocations). The namespace comes from the `namespace` query parameter.
//! - `GET /v1/client/fs/ls/:alloc_id?path=P` (command/agent/fs_endpoint.go,
//!   DirectoryListRequest): a JSON array of AllocFileInfo (client/structs/structs.go: `Name`,
//!   `IsDir`, `Size`, `FileMode`, `ModTime`); P is relative to the allocation directory (its
//!   `alloc/` is the task's NOMAD_ALLOC_DIR). A missing path ("no such file or directory"),
//!   an unknown allocation or a node Nomad has no connection to ("No path to node", a lost
//!   node) answer 404 with the error as a plain-text body.
//! - `GET /v1/client/fs/cat/:alloc_id?path=P` (fs_endpoint.go, FileCatRequest): the file's
//!   bytes.
//! - ACLs: the token comes in the `X-Nomad-Token` header (api/api.go); a request without the
//!   right one is answered 403 "Permission denied" (nomad/structs/errors.go).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex, OnceLock};

use axum::Router;
use axum::extract::{Path as UrlPath, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clap::CommandFactory as _;
use nomad_conform_reports::fleet::FleetRecord;
use nomad_conform_reports::model::RunRecord;

#[path = "tls_pki/mod.rs"]
mod tls_pki;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One real `dhv --plugin-dir` run, shared by the tests: a directory holding the reference
/// mkdir plugin and a fault fixture (create exits 1), plus a file Nomad would not count.
struct PluginDirRun {
    dir: tempfile::TempDir,
    out: Output,
}

impl PluginDirRun {
    fn out_dir(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    fn record(&self, name: &str) -> String {
        std::fs::read_to_string(self.out_dir().join(format!("{name}.json"))).unwrap()
    }
}

fn plugin_dir_run() -> &'static PluginDirRun {
    static RUN: OnceLock<PluginDirRun> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::create_dir_all(dir.path().join("lib")).unwrap();
        // The fixture sources ../lib/base.sh next to its own directory.
        std::fs::copy(
            root().join("fixtures/dhv/lib/base.sh"),
            dir.path().join("lib/base.sh"),
        )
        .unwrap();
        std::fs::copy(
            root().join("fixtures/dhv/create-exits-nonzero/plugin"),
            plugins.join("broken"),
        )
        .unwrap();
        std::fs::copy(
            root().join("reference-plugins/dhv/mkdir"),
            plugins.join("mkdir"),
        )
        .unwrap();
        std::fs::write(plugins.join("notes.txt"), "not a plugin\n").unwrap();
        for p in ["broken", "mkdir"] {
            std::fs::set_permissions(plugins.join(p), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let out = bin()
            .args(["dhv", "--seed", "7", "--plugin-dir"])
            .arg(&plugins)
            .arg("--out-dir")
            .arg(dir.path().join("out"))
            .output()
            .unwrap();
        PluginDirRun { dir, out }
    })
}

#[test]
fn plugin_dir_runs_every_plugin_with_one_record_each() {
    let run = plugin_dir_run();
    let stdout = text(&run.out.stdout);
    let stderr = text(&run.out.stderr);
    // The worst over the plugins: broken is not conformant.
    assert_eq!(run.out.status.code(), Some(1), "{stdout}\n{stderr}");
    let mut files: Vec<String> = std::fs::read_dir(run.out_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "broken.html",
            "broken.json",
            "broken.xml",
            "mkdir.html",
            "mkdir.json",
            "mkdir.xml"
        ]
    );
    for (name, assessment) in [("broken", "not conformant"), ("mkdir", "conformant")] {
        let r: RunRecord = serde_json::from_str(&run.record(name)).unwrap();
        assert_eq!(r.kind, "dhv");
        assert!(r.subject.plugin.ends_with(&format!("/plugins/{name}")));
        assert_eq!(r.subject.details["plugin_id"], name);
        assert_eq!(r.assessment().as_str(), assessment);
        assert_eq!(r.seed, 7);
    }
    // Each plugin's summary, then one final line per plugin, in name order.
    assert_eq!(stdout.matches("verdict: ").count(), 2, "{stdout}");
    let tail = &stdout[stdout.rfind("\nplugins in ").expect(&stdout) + 1..];
    let lines: Vec<&str> = tail.lines().skip(1).collect();
    assert!(lines[0].trim_start().starts_with("broken") && lines[0].contains("exit 1"));
    assert!(lines[0].contains("not conformant"), "{tail}");
    assert!(lines[1].trim_start().starts_with("mkdir") && lines[1].contains("exit 0"));
    assert!(
        stderr.contains("notes.txt: not a plugin: no execute bit"),
        "{stderr}"
    );
}

/// A usage error: exit 2 and one line on stderr.
fn usage_error(args: &[&str], needle: &str) {
    let out = bin()
        .args(args)
        .env_remove("NOMAD_CONFORM_PLUGIN")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("nomad-conform: error: "), "{stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {needle:?} not in {stderr}"
    );
}

#[test]
fn plugin_dir_bad_combinations_are_usage_errors() {
    let mkdir = root().join("reference-plugins/dhv/mkdir");
    let mkdir = mkdir.to_str().unwrap();
    let dir = root().join("reference-plugins/dhv");
    let dir = dir.to_str().unwrap();
    usage_error(&["dhv"], "--plugin-dir DIR");
    usage_error(&["dhv", mkdir, "--plugin-dir", dir], "not both");
    usage_error(
        &["dhv", "--plugin-dir", dir, "--junit", "x.xml"],
        "--out-dir",
    );
    usage_error(
        &["dhv", "--plugin-dir", dir, "--json", "x.json"],
        "--out-dir",
    );
    usage_error(
        &["dhv", mkdir, "--out-dir", "/tmp/x"],
        "--out-dir is for --plugin-dir",
    );
    usage_error(
        &["dhv", "--plugin-dir", "/nonexistent/plugins"],
        "no such file",
    );
    usage_error(&["dhv", "--plugin-dir", mkdir], "not a directory");
}

#[test]
fn an_empty_plugin_dir_tests_nothing_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README"), "no plugins here\n").unwrap();
    let out = bin()
        .args(["dhv", "--plugin-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("nomad-conform: error: no plugins in"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------
// The jobspec

fn job_body() -> hcl::Body {
    let text =
        std::fs::read_to_string(root().join("deploy/nomad/conform-fleet.nomad.hcl")).unwrap();
    hcl::parse(&text).expect("the jobspec parses as HCL")
}

fn blocks<'a>(body: &'a hcl::Body, ident: &'a str) -> impl Iterator<Item = &'a hcl::Block> {
    body.blocks().filter(move |b| b.identifier() == ident)
}

fn attr<'a>(body: &'a hcl::Body, key: &str) -> &'a hcl::Expression {
    body.attributes()
        .find(|a| a.key() == key)
        .unwrap_or_else(|| panic!("no attribute {key}"))
        .expr()
}

fn label(b: &hcl::Block) -> &str {
    b.labels().first().map(|l| l.as_str()).unwrap_or("")
}

/// `var.NAME` -> NAME.
fn var_name(e: &hcl::Expression) -> Option<String> {
    let hcl::Expression::Traversal(t) = e else {
        return None;
    };
    match (&t.expr, t.operators.as_slice()) {
        (hcl::Expression::Variable(v), [hcl::expr::TraversalOperator::GetAttr(name)])
            if v.as_str() == "var" =>
        {
            Some(name.to_string())
        }
        _ => None,
    }
}

/// Every string literal of an expression (through arrays and function calls such as concat),
/// in order.
fn strings(e: &hcl::Expression, out: &mut Vec<String>) {
    match e {
        hcl::Expression::String(s) => out.push(s.clone()),
        hcl::Expression::TemplateExpr(t) => out.push(t.to_string()),
        hcl::Expression::Array(items) => items.iter().for_each(|i| strings(i, out)),
        hcl::Expression::FuncCall(f) => f.args.iter().for_each(|a| strings(a, out)),
        _ => {}
    }
}

#[test]
fn the_fleet_jobspec_runs_nomad_conform_with_flags_that_exist() {
    let body = job_body();
    let variables: BTreeMap<String, &hcl::Body> = blocks(&body, "variable")
        .map(|b| (label(b).to_string(), b.body()))
        .collect();
    let default = |name: &str| -> hcl::Expression {
        attr(
            variables
                .get(name)
                .unwrap_or_else(|| panic!("no variable {name}")),
            "default",
        )
        .clone()
    };
    let job = blocks(&body, "job").next().expect("a job block");
    assert_eq!(label(job), "conform-fleet");
    let job = job.body();
    assert_eq!(
        attr(job, "type"),
        &hcl::Expression::String("sysbatch".into())
    );
    // The node pool and the constraint are variables, by default every linux node.
    assert_eq!(
        var_name(attr(job, "node_pool")).as_deref(),
        Some("node_pool")
    );
    assert_eq!(default("node_pool"), hcl::Expression::String("all".into()));
    let c = blocks(job, "constraint")
        .next()
        .expect("a constraint")
        .body();
    assert_eq!(
        var_name(attr(c, "attribute")).as_deref(),
        Some("constraint_attribute")
    );
    assert_eq!(
        var_name(attr(c, "value")).as_deref(),
        Some("constraint_value")
    );
    assert_eq!(
        default("constraint_value"),
        hcl::Expression::String("linux".into())
    );
    let mut attr_default = Vec::new();
    strings(&default("constraint_attribute"), &mut attr_default);
    assert!(
        attr_default[0].contains("attr.kernel.name"),
        "{attr_default:?}"
    );
    assert_eq!(
        default("plugin_dir"),
        hcl::Expression::String("/opt/nomad/data/host_volume_plugins".into())
    );

    // Every task (a plain one, or one made by a dynamic block) runs the nomad-conform binary
    // with raw_exec, and every --flag it passes exists on its subcommand.
    let cli = nomad_conform::cli::Cli::command();
    let mut subcommands = BTreeSet::new();
    for group in blocks(job, "group") {
        let g = group.body();
        let tasks = blocks(g, "task").map(|t| t.body()).chain(
            blocks(g, "dynamic")
                .filter(|d| label(d) == "task")
                .map(|d| blocks(d.body(), "content").next().expect("content").body()),
        );
        for task in tasks {
            assert_eq!(
                attr(task, "driver"),
                &hcl::Expression::String("raw_exec".into())
            );
            let config = blocks(task, "config").next().expect("config").body();
            let command = var_name(attr(config, "command")).expect("command = var.x");
            let hcl::Expression::String(path) = default(&command) else {
                panic!("the default of var.{command} is not a string");
            };
            assert!(path.ends_with("/nomad-conform"), "{path}");
            let mut args = Vec::new();
            strings(attr(config, "args"), &mut args);
            let mut sub = cli
                .find_subcommand(&args[0])
                .unwrap_or_else(|| panic!("no subcommand {}", args[0]));
            let mut name = args[0].clone();
            if args[0] == "fleet" {
                sub = sub
                    .find_subcommand(&args[1])
                    .unwrap_or_else(|| panic!("no subcommand fleet {}", args[1]));
                name = format!("fleet {}", args[1]);
            }
            subcommands.insert(name.clone());
            // Flags after `--` are the CSI run's (csi_args, csi_volumes).
            for flag in args
                .iter()
                .take_while(|a| *a != "--")
                .filter(|a| a.starts_with("--"))
            {
                assert!(
                    sub.get_arguments()
                        .any(|a| a.get_long() == Some(&flag[2..])),
                    "nomad-conform {name} has no {flag}"
                );
            }
            assert!(
                args.iter()
                    .any(|a| a.contains("NOMAD_ALLOC_DIR") && a.contains("/conform")),
                "the records go to ${{NOMAD_ALLOC_DIR}}/conform: {args:?}"
            );
        }
    }
    assert_eq!(
        subcommands,
        BTreeSet::from([
            "csi".to_string(),
            "dhv".to_string(),
            "fleet csi-node".to_string()
        ])
    );
}

/// The CSI node plugin task: the plugin ID is a variable, the node's allocation is looked up
/// through the CSI plugin API over the Task API socket with the task's workload identity, and
/// the socket is found under the client's state_dir.
#[test]
fn the_fleet_jobspec_finds_each_nodes_csi_node_plugin_by_plugin_id() {
    let body = job_body();
    let variables: BTreeMap<String, &hcl::Body> = blocks(&body, "variable")
        .map(|b| (label(b).to_string(), b.body()))
        .collect();
    let default = |name: &str| attr(variables[name], "default").clone();
    assert_eq!(
        default("csi_plugin_id"),
        hcl::Expression::String(String::new())
    );
    assert_eq!(
        default("client_state_dir"),
        hcl::Expression::String("/opt/nomad/data/client".into())
    );
    assert_eq!(default("csi_volumes"), hcl::Expression::Array(Vec::new()));
    let job = blocks(&body, "job").next().unwrap().body();
    let group = blocks(job, "group").next().unwrap().body();
    // The task made for csi_plugin_id.
    let dynamic = blocks(group, "dynamic")
        .filter(|d| label(d) == "task")
        .find(|d| {
            let mut it = String::new();
            if let Some(a) = d.body().attributes().find(|a| a.key() == "iterator") {
                it = a.expr().to_string();
            }
            it.contains("plugin")
        })
        .expect("a dynamic task iterating over the plugin ID");
    let for_each = attr(dynamic.body(), "for_each").to_string();
    assert!(for_each.contains("var.csi_plugin_id"), "{for_each}");
    let task = blocks(dynamic.body(), "content").next().unwrap().body();
    // Its workload identity reaches the Task API socket.
    let identity = blocks(task, "identity").next().expect("identity").body();
    assert_eq!(attr(identity, "env"), &hcl::Expression::Bool(true));
    let env = blocks(task, "env").next().expect("env").body();
    let addr = attr(env, "NOMAD_ADDR").to_string();
    assert!(
        addr.contains("unix://") && addr.contains("NOMAD_SECRETS_DIR}/api.sock"),
        "{addr}"
    );
    let config = blocks(task, "config").next().unwrap().body();
    let args = attr(config, "args").to_string();
    for needle in [
        "\"fleet\"",
        "\"csi-node\"",
        "\"--plugin-id\", plugin.value",
        "\"--node-id\", \"${node.unique.id}\"",
        "\"--state-dir\", var.client_state_dir",
        "var.csi_volumes",
        "\"--volume\"",
    ] {
        assert!(args.contains(needle), "{needle} not in {args}");
    }
    // fleet csi-node runs the suite as a node plugin at the socket Nomad gives the allocation.
    let cmd = nomad_conform::cli::Cli::command();
    let csi_node = cmd
        .find_subcommand("fleet")
        .and_then(|f| f.find_subcommand("csi-node"))
        .expect("fleet csi-node");
    let default_state = csi_node
        .get_arguments()
        .find(|a| a.get_long() == Some("state-dir"))
        .and_then(|a| a.get_default_values().first().cloned())
        .unwrap();
    assert_eq!(default_state, "/opt/nomad/data/client");
}

// ---------------------------------------------------------------------------------------
// The fake Nomad and `fleet collect`

/// What the fake Nomad holds and what it saw.
struct Fake {
    token: Option<String>,
    job: String,
    namespace: String,
    /// The job's allocations, as /v1/job/:job_id/allocations answers.
    allocations: serde_json::Value,
    /// Per allocation ID: files by path relative to the allocation directory.
    files: BTreeMap<String, BTreeMap<String, String>>,
    /// Allocations on nodes Nomad has no connection to.
    unreachable: BTreeSet<String>,
    /// CSI plugins by ID, as /v1/plugin/csi/:plugin_id answers them.
    plugins: BTreeMap<String, serde_json::Value>,
    /// (path, query, X-Nomad-Token) of every request.
    seen: Mutex<Vec<(String, String, Option<String>)>>,
}

type Shared = Arc<Fake>;

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(if b[i] == b'+' { b' ' } else { b[i] });
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// Nomad's error answer: a status and a plain-text body (command/agent/http.go, CodedError).
type Refusal = (StatusCode, String);

fn plain(status: StatusCode, body: impl Into<String>) -> Response {
    (status, body.into()).into_response()
}

fn json(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Records the request; the ACL check every endpoint makes.
fn admit(f: &Fake, path: String, query: &str, headers: &HeaderMap) -> Result<(), Refusal> {
    let token = headers
        .get("x-nomad-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    f.seen
        .lock()
        .unwrap()
        .push((path, query.to_string(), token.clone()));
    match &f.token {
        Some(want) if token.as_deref() != Some(want) => {
            Err((StatusCode::FORBIDDEN, "Permission denied".into()))
        }
        _ => Ok(()),
    }
}

async fn job_allocations(
    State(f): State<Shared>,
    UrlPath(job): UrlPath<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let q = q.unwrap_or_default();
    if let Err(r) = admit(&f, format!("/v1/job/{job}/allocations"), &q, &headers) {
        return r.into_response();
    }
    let ns = query_param(&q, "namespace").unwrap_or_else(|| "default".into());
    if job == f.job && ns == f.namespace {
        json(f.allocations.to_string())
    } else {
        json("[]".into())
    }
}

/// The fs endpoints' common part: the allocation's files, or Nomad's 404.
fn alloc_files<'a>(
    f: &'a Fake,
    alloc: &str,
    q: &str,
) -> Result<(&'a BTreeMap<String, String>, String), Refusal> {
    let Some(path) = query_param(q, "path") else {
        return Err((StatusCode::BAD_REQUEST, "must provide a file name".into()));
    };
    if f.unreachable.contains(alloc) {
        return Err((StatusCode::NOT_FOUND, "No path to node".into()));
    }
    let Some(files) = f.files.get(alloc) else {
        return Err((
            StatusCode::NOT_FOUND,
            format!("Unknown allocation \"{alloc}\""),
        ));
    };
    Ok((files, path.trim_matches('/').to_string()))
}

async fn fs_ls(
    State(f): State<Shared>,
    UrlPath(alloc): UrlPath<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let q = q.unwrap_or_default();
    if let Err(r) = admit(&f, format!("/v1/client/fs/ls/{alloc}"), &q, &headers) {
        return r.into_response();
    }
    let (files, dir) = match alloc_files(&f, &alloc, &q) {
        Ok(x) => x,
        Err(r) => return r.into_response(),
    };
    let prefix = format!("{dir}/");
    let mut entries: BTreeMap<String, bool> = BTreeMap::new();
    for path in files.keys() {
        if let Some(rest) = path.strip_prefix(&prefix) {
            match rest.split_once('/') {
                Some((sub, _)) => entries.insert(sub.to_string(), true),
                None => entries.insert(rest.to_string(), false),
            };
        }
    }
    if entries.is_empty() {
        return plain(
            StatusCode::NOT_FOUND,
            format!("open /var/nomad/alloc/{alloc}/{dir}: no such file or directory"),
        );
    }
    let list: Vec<serde_json::Value> = entries
        .into_iter()
        .map(|(name, is_dir)| {
            let size = files
                .get(&format!("{prefix}{name}"))
                .map_or(4096, |c| c.len());
            serde_json::json!({
                "Name": name, "IsDir": is_dir, "Size": size,
                "FileMode": if is_dir { "drwxr-xr-x" } else { "-rw-r--r--" },
                "ModTime": "2025-01-01T00:00:00Z",
            })
        })
        .collect();
    json(serde_json::Value::Array(list).to_string())
}

async fn fs_cat(
    State(f): State<Shared>,
    UrlPath(alloc): UrlPath<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let q = q.unwrap_or_default();
    if let Err(r) = admit(&f, format!("/v1/client/fs/cat/{alloc}"), &q, &headers) {
        return r.into_response();
    }
    let (files, path) = match alloc_files(&f, &alloc, &q) {
        Ok(x) => x,
        Err(r) => return r.into_response(),
    };
    match files.get(&path) {
        Some(content) => plain(StatusCode::OK, content.clone()),
        None => plain(
            StatusCode::NOT_FOUND,
            format!("stat /var/nomad/alloc/{alloc}/{path}: no such file or directory"),
        ),
    }
}

/// `GET /v1/plugin/csi/:plugin_id` (command/agent/csi_endpoint.go, CSIPluginSpecificRequest):
/// the plugin with `Nodes` keyed by node ID (api/csi.go, CSIPlugin; CSIInfo in
/// nomad/structs/node.go), or 404 "plugin not found".
async fn csi_plugin_get(
    State(f): State<Shared>,
    UrlPath(id): UrlPath<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let q = q.unwrap_or_default();
    if let Err(r) = admit(&f, format!("/v1/plugin/csi/{id}"), &q, &headers) {
        return r.into_response();
    }
    match f.plugins.get(&id) {
        Some(p) => json(p.to_string()),
        None => plain(StatusCode::NOT_FOUND, "plugin not found"),
    }
}

/// The node plugin `hostpath`: healthy on node-good, unhealthy on node-bad, absent elsewhere.
fn csi_plugin() -> serde_json::Value {
    serde_json::json!({
        "ID": "hostpath", "Provider": "csi-hostpath", "Version": "0.1.0",
        "ControllerRequired": false, "Controllers": {},
        "Nodes": {
            "node-good-0000-id": {"PluginID": "hostpath", "AllocID": "p-good", "Healthy": true,
                "HealthDescription": "healthy", "UpdateTime": "2025-01-01T00:00:00Z",
                "RequiresControllerPlugin": false, "RequiresTopologies": false},
            "node-bad-0000-id": {"PluginID": "hostpath", "AllocID": "p-bad", "Healthy": false,
                "HealthDescription": "CSI plugin failed probe: connection refused",
                "UpdateTime": "2025-01-01T00:00:00Z"},
        },
        "Allocations": [], "ControllersHealthy": 0, "ControllersExpected": 0,
        "NodesHealthy": 1, "NodesExpected": 2, "CreateIndex": 5, "ModifyIndex": 9,
    })
}

fn app(shared: &Shared) -> Router {
    Router::new()
        .route("/v1/job/{job}/allocations", get(job_allocations))
        .route("/v1/client/fs/ls/{alloc}", get(fs_ls))
        .route("/v1/client/fs/cat/{alloc}", get(fs_cat))
        .route("/v1/plugin/csi/{id}", get(csi_plugin_get))
        .with_state(shared.clone())
}

/// Serve `fake` on a loopback port from a thread of its own; the address.
fn serve(fake: Fake) -> (String, Shared) {
    let (port, shared) = serve_on(fake, None);
    (format!("http://127.0.0.1:{port}"), shared)
}

/// Serve `fake` over TLS with `config` (mutual TLS when it verifies clients); the port.
fn serve_tls(fake: Fake, config: Arc<rustls::ServerConfig>) -> (u16, Shared) {
    serve_on(fake, Some(config))
}

fn serve_on(fake: Fake, tls: Option<Arc<rustls::ServerConfig>>) -> (u16, Shared) {
    let shared = Arc::new(fake);
    let app = app(&shared);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            match tls {
                None => axum::serve(listener, app).await.unwrap(),
                Some(config) => {
                    let tls = nomad_conform_variables::TlsListener::new(listener, config).unwrap();
                    axum::serve(tls, app).await.unwrap()
                }
            }
        });
    });
    (addr.port(), shared)
}

fn alloc(
    id: &str,
    node: &str,
    status: &str,
    index: u64,
    task: (&str, bool, &str),
) -> serde_json::Value {
    serde_json::json!({
        "ID": id, "EvalID": "e1", "Name": "conform-fleet.conform[0]", "Namespace": "default",
        "NodeID": format!("{node}-0000-id"), "NodeName": node, "JobID": "conform-fleet",
        "JobType": "sysbatch", "JobVersion": 0, "TaskGroup": "conform",
        "DesiredStatus": "run", "DesiredDescription": "", "ClientStatus": status,
        "ClientDescription": match status {
            "failed" => "Failed tasks", "complete" => "All tasks have completed",
            "lost" => "alloc is lost since its node is down", _ => "",
        },
        "TaskStates": { task.0: { "State": "dead", "Failed": task.1, "Events": [
            {"Type": "Received", "DisplayMessage": "Task received by client"},
            {"Type": "Terminated", "DisplayMessage": task.2},
        ]}},
        "CreateIndex": index, "ModifyIndex": index + 5,
        "CreateTime": 1_700_000_000_000_000_000_i64 + index as i64, "ModifyTime": 0,
    })
}

/// The cluster of the tests: four nodes, records from the real `--plugin-dir` run.
fn cluster(token: Option<&str>) -> Fake {
    let run = plugin_dir_run();
    let mkdir = run.record("mkdir");
    let broken = run.record("broken");
    let mut files: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    // node-good: only conformant plugins. An earlier allocation on it failed: not the newest.
    files.insert(
        "a-good-new".into(),
        BTreeMap::from([
            ("alloc/conform/dhv/mkdir.json".into(), mkdir.clone()),
            ("alloc/conform/dhv/mkdir.xml".into(), "<testsuites/>".into()),
            ("alloc/logs/dhv.stdout.0".into(), "...".into()),
        ]),
    );
    files.insert("a-good-old".into(), BTreeMap::new());
    // node-bad: a plugin that is not conformant (nomad-conform exited 1: the task failed).
    files.insert(
        "a-bad".into(),
        BTreeMap::from([
            ("alloc/conform/dhv/broken.json".into(), broken),
            ("alloc/conform/dhv/mkdir.json".into(), mkdir),
        ]),
    );
    // node-failed: nomad-conform never wrote anything (say, its binary is missing).
    files.insert(
        "a-failed".into(),
        BTreeMap::from([("alloc/logs/dhv.stderr.0".into(), "exec failed".into())]),
    );
    let allocations = serde_json::json!([
        alloc(
            "a-good-old",
            "node-good",
            "failed",
            10,
            ("dhv", true, "Exit Code: 2")
        ),
        alloc(
            "a-bad",
            "node-bad",
            "failed",
            21,
            ("dhv", true, "Exit Code: 1")
        ),
        alloc(
            "a-failed",
            "node-failed",
            "failed",
            22,
            ("dhv", true, "failed to start task: no such file")
        ),
        alloc("a-lost", "node-lost", "lost", 23, ("dhv", false, "")),
        alloc(
            "a-good-new",
            "node-good",
            "complete",
            30,
            ("dhv", false, "Exit Code: 0")
        ),
    ]);
    Fake {
        token: token.map(str::to_string),
        job: "conform-fleet".into(),
        namespace: "default".into(),
        allocations,
        files,
        unreachable: BTreeSet::from(["a-lost".to_string()]),
        plugins: BTreeMap::from([("hostpath".to_string(), csi_plugin())]),
        seen: Mutex::new(Vec::new()),
    }
}

fn collect(addr: &str, extra: &[&str], out: &Path) -> Output {
    bin()
        .args([
            "fleet",
            "collect",
            "--job",
            "conform-fleet",
            "--nomad-addr",
            addr,
        ])
        .args(extra)
        .arg("--html")
        .arg(out.join("fleet.html"))
        .arg("--junit")
        .arg(out.join("fleet.xml"))
        .arg("--json")
        .arg(out.join("fleet.json"))
        .env_clear_nomad()
        .output()
        .unwrap()
}

/// The nomad CLI's variables and ours removed: each test sets what it means.
trait ClearNomad {
    fn env_clear_nomad(&mut self) -> &mut Self;
}

impl ClearNomad for Command {
    fn env_clear_nomad(&mut self) -> &mut Self {
        for (k, _) in std::env::vars() {
            if k.starts_with("NOMAD_CONFORM_") {
                self.env_remove(k);
            }
        }
        for k in tls_pki::NOMAD_CLI_VARS {
            self.env_remove(k);
        }
        self
    }
}

#[test]
fn collect_merges_every_node_into_one_report() {
    let (addr, fake) = serve(cluster(Some("s3cret-token")));
    let out = tempfile::tempdir().unwrap();
    let o = collect(&addr, &["--token", "s3cret-token"], out.path());
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    // Something failed and a node has no record.
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");

    // The token went with every request, and the namespace and path parameters as Nomad
    // reads them; the failed earlier allocation on node-good was never read.
    let seen = fake.seen.lock().unwrap().clone();
    assert!(seen.len() >= 8, "{seen:?}");
    for (path, query, token) in &seen {
        assert_eq!(token.as_deref(), Some("s3cret-token"), "{path}");
        assert!(query.contains("namespace=default"), "{path}?{query}");
        if path.starts_with("/v1/client/fs/") {
            assert!(query_param(query, "path").is_some(), "{path}?{query}");
        }
    }
    assert!(
        !seen.iter().any(|(p, _, _)| p.ends_with("/a-good-old")),
        "{seen:?}"
    );
    assert!(seen.iter().any(|(p, q, _)| p == "/v1/client/fs/cat/a-bad"
        && query_param(q, "path").as_deref() == Some("alloc/conform/dhv/broken.json")));

    // The HTML opens with the table: a row per node × plugin, problems first, and the nodes
    // without a record shown as such.
    let html = std::fs::read_to_string(out.path().join("fleet.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script"), "the fleet page needs no script");
    let table = &html[html.find("<table").unwrap()..html.find("</table>").unwrap()];
    let rows: Vec<&str> = table.split("<tr class=\"row\"").skip(1).collect();
    assert_eq!(rows.len(), 5, "{table}");
    let expect = [
        ("node-failed", "no record"),
        ("node-lost", "lost"),
        ("node-bad", "not conformant"),
        ("node-bad", "conformant"),
        ("node-good", "conformant"),
    ];
    for (row, (node, verdict)) in rows.iter().zip(expect) {
        assert!(row.contains(node), "{row}");
        assert!(
            row.contains(&format!(">{verdict}<")),
            "{node} {verdict}: {row}"
        );
    }
    assert!(rows[2].contains("dhv broken") && rows[3].contains("dhv mkdir"));
    assert!(html.find("<table").unwrap() < html.find("id=\"node-").unwrap());
    // The node sections: the failing clauses of broken with their rerun lines, and what
    // Nomad said about the failed allocation.
    assert!(html.contains("DHV-CREATE-EXIT-ZERO"));
    assert!(html.contains("--tags @DHV-CREATE-EXIT-ZERO"));
    assert!(html.contains("failed to start task: no such file"));
    assert!(html.contains("No path to node"));

    // The JUnit validates, has a suite per node × plugin and one for each node without a
    // record, and names every node.
    let xml_path = out.path().join("fleet.xml");
    let lint = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(root().join("reports/schema/junit-10.xsd"))
        .arg(&xml_path)
        .output()
        .expect("xmllint (libxml2-utils) is installed by scripts/test");
    assert!(lint.status.success(), "{}", text(&lint.stderr));
    let xml = std::fs::read_to_string(&xml_path).unwrap();
    assert_eq!(xml.matches("<testsuite ").count(), 5, "{xml}");
    for node in ["node-good", "node-bad", "node-failed", "node-lost"] {
        assert!(xml.contains(&format!("name=\"{node}")), "{node}");
    }
    assert!(xml.contains("name=\"node-failed: no record\""));
    assert!(xml.contains("classname=\"node-bad.dhv.create\""));
    let failures = xml.matches("<failure").count();
    assert!(failures >= 9, "{failures}");

    // The JSON keeps everything, the records whole.
    let fleet: FleetRecord =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("fleet.json")).unwrap())
            .unwrap();
    assert_eq!(fleet.nodes.len(), 4);
    let good = fleet
        .nodes
        .iter()
        .find(|n| n.node_name == "node-good")
        .unwrap();
    assert_eq!(good.allocation.id, "a-good-new");
    assert_eq!(good.records.len(), 1);
    assert!(good.problems.is_empty());

    // The console: the table, problems first, and the totals.
    let first = stdout.lines().nth(1).unwrap_or("");
    assert!(first.starts_with("node-failed"), "{stdout}");
    assert!(
        stdout.contains("2 nodes without a complete record"),
        "{stdout}"
    );
}

#[test]
fn collect_exits_0_when_every_node_is_conformant() {
    let mut fake = cluster(None);
    fake.allocations = serde_json::json!([alloc(
        "a-good-new",
        "node-good",
        "complete",
        30,
        ("dhv", false, "Exit Code: 0")
    )]);
    let (addr, _) = serve(fake);
    let out = tempfile::tempdir().unwrap();
    let o = collect(&addr, &[], out.path());
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(text(&o.stdout).contains(": conformant;"));
}

#[test]
fn a_nomad_that_cannot_be_reached_or_refuses_exits_3() {
    // A port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = tempfile::tempdir().unwrap();
    let o = collect(&format!("http://127.0.0.1:{port}"), &[], out.path());
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.starts_with("nomad-conform: error: failed to list the allocations of job"),
        "{stderr}"
    );
    assert!(stderr.contains("NOMAD_ADDR"), "{stderr}");
    assert!(!out.path().join("fleet.html").exists());

    // A wrong token: Nomad answers 403.
    let (addr, _) = serve(cluster(Some("right")));
    let o = bin()
        .args([
            "fleet",
            "collect",
            "--job",
            "conform-fleet",
            "--nomad-addr",
            &addr,
        ])
        .env_clear_nomad()
        .env("NOMAD_TOKEN", "wrong")
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("403: Permission denied"), "{stderr}");

    // A job that does not exist: Nomad answers [], and nothing can be judged.
    let o = bin()
        .args([
            "fleet",
            "collect",
            "--job",
            "nope",
            "--nomad-addr",
            &addr,
            "--token",
            "right",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("has no allocations"));

    // Usage errors: an address we cannot speak to, a bad timeout.
    for args in [
        ["--nomad-addr", "ftp://nomad.example:4646"],
        ["--timeout", "soon"],
    ] {
        let o = bin()
            .args(["fleet", "collect"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
    }
}

// ---------------------------------------------------------------------------------------
// `fleet collect` against a TLS and a mutual-TLS Nomad, with a CA and certificates made by the
// test (tests/tls_pki)

fn pki() -> &'static tls_pki::Pki {
    static PKI: OnceLock<tls_pki::Pki> = OnceLock::new();
    PKI.get_or_init(tls_pki::Pki::new)
}

/// `fleet collect` with only `args` and `vars` (every other Nomad variable cleared).
fn collect_with(args: &[&str], vars: &[(&str, &str)], out: &Path) -> Output {
    let mut cmd = bin();
    cmd.args(["fleet", "collect", "--job", "conform-fleet"])
        .args(args)
        .arg("--json")
        .arg(out.join("fleet.json"))
        .env_clear_nomad();
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn collect_over_mutual_tls_from_the_nomad_cli_variables_alone() {
    let pki = pki();
    let token = "mtls-s3cret-token";
    let (port, fake) = serve_tls(cluster(Some(token)), pki.server_config(true));
    let out = tempfile::tempdir().unwrap();
    let addr = format!("https://127.0.0.1:{port}");
    let o = collect_with(
        &[],
        &[
            ("NOMAD_ADDR", &addr),
            ("NOMAD_CACERT", path(&pki.ca)),
            ("NOMAD_CLIENT_CERT", path(&pki.client_cert)),
            ("NOMAD_CLIENT_KEY", path(&pki.client_key)),
            ("NOMAD_TOKEN", token),
            ("NOMAD_REGION", "global"),
        ],
        out.path(),
    );
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    // The same cluster as over plain HTTP: something failed, a node has no record.
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    let fleet: FleetRecord =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("fleet.json")).unwrap())
            .unwrap();
    assert_eq!(fleet.nodes.len(), 4);
    assert_eq!(fleet.nomad_addr, addr);
    // Every request went with the token, the namespace and the region.
    let seen = fake.seen.lock().unwrap().clone();
    assert!(seen.len() >= 8, "{seen:?}");
    for (p, q, t) in &seen {
        assert_eq!(t.as_deref(), Some(token), "{p}");
        assert_eq!(
            query_param(q, "region").as_deref(),
            Some("global"),
            "{p}?{q}"
        );
    }
    // Neither the token nor the client key ever reaches the console or the report.
    let key = std::fs::read_to_string(&pki.client_key).unwrap();
    let key_line = key.lines().nth(1).unwrap();
    let json = std::fs::read_to_string(out.path().join("fleet.json")).unwrap();
    for text in [&stdout, &stderr, &json] {
        assert!(!text.contains(token));
        assert!(!text.contains(key_line));
    }
}

#[test]
fn collect_over_tls_with_the_flags_and_our_variables() {
    let pki = pki();
    let (port, _) = serve_tls(cluster(None), pki.server_config(true));
    let out = tempfile::tempdir().unwrap();
    // Flags, by the name the certificate has (as Nomad's server.<region>.nomad).
    let o = collect_with(
        &[
            "--nomad-addr",
            &format!("https://127.0.0.1:{port}"),
            "--ca-path",
            path(&pki.ca_dir),
            "--client-cert",
            path(&pki.client_cert),
            "--client-key",
            path(&pki.client_key),
            "--tls-server-name",
            "server.global.nomad",
        ],
        // The nomad CLI's variables come after the flags: this wrong CA is not used.
        &[("NOMAD_CACERT", path(&pki.other_ca))],
        out.path(),
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    // NOMAD_CONFORM_* variables, by host name.
    let o = collect_with(
        &[],
        &[
            (
                "NOMAD_CONFORM_NOMAD_ADDR",
                &format!("https://localhost:{port}"),
            ),
            ("NOMAD_CONFORM_CA_CERT", path(&pki.ca)),
            ("NOMAD_CONFORM_CLIENT_CERT", path(&pki.client_cert)),
            ("NOMAD_CONFORM_CLIENT_KEY", path(&pki.client_key)),
        ],
        out.path(),
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    // Without verification: it works, and the console and the report say so.
    let o = collect_with(
        &[
            "--tls-skip-verify",
            "--client-cert",
            path(&pki.client_cert),
            "--client-key",
            path(&pki.client_key),
        ],
        &[("NOMAD_ADDR", &format!("https://127.0.0.1:{port}"))],
        out.path(),
    );
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("warning: TLS certificate verification is off"),
        "{stderr}"
    );
    let fleet: FleetRecord =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("fleet.json")).unwrap())
            .unwrap();
    assert!(
        fleet
            .warnings
            .iter()
            .any(|w| w.contains("TLS certificate verification is off")),
        "{:?}",
        fleet.warnings
    );
    let html = nomad_conform_reports::fleet::render_html(&fleet).unwrap();
    assert!(
        html.contains("warning: TLS certificate verification is off"),
        "the HTML report says so"
    );
    assert!(
        nomad_conform_reports::fleet::render_text(&fleet)
            .contains("warning: TLS certificate verification is off"),
        "so does the console table"
    );
}

/// One line on stderr, exit 3, nothing written.
fn fails_with(o: &Output, needle: &str, out: &Path) {
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{needle}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{needle}: {stderr}");
    assert!(stderr.starts_with("nomad-conform: error: "), "{stderr}");
    assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    assert!(!out.join("fleet.json").exists());
}

#[test]
fn each_tls_failure_is_one_line_that_says_which_and_exits_3() {
    let pki = pki();
    let (tls_port, _) = serve_tls(cluster(None), pki.server_config(false));
    let (mtls_port, _) = serve_tls(cluster(None), pki.server_config(true));
    let (plain_addr, _) = serve(cluster(None));
    let plain_port = plain_addr.rsplit(':').next().unwrap();
    let tls = format!("https://127.0.0.1:{tls_port}");
    let mtls = format!("https://127.0.0.1:{mtls_port}");
    let out = tempfile::tempdir().unwrap();
    let ca = path(&pki.ca);

    // An unknown CA.
    let o = collect_with(
        &["--nomad-addr", &tls, "--ca-cert", path(&pki.other_ca)],
        &[],
        out.path(),
    );
    fails_with(&o, "is signed by a CA this run does not trust", out.path());
    // A name the certificate does not have.
    let o = collect_with(
        &[
            "--nomad-addr",
            &tls,
            "--ca-cert",
            ca,
            "--tls-server-name",
            "nomad.example",
        ],
        &[],
        out.path(),
    );
    fails_with(
        &o,
        "is not valid for the name \"nomad.example\"",
        out.path(),
    );
    // Mutual TLS without a client certificate.
    let o = collect_with(&["--nomad-addr", &mtls, "--ca-cert", ca], &[], out.path());
    fails_with(
        &o,
        "requires a client certificate (mutual TLS) and this run gave none",
        out.path(),
    );
    // A client certificate the server refuses (another CA signed it).
    let o = collect_with(
        &["--nomad-addr", &mtls, "--ca-cert", ca],
        &[
            ("NOMAD_CLIENT_CERT", path(&pki.rogue_cert)),
            ("NOMAD_CLIENT_KEY", path(&pki.rogue_key)),
        ],
        out.path(),
    );
    fails_with(&o, "refused this run's client certificate", out.path());
    // Plain HTTP to the TLS port.
    let o = collect_with(
        &["--nomad-addr", &format!("http://127.0.0.1:{tls_port}")],
        &[],
        out.path(),
    );
    fails_with(
        &o,
        "speaks TLS, and this run spoke plain HTTP to it",
        out.path(),
    );
    // TLS to the plain port.
    let o = collect_with(
        &[
            "--nomad-addr",
            &format!("https://127.0.0.1:{plain_port}"),
            "--ca-cert",
            ca,
        ],
        &[],
        out.path(),
    );
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("does not speak TLS") || stderr.contains("is it a plain http:// port?"),
        "{stderr}"
    );
    fails_with(&o, "http://", out.path());
}

#[test]
fn bad_tls_input_is_refused_before_anything_runs() {
    let pki = pki();
    let out = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (
            vec![
                "--nomad-addr",
                "https://127.0.0.1:1",
                "--ca-cert",
                "/nonexistent/ca.pem",
            ],
            "--ca-cert /nonexistent/ca.pem: ",
        ),
        (
            vec![
                "--nomad-addr",
                "https://127.0.0.1:1",
                "--client-cert",
                path(&pki.client_cert),
            ],
            "--client-cert needs --client-key",
        ),
        (
            vec![
                "--nomad-addr",
                "https://127.0.0.1:1",
                "--ca-cert",
                path(&pki.client_key),
            ],
            "no PEM certificate",
        ),
        (
            vec![
                "--nomad-addr",
                "http://127.0.0.1:1",
                "--ca-cert",
                path(&pki.ca),
            ],
            "--ca-cert is for an https:// address",
        ),
    ] {
        let o = collect_with(&args, &[], out.path());
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    }
    let o = collect_with(
        &["--nomad-addr", "https://127.0.0.1:1"],
        &[("NOMAD_SKIP_VERIFY", "perhaps")],
        out.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

// ---------------------------------------------------------------------------------------
// CSI node plugins on a fleet

#[test]
fn collect_shows_a_node_whose_csi_plugin_has_no_healthy_allocation() {
    let (addr, fake) = serve(cluster(None));
    let out = tempfile::tempdir().unwrap();
    let o = collect_with(
        &["--nomad-addr", &addr, "--csi-plugin", "hostpath"],
        &[],
        out.path(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let fleet: FleetRecord =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("fleet.json")).unwrap())
            .unwrap();
    let node = |name: &str| fleet.nodes.iter().find(|n| n.node_name == name).unwrap();
    let bad = &node("node-bad").problems;
    assert!(
        bad.iter().any(
            |p| p.message.contains("has no healthy allocation on this node")
                && p.message.contains("CSI plugin failed probe")
        ),
        "{bad:?}"
    );
    // node-good's plugin is healthy: nothing added.
    assert!(
        node("node-good").problems.is_empty(),
        "{:?}",
        node("node-good").problems
    );
    assert!(
        node("node-failed")
            .problems
            .iter()
            .any(|p| p.message.contains("no node plugin allocation"))
    );
    assert!(
        fake.seen
            .lock()
            .unwrap()
            .iter()
            .any(|(p, _, _)| p == "/v1/plugin/csi/hostpath")
    );
    // An unknown plugin: Nomad answers 404, nothing is judged.
    let o = collect_with(
        &["--nomad-addr", &addr, "--csi-plugin", "nope"],
        &[],
        out.path(),
    );
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("plugin not found"), "{stderr}");
}

#[test]
fn csi_node_finds_the_plugin_socket_of_this_nodes_allocation() {
    let (addr, _) = serve(cluster(None));
    let state = tempfile::tempdir().unwrap();
    let run = |node: &str| {
        bin()
            .args([
                "fleet",
                "csi-node",
                "--plugin-id",
                "hostpath",
                "--node-id",
                node,
            ])
            .arg("--state-dir")
            .arg(state.path())
            .arg("--json")
            .arg(state.path().join("csi.json"))
            .args(["--", "--volume", "vol-1"])
            .env_clear_nomad()
            .env("NOMAD_ADDR", &addr)
            .output()
            .unwrap()
    };
    // No healthy allocation on the node: nothing to test.
    let o = run("node-bad-0000-id");
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("has no healthy allocation on this node"),
        "{stderr}"
    );
    // A healthy allocation whose socket is not there.
    let o = run("node-good-0000-id");
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("csi/plugins/p-good/csi.sock"), "{stderr}");
    // The socket where Nomad's client puts it: the CSI suite runs against it as a node plugin
    // (here nothing listens, so the suite itself stops with exit 3, after saying so).
    let dir = state.path().join("csi/plugins/p-good");
    std::fs::create_dir_all(&dir).unwrap();
    drop(std::os::unix::net::UnixListener::bind(dir.join("csi.sock")).unwrap());
    let o = run("node-good-0000-id");
    let stderr = text(&o.stderr);
    let sock = dir.join("csi.sock");
    assert!(
        stderr.contains(&format!(
            "nomad-conform csi --endpoint unix://{} --plugin-type node --json",
            sock.display()
        )) && stderr.contains("--volume vol-1"),
        "{stderr}"
    );
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains(&sock.display().to_string()), "{stderr}");
}
