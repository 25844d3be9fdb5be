//! The field in CI: real plugins the tests can get on a fresh machine, run against their ledger
//! entries exactly (fixtures/field/). Here the Nomad documentation's own DHV example,
//! custom-mkdir, extracted from the documentation's text; and every ledger file checked for the
//! facts a reader needs.

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use nomad_conform_reports::model::RunRecord;
use support::field::Ledger;

const BIN: &str = env!("CARGO_BIN_EXE_nomad-conform");

/// The documentation page the example is taken from (read-only, beside the repository).
const SEED: &str = "shared/seeds/000_9865e8a4838609a4.txt";

fn seed() -> PathBuf {
    let root = support::root();
    let candidates = [root.join("..").join(SEED), root.join("../..").join(SEED)];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "the Nomad documentation's DHV page is missing: looked for {}",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" and ")
            )
        })
}

/// The example as the documentation gives it: from `#!/usr/bin/env bash` after "Plugin code:"
/// to the first `esac`.
fn custom_mkdir(text: &str) -> String {
    let after = text
        .split_once("Plugin code:")
        .map(|(_, rest)| rest)
        .expect("the page has a \"Plugin code:\" heading");
    let start = after.find("#!/usr/bin/env bash").expect("a bash script");
    let script = &after[start..];
    let end = script
        .lines()
        .scan(0usize, |at, line| {
            *at += line.len() + 1;
            Some((*at, line.trim() == "esac"))
        })
        .find(|(_, is_esac)| *is_esac)
        .map(|(at, _)| at)
        .expect("the script ends with esac");
    script[..end].to_string()
}

fn run(plugin: &Path, ledger: &Ledger, dir: &Path) -> RunRecord {
    let json = dir.join("run.json");
    let out = std::process::Command::new(BIN)
        .current_dir(dir)
        .args(ledger.args_for(plugin, dir))
        .args(["--seed", "7", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("no record ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_documentation_s_custom_mkdir_gets_its_ledger_verdicts() {
    let script = custom_mkdir(&std::fs::read_to_string(seed()).unwrap());
    assert!(script.contains("DHV_VOLUMES_DIR") && script.trim_end().ends_with("esac"));
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("custom-mkdir");
    std::fs::write(&plugin, &script).unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ledger = Ledger::load("custom-mkdir");
    let record = run(&plugin, &ledger, dir.path());
    let differences = ledger.differences(&record);
    assert!(
        differences.is_empty(),
        "custom-mkdir against fixtures/field/custom-mkdir.toml:\n  {}",
        differences.join("\n  ")
    );
}

/// Every ledger file has the facts a reader needs (where the plugin comes from, how it is
/// built and launched, why each clause that does not pass does not), and names only clauses
/// the suite has.
#[test]
fn every_ledger_file_is_complete_and_names_real_clauses() {
    let mut problems = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(support::field::dir()).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        files += 1;
        let ledger = Ledger::read(&path);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        problems.extend(ledger.gaps().into_iter().map(|g| format!("{name}: {g}")));
        let listed = std::process::Command::new(BIN)
            .args(["list", &ledger.kind])
            .output()
            .unwrap();
        let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
        let ids: Vec<&str> = listed
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        for id in ledger.clauses.keys() {
            if !ids.contains(&id.as_str()) {
                problems.push(format!("{name}: {id} is no {} clause", ledger.kind));
            }
        }
    }
    assert!(files >= 5, "only {files} ledger files");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
