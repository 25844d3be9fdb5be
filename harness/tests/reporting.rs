//! Reports from the command line: every report format from one run, re-rendering and merging
//! with `report`, shards, the config file and NOMAD_CONFORM_* precedence, list and completions.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use nomad_conform_reports::model::RunRecord;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/dhv")
        .join(name)
        .join("plugin")
}

fn read_record(p: &Path) -> RunRecord {
    nomad_conform_reports::json::parse(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = bin().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn one_run_writes_every_format_and_report_renders_them_again() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).display().to_string();
    let plugin = fixture("create-not-idempotent");
    let (code, stdout, _) = run(&[
        "dhv",
        plugin.to_str().unwrap(),
        "--tags",
        "@DHV-CREATE-IDEMPOTENT or @DHV-FINGERPRINT-EXIT-ZERO",
        "--junit",
        &p("a.xml"),
        "--html",
        &p("a.html"),
        "--json",
        &p("a.json"),
    ]);
    assert_eq!(code, 1, "{stdout}");
    let record = read_record(&dir.path().join("a.json"));
    assert_eq!(record.cases.len(), 2);
    assert!(
        record.environment.kernel.len() > 2,
        "{:?}",
        record.environment
    );

    // The record validates against the committed schema.
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../reports/schema/run-record.v1.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("a.json")).unwrap()).unwrap();
    assert!(jsonschema::is_valid(&schema, &json));

    // Re-rendered from the record alone, the reports are the same files.
    let (code, stdout, _) = run(&[
        "report",
        &p("a.json"),
        "--junit",
        &p("b.xml"),
        "--html",
        &p("b.html"),
        "--json",
        &p("b.json"),
    ]);
    assert_eq!(code, 1, "report exits like the run: {stdout}");
    assert!(stdout.contains("verdict: not conformant"), "{stdout}");
    for (a, b) in [
        ("a.xml", "b.xml"),
        ("a.html", "b.html"),
        ("a.json", "b.json"),
    ] {
        assert_eq!(
            std::fs::read_to_string(dir.path().join(a)).unwrap(),
            std::fs::read_to_string(dir.path().join(b)).unwrap(),
            "{a} vs {b}"
        );
    }
}

#[test]
fn shards_partition_the_clauses_and_merge_into_the_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../reference-plugins/dhv/mkdir");
    let mut ids = Vec::new();
    let mut files = Vec::new();
    for shard in ["1/3", "2/3", "3/3"] {
        let f = dir.path().join(format!("shard-{}.json", &shard[..1]));
        let (code, stdout, stderr) = run(&[
            "dhv",
            plugin.to_str().unwrap(),
            "--shard",
            shard,
            "--json",
            f.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(stdout.contains(&format!("shard {shard}")), "{stdout}");
        let r = read_record(&f);
        assert_eq!(r.shard.map(|s| s.to_string()), Some(shard.to_string()));
        assert!(!r.cases.is_empty(), "every shard gets clauses");
        ids.extend(r.cases.iter().map(|c| c.clause.clone()));
        files.push(f);
    }
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no clause runs in two shards");
    let (_, listing, _) = run(&["list", "dhv"]);
    assert_eq!(
        ids.len(),
        listing.lines().count(),
        "every clause runs in some shard"
    );

    let merged = dir.path().join("merged.json");
    let mut args: Vec<String> = vec!["report".into(), "--merge".into()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(["--json".into(), merged.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, _) = run(&args);
    assert_eq!(code, 0, "{stdout}");
    let m = read_record(&merged);
    assert_eq!(m.cases.len(), ids.len());
    assert_eq!(m.merged_from.len(), 3);
    assert!(m.shard.is_none());

    // Merging a shard with itself is refused; several records need --merge.
    let one = files[0].display().to_string();
    let (code, _, stderr) = run(&["report", "--merge", &one, &one]);
    assert_eq!(code, 2);
    assert!(stderr.contains("is in both run"), "{stderr}");
    let (code, _, stderr) = run(&["report", &one, &one]);
    assert_eq!(code, 2);
    assert!(stderr.contains("add --merge"), "{stderr}");
}

#[test]
fn bad_shards_and_records_are_usage_errors() {
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../reference-plugins/dhv/mkdir");
    for bad in ["0/3", "4/3", "x", "1/0", "2-3"] {
        let (code, _, stderr) = run(&["dhv", plugin.to_str().unwrap(), "--shard", bad]);
        assert_eq!(code, 2, "{bad}: {stderr}");
        assert!(stderr.contains("--shard"), "{stderr}");
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x.json");
    std::fs::write(&f, "{\"hello\": 1}").unwrap();
    let (code, _, stderr) = run(&["report", f.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("x.json"), "{stderr}");
    let (code, _, stderr) = run(&["report", "/nonexistent.json"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("failed to read"), "{stderr}");
}

#[test]
fn config_file_then_environment_then_flags() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../reference-plugins/dhv/mkdir");
    std::fs::write(
        dir.path().join("nomad-conform.toml"),
        format!(
            "quiet = true\n[dhv]\nplugin = {:?}\ntags = \"@DHV-FINGERPRINT-EXIT-ZERO\"\njson = \"from-file.json\"\n",
            plugin.display()
        ),
    )
    .unwrap();
    // The file alone: plugin, tags and json all come from it; quiet prints two lines.
    let out = bin().current_dir(dir.path()).arg("dhv").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    assert_eq!(
        read_record(&dir.path().join("from-file.json")).cases.len(),
        1
    );

    // The environment beats the file.
    let out = bin()
        .current_dir(dir.path())
        .env(
            "NOMAD_CONFORM_TAGS",
            "@DHV-DELETE-EXIT-ZERO or @DHV-CREATE-EXIT-ZERO",
        )
        .env("NOMAD_CONFORM_JSON", "from-env.json")
        .arg("dhv")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        read_record(&dir.path().join("from-env.json")).cases.len(),
        2
    );

    // Flags beat both.
    let out = bin()
        .current_dir(dir.path())
        .env(
            "NOMAD_CONFORM_TAGS",
            "@DHV-DELETE-EXIT-ZERO or @DHV-CREATE-EXIT-ZERO",
        )
        .args(["dhv", "--tags", "@must", "--json", "from-flag.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(read_record(&dir.path().join("from-flag.json")).cases.len() > 20);

    // A broken config file is a one-line usage error.
    std::fs::write(dir.path().join("nomad-conform.toml"), "[dhv]\nnope = 1\n").unwrap();
    let out = bin()
        .current_dir(dir.path())
        .args(["dhv", "/x"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("unknown setting \"nope\" in [dhv]"),
        "{stderr}"
    );
}

#[test]
fn list_as_json() {
    let (code, stdout, _) = run(&["list", "dhv", "--format", "json"]);
    assert_eq!(code, 0);
    let items: Vec<serde_json::Value> = serde_json::from_str(&stdout).unwrap();
    assert!(items.len() > 30);
    let c = items
        .iter()
        .find(|i| i["id"] == "DHV-DELETE-AUTO-DELETE-KEEPS-OTHERS")
        .unwrap();
    assert_eq!(c["level"], "must");
    assert_eq!(c["operation"], "delete");
    assert!(c["text"].as_str().unwrap().contains("DHV_CREATED_PATH"));
    assert_eq!(c["file"], "specs/dhv/03_delete.feature");
}

#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, stdout, _) = run(&["completions", shell]);
        assert_eq!(code, 0, "{shell}");
        assert!(stdout.contains("nomad-conform"), "{shell}");
        assert!(
            stdout.contains("capacity-min"),
            "{shell}: flags are completed"
        );
    }
    let (code, _, _) = run(&["completions", "tcsh"]);
    assert_eq!(code, 2);
}

#[test]
fn a_report_file_that_cannot_be_written_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../reference-plugins/dhv/mkdir");
    let json = dir.path().join("ok.json");
    let (code, stdout, stderr) = run(&[
        "dhv",
        plugin.to_str().unwrap(),
        "--tags",
        "@DHV-FINGERPRINT-EXIT-ZERO",
        "--junit",
        "/nonexistent/dir/out.xml",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--junit /nonexistent/dir/out.xml")
            && stderr.contains("does not exist")
            && stderr.contains("nothing was run"),
        "{stderr}"
    );
    assert!(!stdout.contains("PASS"), "the suite ran: {stdout}");
    assert!(!json.exists(), "nothing is written when the run is refused");
}
