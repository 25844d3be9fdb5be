//! The CI templates run as written: the composite GitHub Action (action.yml), its example
//! workflow (docs/ci/github.yml) and the GitLab job template (docs/ci/gitlab-ci.yml). Their
//! shell commands are taken out of the YAML, their inputs or variables filled in, and run with
//! bash against the reference DHV plugin and a broken one, with the built binary first on PATH
//! (the install steps then take their "already installed" branch). The download branch runs
//! against stub curl, sudo and dpkg, to check the URL it fetches names the asset
//! scripts/package-deb builds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load(rel: &str) -> Yaml {
    let text = std::fs::read_to_string(root().join(rel)).unwrap();
    let mut docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert_eq!(docs.len(), 1, "{rel}: one YAML document");
    docs.remove(0)
}

fn text(y: &Yaml) -> &str {
    y.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {y:?}"))
}

fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

fn reference_plugin() -> String {
    root()
        .join("reference-plugins/dhv/mkdir")
        .display()
        .to_string()
}

/// A plugin whose create exits 1: the suite fails a MUST clause.
fn broken_plugin() -> String {
    root()
        .join("fixtures/dhv/create-exits-nonzero/plugin")
        .display()
        .to_string()
}

/// The directory of the binary under test: first on PATH, so `nomad-conform` is installed.
fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn path_with(first: &Path) -> String {
    format!(
        "{}:{}",
        first.display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    )
}

/// The release asset's URL: scripts/package-deb names the package
/// nomad-conform_VERSION-REVISION_ARCH.deb (tests/debian_package.rs checks it does), and the
/// release of tag vVERSION of the repository Cargo.toml names carries it.
fn expected_download_url() -> String {
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(root().join("harness/Cargo.toml")).unwrap())
            .unwrap();
    let revision = manifest["package"]["metadata"]["deb"]["revision"]
        .as_str()
        .unwrap()
        .to_string();
    let workspace: toml::Table =
        toml::from_str(&std::fs::read_to_string(root().join("Cargo.toml")).unwrap()).unwrap();
    let repository = workspace["workspace"]["package"]["repository"]
        .as_str()
        .unwrap();
    let arch = Command::new("dpkg")
        .arg("--print-architecture")
        .output()
        .unwrap();
    let arch = String::from_utf8(arch.stdout).unwrap();
    format!(
        "{repository}/releases/download/v{v}/nomad-conform_{v}-{revision}_{}.deb",
        arch.trim(),
        v = version()
    )
}

// ---- the GitHub Action ----

/// The action's inputs with their defaults, then `with`.
fn action_inputs(action: &Yaml, with: &[(&str, String)]) -> BTreeMap<String, String> {
    let mut inputs = BTreeMap::new();
    for (name, spec) in action["inputs"].as_hash().unwrap() {
        let default = match &spec["default"] {
            Yaml::BadValue => String::new(),
            d => text(d).to_string(),
        };
        inputs.insert(text(name).to_string(), default);
    }
    for (k, v) in with {
        assert!(inputs.contains_key(*k), "action.yml has no input {k}");
        inputs.insert(k.to_string(), v.clone());
    }
    inputs
}

/// `${{ inputs.NAME }}` replaced by the input's value; any other expression is an error.
fn substitute(s: &str, inputs: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("a closed expression") + start;
        let expr = rest[start + 3..end].trim();
        let name = expr
            .strip_prefix("inputs.")
            .unwrap_or_else(|| panic!("only inputs expressions are substituted here: {expr}"));
        out.push_str(
            inputs
                .get(name)
                .unwrap_or_else(|| panic!("no input {name}")),
        );
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

struct StepRun {
    name: String,
    status: Option<i32>,
    output: String,
}

/// Runs the action's `run` steps the way a runner does (`bash --noprofile --norc -eo pipefail`,
/// the step's `env` with inputs filled in, RUNNER_TEMP set), stopping at the first that fails
/// as a job does; returns each step that ran.
fn run_action(inputs: &BTreeMap<String, String>, cwd: &Path, path: &str) -> Vec<StepRun> {
    let action = load("action.yml");
    assert_eq!(text(&action["runs"]["using"]), "composite");
    let mut ran = Vec::new();
    for (i, step) in action["runs"]["steps"].as_vec().unwrap().iter().enumerate() {
        let Some(script) = step["run"].as_str() else {
            continue;
        };
        assert_eq!(
            text(&step["shell"]),
            "bash",
            "composite run steps name their shell"
        );
        assert!(
            !script.contains("${{"),
            "inputs reach the script through env only (no expression in the script): {script}"
        );
        let file = cwd.join(format!(".step-{i}.sh"));
        std::fs::write(&file, script).unwrap();
        let mut cmd = Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail"])
            .arg(&file)
            .current_dir(cwd)
            .env("PATH", path)
            .env("RUNNER_TEMP", cwd);
        if let Some(env) = step["env"].as_hash() {
            for (k, v) in env {
                cmd.env(text(k), substitute(text(v), inputs));
            }
        }
        let out = cmd.output().unwrap();
        let output = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let name = substitute(text(&step["name"]), inputs);
        let failed = !out.status.success();
        ran.push(StepRun {
            name,
            status: out.status.code(),
            output,
        });
        if failed {
            break;
        }
    }
    ran
}

/// The upload step: `if: always()`, and it keeps exactly the two report files.
fn check_upload_step(inputs: &BTreeMap<String, String>) {
    let action = load("action.yml");
    let uploads: Vec<&Yaml> = action["runs"]["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .filter(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .collect();
    assert_eq!(uploads.len(), 1, "one upload step");
    let upload = uploads[0];
    assert_eq!(text(&upload["uses"]), "actions/upload-artifact@v4");
    assert_eq!(
        text(&upload["if"]),
        "always()",
        "reports are kept when the suite fails"
    );
    let paths: Vec<String> = substitute(text(&upload["with"]["path"]), inputs)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    assert_eq!(paths, vec![inputs["junit"].clone(), inputs["html"].clone()]);
}

/// The example workflow's `with` for the action.
fn example_with() -> Vec<(String, String)> {
    let workflow = load("docs/ci/github.yml");
    let on = workflow["on"].as_hash().expect("on: push and pull_request");
    for event in ["push", "pull_request"] {
        assert!(
            on.contains_key(&Yaml::String(event.into())),
            "the example runs on {event}"
        );
    }
    let jobs = workflow["jobs"].as_hash().unwrap();
    assert_eq!(jobs.len(), 1);
    let steps = jobs.values().next().unwrap()["steps"].as_vec().unwrap();
    let at = steps
        .iter()
        .position(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("nomad-conform/nomad-conform@"))
        })
        .expect("a step uses the action");
    assert_eq!(
        text(&steps[at]["uses"]),
        format!("nomad-conform/nomad-conform@v{}", version()),
        "the example pins this release"
    );
    assert!(
        steps[..at].iter().any(|s| s["run"].as_str().is_some()),
        "a step before builds the plugin"
    );
    let with: Vec<(String, String)> = steps[at]["with"]
        .as_hash()
        .unwrap()
        .iter()
        .map(|(k, v)| (text(k).to_string(), text(v).to_string()))
        .collect();
    let junit = &with.iter().find(|(k, _)| k == "junit").unwrap().1;
    let publish = &steps[at + 1];
    assert_eq!(
        text(&publish["if"]),
        "always()",
        "verdicts are published when the suite fails"
    );
    assert_eq!(
        text(&publish["with"]["report_paths"]),
        junit,
        "the publishing hint reads the action's JUnit file"
    );
    with
}

#[test]
fn github_action_runs_the_example_inputs_against_the_reference_plugin() {
    let dir = tempfile::tempdir().unwrap();
    // The example's inputs, as written, but for the plugin: the reference one.
    let mut with = example_with();
    for (k, v) in &mut with {
        if k == "plugin" {
            *v = reference_plugin();
        }
    }
    let with: Vec<(&str, String)> = with.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let inputs = action_inputs(&load("action.yml"), &with);
    assert_eq!(inputs["kind"], "dhv");
    assert_eq!(
        inputs["version"],
        version(),
        "the action installs this release"
    );
    check_upload_step(&inputs);

    let ran = run_action(&inputs, dir.path(), &path_with(&bin_dir()));
    assert_eq!(ran.len(), 2, "install and run");
    assert!(
        ran[0].output.contains("already installed")
            && ran[0]
                .output
                .contains(&format!("nomad-conform {}", version())),
        "the install step finds the binary on PATH: {}",
        ran[0].output
    );
    assert_eq!(ran[1].name, "Run the dhv suite");
    assert_eq!(ran[1].status, Some(0), "{}", ran[1].output);
    for file in [&inputs["junit"], &inputs["html"]] {
        assert!(
            dir.path().join(file).is_file(),
            "{file} written: {}",
            ran[1].output
        );
    }
    let xml = std::fs::read_to_string(dir.path().join(&inputs["junit"])).unwrap();
    assert!(xml.contains("DHV-CREATE-EXIT-ZERO"));
}

#[test]
fn github_action_fails_with_the_suite_and_keeps_the_reports() {
    let dir = tempfile::tempdir().unwrap();
    // Reports in a directory that does not exist yet; args as shell words, with quotes.
    let junit = dir.path().join("reports/conform.xml");
    let html = dir.path().join("reports/conform.html");
    let inputs = action_inputs(
        &load("action.yml"),
        &[
            ("kind", "dhv".into()),
            ("plugin", broken_plugin()),
            (
                "args",
                "--seed 7 --tags '@must and not @DHV-CREATE-RESTORE'".into(),
            ),
            ("junit", junit.display().to_string()),
            ("html", html.display().to_string()),
        ],
    );
    check_upload_step(&inputs);
    let ran = run_action(&inputs, dir.path(), &path_with(&bin_dir()));
    let run = ran.last().unwrap();
    assert_eq!(run.name, "Run the dhv suite");
    assert_eq!(
        run.status,
        Some(1),
        "the step fails with the suite's status (a MUST clause failed): {}",
        run.output
    );
    assert!(
        run.output.contains("DHV-CREATE-EXIT-ZERO"),
        "{}",
        run.output
    );
    assert!(
        run.output.contains("seed 7"),
        "args reach nomad-conform: {}",
        run.output
    );
    assert!(junit.is_file() && html.is_file(), "reports kept on failure");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<failure"), "{xml}");
}

#[test]
fn github_action_takes_a_list_of_known_failures() {
    let dir = tempfile::tempdir().unwrap();
    let tags = "@must and not @DHV-CREATE-RESTORE";
    // A first run fails; the list is written from its record, as a team adopting the suite
    // with a known bug would write it.
    let json = dir.path().join("run.json");
    let first = std::process::Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .args([
            "dhv",
            &broken_plugin(),
            "--seed",
            "7",
            "--tags",
            tags,
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(1), "{first:?}");
    let list = dir.path().join("known-failures.toml");
    let wrote = std::process::Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .arg("report")
        .arg(&json)
        .arg("--write-known-failures")
        .arg(&list)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&list).unwrap_or_else(|e| panic!("{e}: {wrote:?}"));
    assert!(text.contains("DHV-CREATE-EXIT-ZERO"), "{text}");

    let junit = dir.path().join("conform.xml");
    let inputs = action_inputs(
        &load("action.yml"),
        &[
            ("kind", "dhv".into()),
            ("plugin", broken_plugin()),
            ("args", format!("--seed 7 --tags '{tags}'")),
            ("known-failures", list.display().to_string()),
            ("junit", junit.display().to_string()),
            (
                "html",
                dir.path().join("conform.html").display().to_string(),
            ),
        ],
    );
    let ran = run_action(&inputs, dir.path(), &path_with(&bin_dir()));
    let run = ran.last().unwrap();
    assert_eq!(
        run.status,
        Some(0),
        "the known failures do not fail the step: {}",
        run.output
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(!xml.contains("<failure"), "{xml}");
    assert!(
        xml.contains("<skipped") && xml.contains("known failure"),
        "known failures are skipped with their reason in JUnit: {xml}"
    );

    // Without the list the same run fails the step, as before.
    let mut without = inputs.clone();
    without.insert("known-failures".into(), String::new());
    let ran = run_action(&without, dir.path(), &path_with(&bin_dir()));
    assert_eq!(
        ran.last().unwrap().status,
        Some(1),
        "{}",
        ran.last().unwrap().output
    );
}

#[test]
fn github_action_rejects_an_unknown_kind() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = action_inputs(
        &load("action.yml"),
        &[("kind", "nfs".into()), ("plugin", reference_plugin())],
    );
    let ran = run_action(&inputs, dir.path(), &path_with(&bin_dir()));
    let run = ran.last().unwrap();
    assert_eq!(run.status, Some(2), "{}", run.output);
    assert!(
        run.output.contains("::error::kind must be"),
        "{}",
        run.output
    );
}

// ---- the download branch, with stubs ----

/// Stub curl (writes an empty file where -o says), sudo (runs its command) and dpkg (-i
/// "installs" by linking the built binary next to itself; anything else is the real dpkg), each
/// recording its arguments in STUB_LOG.
fn stubs(dir: &Path) -> PathBuf {
    let stubs = dir.join("stubs");
    std::fs::create_dir_all(&stubs).unwrap();
    let write = |name: &str, body: &str| {
        let path = stubs.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    write(
        "curl",
        r#"out=""
while [ $# -gt 0 ]; do
  case "$1" in -o) out=$2; shift ;; http*) echo "curl $1" >>"$STUB_LOG" ;; esac
  shift
done
echo "curl-o $out" >>"$STUB_LOG"
: >"$out"
"#,
    );
    write("sudo", "echo \"sudo $*\" >>\"$STUB_LOG\"\nexec \"$@\"\n");
    write(
        "dpkg",
        r#"if [ "$1" = "-i" ]; then
  echo "dpkg-i $2" >>"$STUB_LOG"
  ln -sf "$NOMAD_CONFORM_BUILT" "$(dirname "$0")/nomad-conform"
  exit 0
fi
exec /usr/bin/dpkg "$@"
"#,
    );
    stubs
}

/// The stub log's lines, by their first word.
fn stub_log(log: &Path) -> BTreeMap<String, Vec<String>> {
    let mut calls: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let (k, v) = line.split_once(' ').unwrap();
        calls.entry(k.into()).or_default().push(v.into());
    }
    calls
}

fn system_has_nomad_conform() -> bool {
    ["/usr/bin/nomad-conform", "/bin/nomad-conform"]
        .iter()
        .any(|p| Path::new(p).exists())
}

/// The URL and the installed file of a download-branch run.
fn check_download(log: &Path, output: &str) {
    let calls = stub_log(log);
    assert_eq!(
        calls.get("curl"),
        Some(&vec![expected_download_url()]),
        "the URL of the asset scripts/package-deb builds: {output}"
    );
    let saved = &calls["curl-o"][0];
    assert!(
        saved.ends_with(expected_download_url().rsplit('/').next().unwrap()),
        "{saved}"
    );
    assert_eq!(
        calls.get("dpkg-i"),
        Some(&vec![saved.clone()]),
        "dpkg installs the downloaded file: {output}"
    );
}

#[test]
fn github_action_downloads_the_packaged_asset_when_not_installed() {
    if system_has_nomad_conform() {
        eprintln!("skipped: nomad-conform is installed on this machine, PATH cannot hide it");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let stubs = stubs(dir.path());
    let log = dir.path().join("stub.log");
    let action = load("action.yml");
    let inputs = action_inputs(&action, &[("kind", "dhv".into())]);
    let install = &action["runs"]["steps"][0];
    assert_eq!(text(&install["name"]), "Install nomad-conform");
    let file = dir.path().join("install.sh");
    std::fs::write(&file, text(&install["run"])).unwrap();
    let mut cmd = Command::new("bash");
    cmd.args(["--noprofile", "--norc", "-eo", "pipefail"])
        .arg(&file)
        .current_dir(dir.path())
        .env("PATH", format!("{}:/usr/bin:/bin", stubs.display()))
        .env("RUNNER_TEMP", dir.path())
        .env("STUB_LOG", &log)
        .env("NOMAD_CONFORM_BUILT", env!("CARGO_BIN_EXE_nomad-conform"));
    for (k, v) in install["env"].as_hash().unwrap() {
        cmd.env(text(k), substitute(text(v), &inputs));
    }
    let out = cmd.output().unwrap();
    let output =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{output}");
    check_download(&log, &output);
    assert_eq!(
        stub_log(&log).get("sudo").map(Vec::len),
        Some(1),
        "dpkg -i runs under sudo on a runner"
    );
}

// ---- the GitLab template ----

struct GitlabRun {
    status: Option<i32>,
    output: String,
}

/// The `.nomad-conform` job: before_script and script run in one bash, as GitLab's runner does
/// (`set -eo pipefail`, each line in turn), with the job's variables and `overrides` in the
/// environment.
fn run_gitlab(
    overrides: &[(&str, String)],
    cwd: &Path,
    path: &str,
    extra_env: &[(&str, &Path)],
) -> GitlabRun {
    let ci = load("docs/ci/gitlab-ci.yml");
    let job = &ci[".nomad-conform"];
    let mut vars: BTreeMap<String, String> = job["variables"]
        .as_hash()
        .unwrap()
        .iter()
        .map(|(k, v)| (text(k).to_string(), text(v).to_string()))
        .collect();
    for (k, v) in overrides {
        assert!(vars.contains_key(*k), "the template has no variable {k}");
        vars.insert(k.to_string(), v.clone());
    }
    let mut script = String::from("set -eo pipefail\n");
    for part in ["before_script", "script"] {
        for line in job[part].as_vec().unwrap() {
            script.push_str(text(line));
            script.push('\n');
        }
    }
    let file = cwd.join(".gitlab-job.sh");
    std::fs::write(&file, script).unwrap();
    let out = Command::new("bash")
        .args(["--noprofile", "--norc"])
        .arg(&file)
        .current_dir(cwd)
        .env("PATH", path)
        .env("TMPDIR", cwd)
        .envs(vars)
        .envs(extra_env.iter().map(|(k, v)| (*k, *v)))
        .output()
        .unwrap();
    GitlabRun {
        status: out.status.code(),
        output: String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr),
    }
}

/// The job's report files: artifacts:reports:junit, and what the script writes.
fn gitlab_reports() -> (String, String) {
    let ci = load("docs/ci/gitlab-ci.yml");
    let job = &ci[".nomad-conform"];
    assert_eq!(
        text(&job["artifacts"]["when"]),
        "always",
        "reports kept on failure"
    );
    let junit = text(&job["artifacts"]["reports"]["junit"]).to_string();
    let script: String = job["script"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|l| text(l).to_string())
        .collect();
    let words: Vec<&str> = script.split_whitespace().collect();
    let after = |flag: &str| {
        let at = words
            .iter()
            .position(|w| *w == flag)
            .unwrap_or_else(|| panic!("{flag} in the script"));
        words[at + 1].to_string()
    };
    assert_eq!(
        after("--junit"),
        junit,
        "artifacts:reports:junit is the file the script writes"
    );
    let html = after("--html");
    let paths: Vec<&str> = job["artifacts"]["paths"]
        .as_vec()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    assert!(
        paths.contains(&html.as_str()),
        "the HTML report is an artifact: {paths:?}"
    );
    assert!(
        paths.contains(&junit.as_str()),
        "the JUnit file is an artifact too: {paths:?}"
    );
    assert_eq!(
        text(&job["variables"]["NOMAD_CONFORM_VERSION"]),
        version(),
        "the template installs this release"
    );
    (junit, html)
}

#[test]
fn gitlab_job_passes_the_reference_plugin_and_fails_a_broken_one() {
    let (junit, html) = gitlab_reports();
    let path = path_with(&bin_dir());

    let ok = tempfile::tempdir().unwrap();
    let run = run_gitlab(
        &[
            ("CONFORM_KIND", "dhv".into()),
            ("CONFORM_PLUGIN", reference_plugin()),
            ("CONFORM_ARGS", "--tags 'not @DHV-CREATE-RESTORE'".into()),
        ],
        ok.path(),
        &path,
        &[],
    );
    assert_eq!(run.status, Some(0), "{}", run.output);
    assert!(run.output.contains(&format!("nomad-conform {}", version())));
    assert!(
        ok.path().join(&junit).is_file() && ok.path().join(&html).is_file(),
        "{}",
        run.output
    );

    let broken = tempfile::tempdir().unwrap();
    let run = run_gitlab(
        &[("CONFORM_PLUGIN", broken_plugin())],
        broken.path(),
        &path,
        &[],
    );
    assert_eq!(
        run.status,
        Some(1),
        "the job fails with the suite: {}",
        run.output
    );
    let xml = std::fs::read_to_string(broken.path().join(&junit)).expect("JUnit kept on failure");
    assert!(xml.contains("<failure"));
    assert!(broken.path().join(&html).is_file());
}

#[test]
fn gitlab_job_downloads_the_packaged_asset_when_not_installed() {
    if system_has_nomad_conform() {
        eprintln!("skipped: nomad-conform is installed on this machine, PATH cannot hide it");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let stubs = stubs(dir.path());
    let log = dir.path().join("stub.log");
    let run = run_gitlab(
        &[("CONFORM_PLUGIN", reference_plugin())],
        dir.path(),
        &format!("{}:/usr/bin:/bin", stubs.display()),
        &[
            ("STUB_LOG", &log),
            (
                "NOMAD_CONFORM_BUILT",
                Path::new(env!("CARGO_BIN_EXE_nomad-conform")),
            ),
        ],
    );
    assert_eq!(run.status, Some(0), "{}", run.output);
    check_download(&log, &run.output);
    assert!(
        stub_log(&log)["curl-o"][0].starts_with(&dir.path().display().to_string()),
        "the download goes to TMPDIR"
    );
}

// ---- README ----

/// README's Install snippet and the CI guide's (docs/guides/ci.md) use what the templates have:
/// the action's inputs, the template's job and variables, this release, and the asset
/// scripts/package-deb builds.
#[test]
fn readme_snippets_match_the_templates() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = |heading: &str| -> String {
        let start = readme
            .find(heading)
            .unwrap_or_else(|| panic!("README has {heading}"));
        let body = &readme[start + heading.len()..];
        let end = body.find("\n## ").unwrap_or(body.len());
        body[..end].to_string()
    };
    let blocks = |text: &str, lang: &str| -> Vec<String> {
        text.split(&format!("```{lang}\n"))
            .skip(1)
            .map(|b| b.split("```").next().unwrap().to_string())
            .collect()
    };

    let install = section("## Install\n");
    let sh = blocks(&install, "sh").join("");
    let url = sh
        .split_whitespace()
        .find(|w| w.starts_with("https://"))
        .expect("the download URL");
    let expected = expected_download_url();
    let arch_free = |u: &str| u.rsplit_once('_').unwrap().0.to_string();
    assert_eq!(
        arch_free(url),
        arch_free(&expected),
        "README downloads the packaged asset"
    );
    let deb = url.rsplit('/').next().unwrap();
    assert!(
        sh.contains(&format!("dpkg -i {deb}")),
        "README installs what it downloads"
    );

    let ci = std::fs::read_to_string(root().join("docs/guides/ci.md")).unwrap();
    let yaml = blocks(&ci, "yaml");
    assert_eq!(yaml.len(), 2, "a GitHub and a GitLab snippet");
    let github = YamlLoader::load_from_str(&yaml[0]).unwrap().remove(0);
    let step = &github[0];
    assert_eq!(
        text(&step["uses"]),
        format!("nomad-conform/nomad-conform@v{}", version())
    );
    let with: Vec<(&str, String)> = step["with"]
        .as_hash()
        .unwrap()
        .iter()
        .map(|(k, v)| (text(k), text(v).to_string()))
        .collect();
    action_inputs(&load("action.yml"), &with); // every key is an input

    let gitlab = YamlLoader::load_from_str(&yaml[1]).unwrap().remove(0);
    assert_eq!(
        text(&gitlab["include"][0]["remote"]),
        format!(
            "https://raw.githubusercontent.com/nomad-conform/nomad-conform/v{}/docs/ci/gitlab-ci.yml",
            version()
        )
    );
    let job = &gitlab["conformance"];
    assert_eq!(text(&job["extends"]), ".nomad-conform");
    let template = load("docs/ci/gitlab-ci.yml");
    for (k, _) in job["variables"].as_hash().unwrap() {
        assert!(
            !template[".nomad-conform"]["variables"][text(k)].is_badvalue(),
            "the template has the variable {k:?}"
        );
    }
}
