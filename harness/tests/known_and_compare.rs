//! A list of known failures (`--known-failures`) and `report --compare`, end to end through the
//! binary: two real DHV runs (the reference plugin, and a fixture whose create exits 1), the
//! list checked before anything runs, the comparison both ways.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn nc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const TAGS: &str = "@must and not @DHV-CREATE-RESTORE";

/// A DHV run of `plugin` (relative to the workspace) writing its record to `json`.
fn run(plugin: &str, json: &Path, extra: &[&str]) -> Output {
    let plugin = root().join(plugin);
    let mut args = vec![
        "dhv",
        plugin.to_str().unwrap(),
        "--seed",
        "3",
        "--tags",
        TAGS,
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    nc(&args)
}

#[test]
fn compare_names_new_failures_and_fixed_clauses_and_fails_only_for_the_worse() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    let bad = dir.path().join("bad.json");
    let o = run("reference-plugins/dhv/mkdir", &good, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run("fixtures/dhv/create-exits-nonzero/plugin", &bad, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));

    let html = dir.path().join("changes.html");
    let junit = dir.path().join("changes.xml");
    let worse = nc(&[
        "report",
        "--compare",
        good.to_str().unwrap(),
        bad.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let out = text(&worse);
    assert_eq!(worse.status.code(), Some(1), "{out}");
    assert!(out.contains("New failures ("), "{out}");
    assert!(out.contains("DHV-CREATE-EXIT-ZERO"), "{out}");
    assert!(!out.contains("Fixed ("), "{out}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("DHV-CREATE-EXIT-ZERO") && xml.contains("<failure"),
        "{xml}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("DHV-CREATE-EXIT-ZERO"),
        "the HTML names the clause"
    );

    let better = nc(&[
        "report",
        "--compare",
        bad.to_str().unwrap(),
        good.to_str().unwrap(),
    ]);
    let out = text(&better);
    assert_eq!(better.status.code(), Some(0), "{out}");
    assert!(
        out.contains("Fixed (") && out.contains("DHV-CREATE-EXIT-ZERO"),
        "{out}"
    );
    assert!(!out.contains("New failures ("), "{out}");

    let same = nc(&[
        "report",
        "--compare",
        good.to_str().unwrap(),
        good.to_str().unwrap(),
    ]);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));
    assert!(
        text(&same).contains("no verdict changed"),
        "{}",
        text(&same)
    );

    // Two records or none: a usage error.
    let one = nc(&["report", "--compare", good.to_str().unwrap()]);
    assert_eq!(one.status.code(), Some(2), "{}", text(&one));
}

#[test]
fn a_list_of_known_failures_is_checked_before_the_run_and_applied_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("known.toml");
    let json = dir.path().join("run.json");

    // A clause the suite does not have: refused before anything runs (no record written).
    std::fs::write(
        &list,
        "[[known-failure]]\nclause = \"DHV-NO-SUCH-CLAUSE\"\nreason = \"typo\"\n",
    )
    .unwrap();
    let o = run(
        "fixtures/dhv/create-exits-nonzero/plugin",
        &json,
        &["--known-failures", list.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("DHV-NO-SUCH-CLAUSE"), "{}", text(&o));
    assert!(!json.exists(), "nothing ran");

    // An entry without a reason: refused too.
    std::fs::write(
        &list,
        "[[known-failure]]\nclause = \"DHV-CREATE-EXIT-ZERO\"\n",
    )
    .unwrap();
    let o = run(
        "fixtures/dhv/create-exits-nonzero/plugin",
        &json,
        &["--known-failures", list.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    // The known bug: the run passes, and says it was known.
    std::fs::write(
        &list,
        "[[known-failure]]\nclause = \"DHV-CREATE-EXIT-ZERO\"\nreason = \"create exits 1 (issue 7)\"\n",
    )
    .unwrap();
    let o = run(
        "fixtures/dhv/create-exits-nonzero/plugin",
        &json,
        &["--known-failures", list.to_str().unwrap()],
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("issue 7"), "the list's reason is shown: {out}");

    // The same entry, expired: it excuses nothing.
    std::fs::write(
        &list,
        "[[known-failure]]\nclause = \"DHV-CREATE-EXIT-ZERO\"\nreason = \"create exits 1\"\nexpires = 2020-01-01\n",
    )
    .unwrap();
    let o = nc(&[
        "report",
        json.to_str().unwrap(),
        "--known-failures",
        list.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("expired"), "{}", text(&o));

    // A plugin that no longer fails: the entry is reported fixed, a failure under --strict.
    std::fs::write(
        &list,
        "[[known-failure]]\nclause = \"DHV-CREATE-EXIT-ZERO\"\nreason = \"create exits 1\"\n",
    )
    .unwrap();
    let good = dir.path().join("good.json");
    let o = run(
        "reference-plugins/dhv/mkdir",
        &good,
        &["--known-failures", list.to_str().unwrap()],
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("remove it from the list"), "{out}");
    let o = nc(&[
        "report",
        good.to_str().unwrap(),
        "--known-failures",
        list.to_str().unwrap(),
        "--strict",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}
