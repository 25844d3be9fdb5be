//! The bodies of the fuzz targets (`fuzz/fuzz_targets/*.rs`, one line each, built with
//! cargo-fuzz outside the workspace), kept here so that a normal `cargo test` replays every
//! committed corpus input and crash regression through the very same code (see the test at
//! the end). Each takes bytes as an untrusted plugin, lock client or user could write them and
//! runs the harness's own parsing and interpretation of them; none may panic, hang or grow
//! without bound. Not part of the public API.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use nomad_conform_hclspec::{SpecTree, Type};
use prost::Message;
use serde::Serialize;

use crate::goversion::GoVersion;
use crate::plugins::csi::pb;
use crate::plugins::dhv::response::{self, VersionField};
use crate::plugins::driver::pipes::{FIRST_LINE_LIMIT, StderrLines};
use crate::plugins::driver::{
    Handshake, StatusDetails, assess_plugin_info, base, drivers, negotiate_api_version, protojson,
};

/// A target's body: it takes any bytes and must return.
pub type Target = fn(&[u8]);

/// Every target by name, as cargo-fuzz names them (`fuzz/fuzz_targets/<name>.rs`).
pub const TARGETS: &[(&str, Target)] = &[
    ("handshake", handshake),
    ("hclog", hclog),
    ("dhv_json", dhv_json),
    ("cty_msgpack", cty_msgpack),
    ("driver_proto", driver_proto),
    ("csi_proto", csi_proto),
    ("variables_http", variables_http),
    ("plugin_config", plugin_config),
    ("task_shapes", task_shapes),
    ("tags", tags),
    ("mountinfo", mountinfo),
];

/// The go-plugin handshake: a driver's first stdout line, cut as the host cuts it
/// (`pipes::read_stdout`: up to the first newline within 64 KiB, a final `\r` dropped), then
/// parsed against the versions Nomad offers.
pub fn handshake(data: &[u8]) {
    let line = match data.iter().position(|b| *b == b'\n') {
        Some(pos) if pos <= FIRST_LINE_LIMIT => &data[..pos],
        Some(_) => return,
        None if data.len() > FIRST_LINE_LIMIT => return,
        None => data,
    };
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let h = Handshake::parse(&String::from_utf8_lossy(line), &[2]);
    let _ = (h.recognized(), h.acceptable());
    let _ = h.address.as_ref().map(ToString::to_string);
    for v in &h.violations {
        let _ = (v.to_string(), v.rule());
    }
    let _ = serde_json::to_string(&h);
}

/// hclog lines: a driver's stderr, cut into lines as the host reads it (64 KiB buffer) and
/// parsed. The first byte chooses the size of the reads (the rest is the stream).
pub fn hclog(data: &[u8]) {
    let Some((&chunk, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk).max(1);
    let mut lines = StderrLines::new();
    let mut parsed = Vec::new();
    let at = || Duration::from_millis(1);
    for piece in stream.chunks(chunk) {
        parsed.extend(lines.feed(piece, at));
    }
    parsed.extend(lines.finish(at()));
    for l in &parsed {
        let _ = serde_json::to_string(l);
    }
}

/// A DHV plugin's stdout as the Nomad client decodes it (Go's `encoding/json`), and what the
/// harness reads of it: the fingerprint's version (as a go-version), the create response.
pub fn dhv_json(data: &[u8]) {
    let json = match response::single_json(Some(data), data.len() as u64) {
        Ok(v) => v,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let _ = crate::plugins::dhv::env::json_kind(&json);
    if let VersionField::Present(v) = response::version_field(&json)
        && let Ok(version) = GoVersion::parse(&v)
    {
        let one = GoVersion::parse("1.0.0").expect("a version");
        let _ = (version.compare(&one), one.compare(&version));
        let _ = (version.segments(), version.prerelease(), version.metadata());
    }
    if let Ok(r) = response::create_response(&json) {
        let _ = (r.stored_path(), r.bytes.invalid(), r.error.invalid());
        if let response::Field::Value(p) = &r.path {
            let _ = crate::plugins::dhv::paths::own_path_problem(
                p,
                Path::new("/tmp/volumes"),
                &["/tmp/volumes/other".to_string()],
            );
        }
    }
}

/// go-cty msgpack as a driver reads the configuration Nomad sends (hclspec's reader).
pub fn cty_msgpack(data: &[u8]) {
    if let Ok(v) = nomad_conform_hclspec::read_rmpv(data) {
        let _ = nomad_conform_hclspec::rmpv_to_json(&v, "config");
    }
    if let Err(e) = nomad_conform_hclspec::read_json(data) {
        let _ = e.to_string();
    }
}

/// Serde's and protobuf's JSON of a driver's answer, its bytes made readable: what every
/// recorded call makes of a response (`plugins::driver::call`).
fn recorded<T: Serialize>(message: &T) {
    let record = protojson::record(message);
    let _ = protojson::protobuf_json(&record);
}

fn decoded<T: Message + Default>(bytes: &[u8]) -> Option<T> {
    T::decode(bytes).ok()
}

/// A schema a driver declares, as Nomad converts it, and the configuration an empty file
/// gives against it (defaults and literals), encoded as Nomad sends it.
fn schema(spec: Option<&crate::plugins::driver::hclspec::Spec>) {
    let Ok(tree) = SpecTree::from_optional(spec) else {
        return;
    };
    let _ = (tree.implied_type(), tree.kind());
    for source in [
        crate::steps::driver::PluginConfigSource::Hcl(String::new()),
        crate::steps::driver::PluginConfigSource::Json("{}".into()),
    ] {
        let _ = source.encode(&Ok(tree.clone()), false);
    }
}

/// Driver and base plugin answers decoded from the wire as prost decodes them, and what the
/// harness reads of them. The first byte chooses the message.
pub fn driver_proto(data: &[u8]) {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    match which % 12 {
        0 => {
            if let Some(m) = decoded::<base::PluginInfoResponse>(bytes) {
                let _ = assess_plugin_info(&m);
                recorded(&m);
            }
        }
        1 => {
            if let Some(m) = decoded::<base::ConfigSchemaResponse>(bytes) {
                schema(m.spec.as_ref());
                recorded(&m);
            }
        }
        2 => {
            if let Some(m) = decoded::<drivers::TaskConfigSchemaResponse>(bytes) {
                schema(m.spec.as_ref());
                recorded(&m);
            }
        }
        3 => {
            if let Some(m) = decoded::<drivers::CapabilitiesResponse>(bytes) {
                if let Some(c) = &m.capabilities {
                    let _ = crate::plugins::driver::taskhost::Isolation::from_proto(c.fs_isolation);
                }
                recorded(&m);
            }
        }
        4 => {
            if let Some(m) = decoded::<drivers::FingerprintResponse>(bytes) {
                let _ = crate::steps::driver::health_name(m.health);
                recorded(&m);
            }
        }
        5 => {
            if let Some(m) = decoded::<drivers::StartTaskResponse>(bytes) {
                recorded(&m);
            }
        }
        6 => {
            if let Some(m) = decoded::<drivers::WaitTaskResponse>(bytes) {
                recorded(&m);
            }
        }
        7 => {
            if let Some(m) = decoded::<drivers::InspectTaskResponse>(bytes) {
                recorded(&m);
            }
        }
        8 => {
            if let Some(m) = decoded::<drivers::TaskStatsResponse>(bytes) {
                recorded(&m);
            }
        }
        9 => {
            if let Some(m) = decoded::<drivers::ExecTaskStreamingResponse>(bytes) {
                recorded(&m);
            }
        }
        10 => {
            if let Some(m) = decoded::<drivers::DriverTaskEvent>(bytes) {
                recorded(&m);
            }
        }
        _ => {
            // grpc-status-details-bin of a failed call.
            let _ = StatusDetails::decode(bytes);
            let versions: Vec<String> = String::from_utf8_lossy(bytes)
                .split(',')
                .map(str::to_owned)
                .collect();
            let _ = negotiate_api_version(&versions);
        }
    }
}

/// What every recorded CSI call makes of an answer (serde's JSON rewritten to protobuf's).
fn csi_json<T: Serialize>(message: &T) -> serde_json::Value {
    crate::plugins::csi::protojson(serde_json::to_value(message).unwrap_or_default())
}

/// CSI answers decoded from the wire as prost decodes them, and what the harness reads of
/// them (the capability probe, the identity, controller, group and topology judges). The
/// first byte chooses the message.
pub fn csi_proto(data: &[u8]) {
    use crate::kinds::csi::probe;
    use crate::steps::csi as judges;
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    match which % 12 {
        0 => {
            if let Some(m) = decoded::<pb::GetPluginInfoResponse>(bytes) {
                let j = csi_json(&m);
                let _ = judges::domain_style(&m.name);
                let _ = j.get("vendor_version").and_then(|v| v.as_str());
            }
        }
        1 => {
            if let Some(m) = decoded::<pb::GetPluginCapabilitiesResponse>(bytes) {
                let _ = (probe::plugin_capabilities(&m), csi_json(&m));
            }
        }
        2 => {
            if let Some(m) = decoded::<pb::ProbeResponse>(bytes) {
                let _ = crate::steps::csi::ready::probe_says_ready(&m);
                let _ = judges::ready(&csi_json(&m));
            }
        }
        3 => {
            if let Some(m) = decoded::<pb::ControllerGetCapabilitiesResponse>(bytes) {
                let _ = (probe::controller_capabilities(&m), csi_json(&m));
            }
        }
        4 => {
            if let Some(m) = decoded::<pb::NodeGetCapabilitiesResponse>(bytes) {
                let _ = (probe::node_capabilities(&m), csi_json(&m));
            }
        }
        5 => {
            if let Some(m) = decoded::<pb::GroupControllerGetCapabilitiesResponse>(bytes) {
                let _ = (probe::group_capabilities(&m), csi_json(&m));
            }
        }
        6 => {
            if let Some(m) = decoded::<pb::NodeGetInfoResponse>(bytes) {
                let j = csi_json(&m);
                let node = m
                    .accessible_topology
                    .map(|t| t.segments)
                    .unwrap_or_default();
                if let Some(t) = j.get("accessible_topology") {
                    let _ = judges::reachable(t, &node);
                }
            }
        }
        7 => {
            if let Some(m) = decoded::<pb::CreateVolumeResponse>(bytes) {
                let j = csi_json(&m);
                let node = HashMap::from([("zone".to_string(), "a".to_string())]);
                let topologies = j
                    .pointer("/volume/accessible_topology")
                    .and_then(|t| t.as_array())
                    .cloned()
                    .unwrap_or_default();
                for t in &topologies {
                    let _ = judges::reachable(t, &node);
                }
            }
        }
        8 => {
            if let Some(m) = decoded::<pb::ValidateVolumeCapabilitiesResponse>(bytes) {
                let j = csi_json(&m);
                let confirmed = j
                    .pointer("/confirmed/volume_capabilities")
                    .and_then(|c| c.as_array())
                    .cloned()
                    .unwrap_or_default();
                for asked in [
                    serde_json::json!({"access_mode": {"mode": 1}, "mount": {"fs_type": "ext4", "mount_flags": ["noatime"]}}),
                    serde_json::json!({"access_mode": {"mode": 5}, "block": {}}),
                ] {
                    let _ = judges::nomad_compare(&asked, &confirmed);
                }
            }
        }
        9 => {
            if let Some(m) = decoded::<pb::GetVolumeGroupSnapshotResponse>(bytes) {
                let j = csi_json(&m);
                if let Some(g) = j.get("group_snapshot") {
                    let _ = judges::group_problems(g, &["vol-1".to_string(), "vol-2".to_string()]);
                }
            }
        }
        10 => {
            if let Some(m) = decoded::<pb::ListVolumesResponse>(bytes) {
                let _ = csi_json(&m);
            }
        }
        _ => {
            if let Some(m) = decoded::<pb::NodeGetVolumeStatsResponse>(bytes) {
                let _ = csi_json(&m);
            }
        }
    }
}

/// The reference Variables server's HTTP request parsing and handling: a lock client under
/// test writes the bytes. The first byte chooses the listener and the ACLs
/// (`nomad_conform_variables::fuzz_api::router`); the rest is what the client sends on one
/// connection (any number of requests), served by hyper as the server serves it, with no
/// socket.
pub fn variables_http(data: &[u8]) {
    use tower::ServiceExt as _;
    let Some((&mode, bytes)) = data.split_first() else {
        return;
    };
    let router = nomad_conform_variables::fuzz_api::router(mode);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime");
    let io = hyper_util::rt::TokioIo::new(Script {
        input: bytes.to_vec(),
        at: 0,
        written: 0,
    });
    let service = hyper::service::service_fn(move |request| router.clone().oneshot(request));
    runtime.block_on(async move {
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(io, service)
            .await;
    });
}

/// A connection that reads `input` and then its end, and takes in whatever is written.
struct Script {
    input: Vec<u8>,
    at: usize,
    written: usize,
}

impl tokio::io::AsyncRead for Script {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let n = buf.remaining().min(self.input.len() - self.at);
        let at = self.at;
        buf.put_slice(&self.input[at..at + n]);
        self.at += n;
        std::task::Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncWrite for Script {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.written += buf.len();
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

fn attr(name: &str, ty: &str, required: bool) -> (String, SpecTree) {
    (
        name.to_string(),
        SpecTree::Attr {
            name: name.to_string(),
            ty: Type::parse(ty).expect("a type"),
            required,
        },
    )
}

/// A plugin configuration schema with every kind of spec: attributes of each type, blocks,
/// block lists, sets and maps, `block_attrs` and a default.
fn config_spec() -> SpecTree {
    let nested = SpecTree::Object(BTreeMap::from([
        attr("name", "string", true),
        attr("size", "number", false),
    ]));
    SpecTree::Object(BTreeMap::from([
        attr("command", "string", false),
        attr("args", "list(string)", false),
        attr("count", "number", false),
        attr("enabled", "bool", false),
        attr("labels", "map(string)", false),
        attr("ports", "set(number)", false),
        attr("anything", "any", false),
        attr("pair", "tuple([string, number])", false),
        attr("obj", "object({a = string, b = list(bool)})", false),
        (
            "period".to_string(),
            SpecTree::Default {
                primary: Box::new(SpecTree::Attr {
                    name: "period".into(),
                    ty: Type::String,
                    required: false,
                }),
                default: Box::new(SpecTree::Literal {
                    source: "\"30s\"".into(),
                    value: nomad_conform_hclspec::Value::string("30s"),
                }),
            },
        ),
        (
            "auth".to_string(),
            SpecTree::Block {
                name: "auth".into(),
                required: false,
                nested: Box::new(nested.clone()),
            },
        ),
        (
            "mounts".to_string(),
            SpecTree::BlockList {
                name: "mount".into(),
                min_items: 0,
                max_items: 3,
                nested: Box::new(nested.clone()),
            },
        ),
        (
            "devices".to_string(),
            SpecTree::BlockSet {
                name: "device".into(),
                min_items: 0,
                max_items: 0,
                nested: Box::new(nested.clone()),
            },
        ),
        (
            "volumes".to_string(),
            SpecTree::BlockMap {
                name: "volume".into(),
                labels: vec!["name".into(), "kind".into()],
                nested: Box::new(nested),
            },
        ),
        (
            "env".to_string(),
            SpecTree::BlockAttrs {
                name: "env".into(),
                element_type: Type::String,
                required: false,
            },
        ),
    ]))
}

/// A plugin configuration file (`--plugin-config`), HCL or JSON as the first byte says,
/// decoded against a schema with every kind of spec and encoded as Nomad sends it.
pub fn plugin_config(data: &[u8]) {
    use crate::steps::driver::PluginConfigSource;
    let Some((&which, text)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(text).into_owned();
    let source = if which & 1 == 0 {
        PluginConfigSource::Hcl(text)
    } else {
        PluginConfigSource::Json(text)
    };
    let _ = source.is_empty();
    let _ = source.encode(&Ok(config_spec()), false);
}

/// A `--tasks` file (HCL, or TOML as the first byte says): checked as the harness loads it,
/// then each shape rendered against a task schema like the reference driver's.
pub fn task_shapes(data: &[u8]) {
    use crate::steps::driver::tasks::{Placeholders, Shapes};
    let Some((&which, text)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(text).into_owned();
    let Ok(shapes) = Shapes::from_text(text, which & 1 == 1, "tasks") else {
        return;
    };
    let spec = SpecTree::Object(BTreeMap::from([
        attr("command", "string", true),
        attr("args", "list(string)", false),
        attr("env", "map(string)", false),
    ]));
    let p = Placeholders {
        code: 3,
        stdout: "out".into(),
        stderr: "err".into(),
        file: "f".into(),
    };
    for shape in shapes.names(&p).unwrap_or_default() {
        let _ = shapes.render(&shape, &p, &spec);
    }
}

/// A `--tags` expression, parsed and evaluated against a clause's tags.
pub fn tags(data: &[u8]) {
    use cucumber::tag::Ext as _;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match crate::run::parse_tags(text) {
        Ok(op) => {
            let tags = ["must".to_string(), "DHV-FINGERPRINT-VERSION".to_string()];
            let _ = op.eval(tags.iter());
            let _ = op.eval(std::iter::empty::<&str>());
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// `/proc/self/mountinfo` (the kernel writes it, but a path in it is any user's bytes).
pub fn mountinfo(data: &[u8]) {
    if let Ok(table) = crate::mounts::MountTable::parse(data) {
        let _ = table.under(Path::new("/tmp"));
        let _ = table.contains(Path::new("/"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every committed corpus input and crash regression (`fuzz/corpus/<target>/`,
    /// `fuzz/regressions/<target>/`) goes through its target again: what once crashed stays
    /// fixed, and a change that crashes on a corpus input fails here, without libFuzzer.
    #[test]
    fn every_corpus_and_regression_input_replays() {
        let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
        let mut counts = Vec::new();
        for (name, target) in TARGETS {
            assert!(
                fuzz.join("fuzz_targets")
                    .join(format!("{name}.rs"))
                    .is_file(),
                "no fuzz target for {name}"
            );
            let mut n = 0;
            for dir in ["corpus", "regressions"] {
                let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join(name)) else {
                    continue;
                };
                let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
                files.sort();
                for f in files {
                    let data = std::fs::read(&f).unwrap();
                    let r = std::panic::catch_unwind(|| target(&data));
                    assert!(r.is_ok(), "{name} panics on {}", f.display());
                    n += 1;
                }
            }
            assert!(n > 0, "{name}: no corpus input");
            counts.push(format!("{name} {n}"));
        }
        eprintln!("replayed: {}", counts.join(", "));
    }

    /// Seeds the corpora from the fixtures and the reference plugins (and a few inputs written
    /// here for what they lack): `cargo test -p nomad-conform --lib fuzz_api -- --ignored`.
    /// Files are named `seed-*` (what the fuzzers add is named by its hash).
    #[test]
    #[ignore = "writes fuzz/corpus; run by hand"]
    fn write_seed_corpora() {
        use crate::plugins::driver::hclspec as hs;
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let corpus = root.join("fuzz/corpus");
        let put = |target: &str, name: &str, data: &[u8]| {
            let dir = corpus.join(target);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("seed-{name}")), data).unwrap();
        };
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();

        // handshake: the reference driver's line, its faults' lines, the host's edge cases.
        for (i, line) in [
            "1|2|unix|/tmp/plugin1234/p.sock|grpc|\n",
            "1|2|unix",
            "1|1|unix|/tmp/p.sock|grpc|",
            "2|2|unix|/tmp/p.sock|grpc|",
            "1|2|unix|/tmp/p.sock|netrpc|",
            "1|2|tcp|127.0.0.1:10000|grpc|\r\n",
            "1|2|tcp|[::1]:1|grpc||true",
            "1|2|tcp|localhost:1|grpc|",
            "+1|02|tcp|:70000|grpc|",
            "starting plugin...\n1|2|unix|/p|grpc|",
        ]
        .iter()
        .enumerate()
        {
            put("handshake", &i.to_string(), line.as_bytes());
        }

        // hclog: the reference driver's JSON entries, plain and bracketed lines, a Go panic.
        let stderr = concat!(
            r#"{"@level":"info","@message":"plugin started","@module":"exec-reference","@timestamp":"2024-05-01T10:00:00.000000Z","pid":42}"#,
            "\n",
            r#"{"@level":"DEBUG","@message":"x","@timestamp":"2024-05-01T10:00:00.000000+02:00"}"#,
            "\r\n",
            r#"{"@level":"warn","@message":"bad time","@timestamp":"2024-05-01 10:00:00"}"#,
            "\n",
            r#"{"@level":1,"@message":"not a string level"}"#,
            "\n[WARN] plain warning\n[ERROR] plain error\n",
            "panic: runtime error: index out of range\n\ngoroutine 1 [running]:\nmain.main()\n",
        );
        for (i, chunk) in [255u8, 1, 7].iter().enumerate() {
            let mut d = vec![*chunk];
            d.extend_from_slice(stderr.as_bytes());
            put("hclog", &i.to_string(), &d);
        }

        // dhv_json: every JSON answer the DHV fixtures and reference plugins print.
        let mut answers = std::collections::BTreeSet::new();
        let mut scripts = vec![
            root.join("reference-plugins/dhv/mkdir"),
            root.join("reference-plugins/dhv/ext4-image"),
            root.join("fixtures/dhv/lib/base.sh"),
        ];
        for e in std::fs::read_dir(root.join("fixtures/dhv")).unwrap() {
            scripts.push(e.unwrap().path().join("plugin"));
        }
        for script in scripts {
            let Ok(text) = std::fs::read_to_string(&script) else {
                continue;
            };
            for part in text.split("printf '").skip(1) {
                let Some(end) = part.find('\'') else { continue };
                let fmt = &part[..end];
                if fmt.starts_with('{') || fmt.starts_with('[') {
                    answers.insert(
                        fmt.replacen("%s", "/tmp/volumes/v1", 1)
                            .replacen("%s", "0", 1)
                            .replace("\\n", "\n"),
                    );
                }
            }
        }
        answers.extend(
            [
                "{\"PATH\":\"/q\",\"byte\u{17f}\":7}",
                "{\"version\":\"1.2.3-beta.1+meta\",\"Version\":\"v2\"}",
                "{\"path\":\"a\\u0000b\",\"bytes\":9223372036854775808}",
                "{\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],\"path\":\"/p\"}",
                "null",
                "[1,2]",
                "\"1.0\"",
                "{} {}",
            ]
            .map(String::from),
        );
        for (i, a) in answers.iter().enumerate() {
            put("dhv_json", &i.to_string(), a.as_bytes());
        }

        // plugin_config and cty_msgpack: the fixtures' plugin configurations, and one that
        // uses every spec of the fuzzed schema; each decoded configuration encoded as Nomad
        // sends it (go-cty) and as its own tests do (plain).
        let full = r#"command = "/bin/sh"
args = ["-c", "echo ${x}"]
count = 3
enabled = true
labels = { a = "b" }
ports = [80, 443, 80]
anything = { k = [1, "two", true] }
pair = ["a", 1]
obj = { a = "x", b = [true] }
auth { name = "n" }
mount { name = "a" size = 1 }
mount { name = "b" }
device { name = "d" }
volume "data" "host" { name = "v" }
env { PATH = "/bin" }
"#;
        let configs = [
            (0u8, read("fixtures/driver/plugin.hcl")),
            (1u8, read("fixtures/driver/variant-tasks-file/plugin.json")),
            (0u8, full.to_string()),
            (1u8, r#"{"command": "/bin/sh", "mount": [{"name": "a"}, {"name": "b", "size": 2}], "volume": {"data": {"host": {"name": "v"}}}, "period": null, "//": "comment"}"#.to_string()),
        ];
        for (i, (which, text)) in configs.iter().enumerate() {
            let mut d = vec![*which];
            d.extend_from_slice(text.as_bytes());
            put("plugin_config", &i.to_string(), &d);
            let source = if *which == 0 {
                crate::steps::driver::PluginConfigSource::Hcl(text.clone())
            } else {
                crate::steps::driver::PluginConfigSource::Json(text.clone())
            };
            if let Ok(e) = source.encode(&Ok(config_spec()), false) {
                put("cty_msgpack", &format!("{i}-cty"), &e.cty);
                put("cty_msgpack", &format!("{i}-plain"), &e.plain);
            }
        }

        // task_shapes: the fixtures' --tasks files, and one in TOML.
        for (i, p) in [
            "fixtures/driver/tasks.hcl",
            "fixtures/driver/variant-tasks-file/tasks.hcl",
            "fixtures/driver/variant-invisible-slow-exit/tasks.hcl",
        ]
        .iter()
        .enumerate()
        {
            if let Ok(text) = std::fs::read_to_string(root.join(p)) {
                let mut d = vec![0u8];
                d.extend_from_slice(text.as_bytes());
                put("task_shapes", &i.to_string(), &d);
            }
        }
        put(
            "task_shapes",
            "toml",
            b"\x01[shape.exit.config]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"exit {code}\"]\n[shape.long.config]\ncommand = \"/bin/sleep\"\nargs = [\"3600\"]\n",
        );

        // tags: expressions as README and the tests write them.
        for (i, t) in [
            "@must",
            "not @should",
            "@must and not @DHV-CREATE-CAPACITY",
            "(@must or @should) and not (@DRIVER-EXEC-TTY or @DRIVER-EXEC-RESIZE)",
            "not not (@a or (not @b))",
            "@a and",
        ]
        .iter()
        .enumerate()
        {
            put("tags", &i.to_string(), t.as_bytes());
        }

        // mountinfo: this machine's table and the unit test's.
        put(
            "mountinfo",
            "proc",
            &std::fs::read("/proc/self/mountinfo").unwrap(),
        );
        put(
            "mountinfo",
            "escapes",
            b"22 1 8:1 / / rw - ext4 /dev/vda rw\n30 22 0:5 / /tmp/a\\040b rw - tmpfs t rw\n31 22 0:6 / /tmp/\xff\xfe rw - tmpfs t rw\n32 22 0:7 / /tmp/w/vol/sub rw - tmpfs t rw\n",
        );

        // variables_http: what the reference lock client sends, and the admin APIs.
        let req = |method: &str, uri: &str, headers: &str, body: &str| {
            format!(
                "{method} {uri} HTTP/1.1\r\nHost: 127.0.0.1:4646\r\n{headers}Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        let acquire = req(
            "PUT",
            "/v1/var/nomad/jobs/example/lock?lock-acquire&namespace=default",
            "Content-Type: application/json\r\nX-Nomad-Token: fuzz-management\r\n",
            r#"{"Path":"nomad/jobs/example/lock","Namespace":"default","Lock":{"TTL":"15s","LockDelay":"15s"}}"#,
        );
        let renew = req(
            "PUT",
            "/v1/var/nomad/jobs/example/lock?lock-renew",
            "Authorization: Bearer fuzz-client\r\n",
            r#"{"Path":"nomad/jobs/example/lock","Namespace":"default","Lock":{"ID":"00000000-0000-0000-0000-000000000000"}}"#,
        );
        let release = req(
            "PUT",
            "/v1/var/nomad/jobs/example/lock?lock-release&cas=",
            "",
            r#"{"Path":"nomad/jobs/example/lock","Namespace":"default","Lock":{"ID":"x"},"Items":{}}"#,
        );
        let upsert = req(
            "PUT",
            "/v1/var/app/config?cas=0",
            "X-Nomad-Token: fuzz-client\r\n",
            r#"{"Path":"app/config","Items":{"k":"v"}}"#,
        );
        let get = req("GET", "/v1/var/app/config?namespace=default", "", "");
        let list = req(
            "GET",
            "/v1/vars?prefix=app",
            "X-Nomad-Token: fuzz-workload\r\n",
            "",
        );
        let delete = req("DELETE", "/v1/var/app/config?cas=1", "", "");
        let odd = req("PUT", "/v1/var//a/./b/../c%20d", "", "");
        let policy = req(
            "POST",
            "/v1/acl/policy/readers",
            "X-Nomad-Token: fuzz-management\r\n",
            r#"{"Name":"readers","Rules":"namespace \"default\" { variables { path \"*\" { capabilities = [\"read\"] } } }"}"#,
        );
        let token = req(
            "POST",
            "/v1/acl/token",
            "X-Nomad-Token: fuzz-management\r\n",
            r#"{"Name":"t","Type":"client","Policies":["readers"]}"#,
        );
        let namespace = req("POST", "/v1/namespace/prod", "", r#"{"Name":"prod"}"#);
        let chunked = "PUT /v1/var/a?lock-acquire HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n".to_string();
        for (i, (mode, text)) in [
            (0u8, format!("{acquire}{renew}{release}")),
            (4u8, format!("{acquire}{upsert}{get}{list}{delete}")),
            (6u8, format!("{list}{acquire}")),
            (1u8, odd),
            (4u8, format!("{policy}{token}{namespace}")),
            (0u8, chunked),
        ]
        .iter()
        .enumerate()
        {
            let mut d = vec![*mode];
            d.extend_from_slice(text.as_bytes());
            put("variables_http", &i.to_string(), &d);
        }

        // driver_proto: the reference driver's answers, prost-encoded, behind their selector.
        let spec = |block| hs::Spec { block: Some(block) };
        let attr = |name: &str, ty: &str, required| {
            spec(hs::spec::Block::Attr(hs::Attr {
                name: name.into(),
                r#type: ty.into(),
                required,
            }))
        };
        let literal = |v: &str| spec(hs::spec::Block::Literal(hs::Literal { value: v.into() }));
        let config_schema = spec(hs::spec::Block::Object(hs::Object {
            attributes: HashMap::from([
                (
                    "fingerprint_period".to_string(),
                    spec(hs::spec::Block::Default(Box::new(hs::Default {
                        primary: Some(Box::new(attr("fingerprint_period", "string", false))),
                        default: Some(Box::new(literal("\"30s\""))),
                    }))),
                ),
                (
                    "extra_attributes".to_string(),
                    attr("extra_attributes", "map(string)", false),
                ),
                (
                    "mounts".to_string(),
                    spec(hs::spec::Block::BlockList(Box::new(hs::BlockList {
                        name: "mount".into(),
                        min_items: 0,
                        max_items: 2,
                        nested: Some(Box::new(attr("source", "string", true))),
                    }))),
                ),
                ("any".to_string(), literal("[1, \"a\", {b = true}]")),
            ]),
        }));
        let task_schema = spec(hs::spec::Block::Object(hs::Object {
            attributes: HashMap::from([
                ("command".to_string(), attr("command", "string", true)),
                ("args".to_string(), attr("args", "list(string)", false)),
            ]),
        }));
        let mut driver: Vec<(u8, Vec<u8>)> = vec![
            (
                0,
                base::PluginInfoResponse {
                    r#type: base::PluginType::Driver as i32,
                    plugin_api_versions: vec!["v0.1.0".into(), "0.2.0".into()],
                    plugin_version: "0.1.0-dev".into(),
                    name: "exec-reference".into(),
                }
                .encode_to_vec(),
            ),
            (
                1,
                base::ConfigSchemaResponse {
                    spec: Some(config_schema),
                }
                .encode_to_vec(),
            ),
            (
                2,
                drivers::TaskConfigSchemaResponse {
                    spec: Some(task_schema),
                }
                .encode_to_vec(),
            ),
            (
                3,
                drivers::CapabilitiesResponse {
                    capabilities: Some(drivers::DriverCapabilities {
                        send_signals: true,
                        exec: true,
                        fs_isolation: 1,
                        ..Default::default()
                    }),
                }
                .encode_to_vec(),
            ),
            (
                4,
                drivers::FingerprintResponse {
                    attributes: HashMap::from([(
                        "driver.exec-reference".to_string(),
                        crate::plugins::driver::structs::Attribute {
                            value: Some(
                                crate::plugins::driver::structs::attribute::Value::BoolVal(true),
                            ),
                            unit: String::new(),
                        },
                    )]),
                    health: 2,
                    health_description: "healthy".into(),
                    ..Default::default()
                }
                .encode_to_vec(),
            ),
            (
                5,
                drivers::StartTaskResponse {
                    result: 0,
                    driver_error_msg: String::new(),
                    handle: Some(drivers::TaskHandle {
                        version: 1,
                        config: None,
                        state: 1,
                        driver_state: vec![0x81, 0xa3, b'p', b'i', b'd', 0x2a],
                    }),
                    network_override: None,
                }
                .encode_to_vec(),
            ),
            (
                6,
                drivers::WaitTaskResponse {
                    result: Some(drivers::ExitResult {
                        exit_code: 3,
                        signal: 0,
                        oom_killed: false,
                    }),
                    err: String::new(),
                }
                .encode_to_vec(),
            ),
            (
                9,
                drivers::ExecTaskStreamingResponse {
                    stdout: Some(drivers::ExecTaskStreamingIoOperation {
                        data: b"hello\n".to_vec(),
                        close: false,
                    }),
                    ..Default::default()
                }
                .encode_to_vec(),
            ),
            (11, b"v0.1.0,0.1.0,v0.2.0-beta".to_vec()),
        ];
        // google.rpc.Status{code: 2, message: "boom", details: [RecoverableError{true}]}
        let any = prost_types::Any {
            type_url: crate::plugins::driver::RECOVERABLE_ERROR_TYPE_URL.into(),
            value: vec![0x08, 0x01],
        }
        .encode_to_vec();
        let mut status = vec![0x08, 0x02, 0x12, 0x04, b'b', b'o', b'o', b'm', 0x1a];
        status.push(u8::try_from(any.len()).unwrap());
        status.extend_from_slice(&any);
        driver.push((11, status));
        for (i, (which, bytes)) in driver.iter().enumerate() {
            let mut d = vec![*which];
            d.extend_from_slice(bytes);
            put("driver_proto", &i.to_string(), &d);
        }

        // csi_proto: the reference csi-hostpath plugin's kind of answers.
        let mount_cap = pb::VolumeCapability {
            access_mode: Some(pb::volume_capability::AccessMode { mode: 1 }),
            access_type: Some(pb::volume_capability::AccessType::Mount(
                pb::volume_capability::MountVolume {
                    fs_type: "ext4".into(),
                    mount_flags: vec!["noatime".into()],
                    volume_mount_group: String::new(),
                },
            )),
        };
        let topology = pb::Topology {
            segments: HashMap::from([("zone".to_string(), "a".to_string())]),
        };
        let volume = pb::Volume {
            capacity_bytes: 1 << 20,
            volume_id: "vol-1".into(),
            accessible_topology: vec![topology.clone()],
            ..Default::default()
        };
        let svc = |t| pb::PluginCapability {
            r#type: Some(pb::plugin_capability::Type::Service(
                pb::plugin_capability::Service { r#type: t },
            )),
        };
        let csi: Vec<(u8, Vec<u8>)> = vec![
            (
                0,
                pb::GetPluginInfoResponse {
                    name: "hostpath.csi.example.com".into(),
                    vendor_version: "0.1.0".into(),
                    manifest: HashMap::from([("k".to_string(), "v".to_string())]),
                }
                .encode_to_vec(),
            ),
            (
                1,
                pb::GetPluginCapabilitiesResponse {
                    capabilities: vec![
                        svc(1),
                        svc(3),
                        pb::PluginCapability {
                            r#type: Some(pb::plugin_capability::Type::VolumeExpansion(
                                pb::plugin_capability::VolumeExpansion { r#type: 1 },
                            )),
                        },
                    ],
                }
                .encode_to_vec(),
            ),
            (2, pb::ProbeResponse { ready: Some(false) }.encode_to_vec()),
            (
                3,
                pb::ControllerGetCapabilitiesResponse {
                    capabilities: (1..6)
                        .map(|t| pb::ControllerServiceCapability {
                            r#type: Some(pb::controller_service_capability::Type::Rpc(
                                pb::controller_service_capability::Rpc { r#type: t },
                            )),
                        })
                        .collect(),
                }
                .encode_to_vec(),
            ),
            (
                6,
                pb::NodeGetInfoResponse {
                    node_id: "node-1".into(),
                    max_volumes_per_node: 3,
                    accessible_topology: Some(topology.clone()),
                }
                .encode_to_vec(),
            ),
            (
                7,
                pb::CreateVolumeResponse {
                    volume: Some(volume.clone()),
                }
                .encode_to_vec(),
            ),
            (
                8,
                pb::ValidateVolumeCapabilitiesResponse {
                    confirmed: Some(pb::validate_volume_capabilities_response::Confirmed {
                        volume_context: HashMap::new(),
                        volume_capabilities: vec![mount_cap],
                        parameters: HashMap::new(),
                        mutable_parameters: HashMap::new(),
                    }),
                    message: String::new(),
                }
                .encode_to_vec(),
            ),
            (
                10,
                pb::ListVolumesResponse {
                    entries: vec![pb::list_volumes_response::Entry {
                        volume: Some(volume),
                        status: None,
                    }],
                    next_token: "2".into(),
                }
                .encode_to_vec(),
            ),
        ];
        for (i, (which, bytes)) in csi.iter().enumerate() {
            let mut d = vec![*which];
            d.extend_from_slice(bytes);
            put("csi_proto", &i.to_string(), &d);
        }
    }
}
