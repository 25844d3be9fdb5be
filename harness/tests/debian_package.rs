//! The Debian package: scripts/package-deb builds it from the binary `cargo test` built, as the
//! [package.metadata.deb] table of harness/Cargo.toml lays it out; dpkg installs it into a fresh
//! root (its own admin directory, nothing registered on this machine), and the installed binary
//! runs the DHV suite against the reference plugin.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clap::CommandFactory as _;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8(run(cmd).stdout).unwrap()
}

/// The [package.metadata.deb] table, and the workspace's version.
fn deb_table() -> (toml::Table, String) {
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(root().join("harness/Cargo.toml")).unwrap())
            .unwrap();
    let table = manifest["package"]["metadata"]["deb"]
        .as_table()
        .expect("[package.metadata.deb]")
        .clone();
    (table, env!("CARGO_PKG_VERSION").to_string())
}

fn field<'a>(table: &'a toml::Table, key: &str) -> &'a str {
    table[key]
        .as_str()
        .unwrap_or_else(|| panic!("[package.metadata.deb] {key}"))
}

/// The Debian architecture of this machine.
fn arch() -> String {
    stdout(Command::new("dpkg").arg("--print-architecture"))
        .trim()
        .to_string()
}

/// The package's file name, as the GitHub Action and the GitLab template download it.
fn deb_name(version: &str, table: &toml::Table) -> String {
    format!(
        "nomad-conform_{version}-{}_{}.deb",
        field(table, "revision"),
        arch()
    )
}

/// Control fields: `Key: value` lines, continuation lines joined to the key's value.
fn control_fields(control: &str) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in control.lines() {
        if let Some(more) = line.strip_prefix(' ') {
            let last = fields
                .last_mut()
                .expect("a continuation line after a field");
            last.1.push('\n');
            last.1.push_str(if more == "." { "" } else { more });
        } else if let Some((k, v)) = line.split_once(':') {
            fields.push((k.to_string(), v.trim().to_string()));
        }
    }
    fields
}

/// The man pages the package must carry: the main page, and one per visible command, as the
/// main page's SUBCOMMANDS section names them (nomad-conform-dhv(1), ...).
/// The .proto files under `dir`, as paths relative to it.
fn proto_files(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "proto") {
                let rel = path.strip_prefix(dir).unwrap();
                out.insert(rel.display().to_string());
            }
        }
    }
    out
}

fn expected_man_pages() -> BTreeSet<String> {
    fn walk(cmd: &clap::Command, prefix: &str, pages: &mut BTreeSet<String>) {
        pages.insert(format!("usr/share/man/man1/{prefix}.1.gz"));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            if sub.get_name() != "help" {
                walk(sub, &format!("{prefix}-{}", sub.get_name()), pages);
            }
        }
    }
    let mut pages = BTreeSet::new();
    walk(
        &nomad_conform::cli::Cli::command(),
        "nomad-conform",
        &mut pages,
    );
    pages
}

#[test]
fn package_builds_installs_and_runs_the_dhv_suite() {
    let (table, version) = deb_table();
    let work = tempfile::Builder::new()
        .prefix("debian-package")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let work = work.path();

    // The binary `cargo test` built, linked into a directory of our own, so the generated man
    // pages and completions (written next to the binary) and the tree stay in the temp dir.
    let built = Path::new(env!("CARGO_BIN_EXE_nomad-conform"));
    let bin = work.join("bin/nomad-conform");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    if std::fs::hard_link(built, &bin).is_err() {
        std::fs::copy(built, &bin).unwrap();
    }

    // Uncompressed: xz over a debug binary takes most of a minute; publishing uses the default.
    let out = stdout(
        Command::new(root().join("scripts/package-deb"))
            .arg("--bin")
            .arg(&bin)
            .arg("--out")
            .arg(work.join("out"))
            .args(["--compress", "none"]),
    );
    let deb = PathBuf::from(
        out.lines()
            .last()
            .expect("the script prints the .deb's path"),
    );
    assert_eq!(
        deb.file_name().unwrap().to_str().unwrap(),
        deb_name(&version, &table),
        "the asset name the CI templates download"
    );
    assert!(deb.is_file(), "{}", deb.display());

    // Control fields, as the table and [package] say.
    let fields = control_fields(&stdout(Command::new("dpkg-deb").arg("-f").arg(&deb)));
    let get = |k: &str| {
        fields
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("control field {k} missing: {fields:?}"))
    };
    assert_eq!(get("Package"), "nomad-conform");
    assert_eq!(
        get("Version"),
        format!("{version}-{}", field(&table, "revision"))
    );
    assert_eq!(get("Architecture"), arch());
    assert_eq!(get("Maintainer"), field(&table, "maintainer"));
    assert_eq!(get("Section"), field(&table, "section"));
    assert_eq!(get("Priority"), field(&table, "priority"));
    assert_eq!(
        get("Homepage"),
        "https://github.com/nomad-conform/nomad-conform"
    );
    let depends = get("Depends");
    assert!(
        depends.contains("libc6 (>= 2."),
        "$auto resolves to libc6 with a version: {depends}"
    );
    let (short, long) = get("Description").split_once('\n').unwrap();
    assert_eq!(short, env!("CARGO_PKG_DESCRIPTION"));
    assert_eq!(
        long.split_whitespace().collect::<Vec<_>>(),
        field(&table, "extended-description")
            .split_whitespace()
            .collect::<Vec<_>>(),
        "the extended description, wrapped"
    );
    assert!(
        long.lines().all(|l| l.len() <= 79),
        "wrapped at 79 columns: {long}"
    );

    // Files: exactly what the assets name (globbed man pages: one per command), plus the
    // generated copyright file; the binary executable, everything owned by root.
    let listing = stdout(Command::new("dpkg-deb").arg("-c").arg(&deb));
    let mut files = BTreeSet::new();
    for line in listing.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (mode, owner, path) = (cols[0], cols[1], cols[cols.len() - 1]);
        assert_eq!(owner, "root/root", "{line}");
        if mode.starts_with('-') {
            let path = path.trim_start_matches("./").to_string();
            if path == "usr/bin/nomad-conform" {
                assert_eq!(mode, "-rwxr-xr-x", "{line}");
            } else {
                assert_eq!(mode, "-rw-r--r--", "{line}");
            }
            files.insert(path);
        }
    }
    let mut expected: BTreeSet<String> = [
        "usr/bin/nomad-conform",
        "usr/share/bash-completion/completions/nomad-conform",
        "usr/share/zsh/vendor-completions/_nomad-conform",
        "usr/share/fish/vendor_completions.d/nomad-conform.fish",
        "usr/share/doc/nomad-conform/README.md",
        "usr/share/doc/nomad-conform/copyright",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    // Our .proto files, for the reproduce blocks' grpcurl commands: every one of the tree's.
    expected.extend(
        proto_files(&root().join("proto/proto"))
            .into_iter()
            .map(|rel| format!("usr/share/nomad-conform/proto/{rel}")),
    );
    expected.extend(expected_man_pages());
    // The documentation README links to, laid out as in the repository.
    for (dir, ext) in [
        ("docs", "md"),
        ("docs/guides", "md"),
        ("docs/reference", "md"),
        ("docs/clauses", "md"),
        ("docs/ci", "yml"),
    ] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() && path.extension().is_some_and(|e| e == ext) {
                let name = path.file_name().unwrap().to_str().unwrap().to_string();
                expected.insert(format!("usr/share/doc/nomad-conform/{dir}/{name}"));
            }
        }
    }
    assert_eq!(files, expected, "the package's files");
    for asset in table["assets"].as_array().unwrap() {
        let dest = asset[1].as_str().unwrap();
        assert!(
            files.iter().any(|f| f.starts_with(dest)),
            "asset {asset} has a file in the package"
        );
    }

    // Install into a fresh root whose dpkg database holds only this machine's entries of the
    // packages the Depends line names: dpkg checks they are satisfied, and nothing is
    // registered on this machine. --force-not-root and --force-bad-path let a user who is not
    // root do it too (dpkg wants ldconfig on PATH otherwise).
    let inst = work.join("root");
    let admin = inst.join("var/lib/dpkg");
    std::fs::create_dir_all(admin.join("info")).unwrap();
    std::fs::create_dir_all(admin.join("updates")).unwrap();
    let deps: Vec<&str> = depends
        .split(',')
        .map(|d| d.split_whitespace().next().unwrap())
        .collect();
    let status = stdout(Command::new("dpkg-query").arg("--status").args(&deps));
    std::fs::write(admin.join("status"), status).unwrap();
    run(Command::new("dpkg")
        .arg(format!("--root={}", inst.display()))
        .arg(format!("--log={}", work.join("dpkg.log").display()))
        .args(["--force-not-root", "--force-bad-path", "--install"])
        .arg(&deb));
    let listed = stdout(
        Command::new("dpkg-query")
            .arg(format!("--admindir={}", admin.display()))
            .args([
                "--showformat=${Status} ${Version}",
                "--show",
                "nomad-conform",
            ]),
    );
    assert_eq!(
        listed,
        format!(
            "install ok installed {version}-{}",
            field(&table, "revision")
        )
    );

    let installed = inst.join("usr/bin/nomad-conform");
    assert_eq!(
        stdout(Command::new(&installed).arg("--version")).trim(),
        format!("nomad-conform {version}")
    );
    let junit = work.join("dhv.xml");
    let dhv = Command::new(&installed)
        .arg("dhv")
        .arg(root().join("reference-plugins/dhv/mkdir"))
        .arg("--junit")
        .arg(&junit)
        .arg("--quiet")
        .output()
        .unwrap();
    assert_eq!(
        dhv.status.code(),
        Some(0),
        "the installed binary passes the reference plugin: {}{}",
        String::from_utf8_lossy(&dhv.stdout),
        String::from_utf8_lossy(&dhv.stderr)
    );
    let xml = std::fs::read_to_string(&junit).expect("the JUnit report");
    assert!(xml.contains("<testsuites") && xml.contains("DHV-CREATE-EXIT-ZERO"));

    // The man pages: roff with a title, the main page naming every command; man renders it
    // when man-db is installed.
    let man1 = inst.join("usr/share/man/man1");
    let page = |name: &str| stdout(Command::new("gzip").arg("-dc").arg(man1.join(name)));
    let main = page("nomad-conform.1.gz");
    assert!(main.contains(".TH nomad-conform 1"), "{main}");
    for kind in [
        "dhv",
        "csi",
        "driver",
        "lock",
        "variables",
        "explain",
        "report",
    ] {
        assert!(
            main.contains(&format!("nomad\\-conform\\-{kind}(1)")),
            "the main page names {kind}"
        );
        assert!(page(&format!("nomad-conform-{kind}.1.gz")).contains(".TH nomad-conform-"));
    }
    assert!(
        !main.contains("manpage") && !main.contains("probe"),
        "hidden commands stay out of the man page"
    );
    assert!(page("nomad-conform-dhv.1.gz").contains("\\-\\-junit"));
    if Command::new("man").arg("--version").output().is_ok() {
        let rendered = stdout(
            Command::new("man")
                .arg("-l")
                .arg(man1.join("nomad-conform-dhv.1.gz"))
                .env("MANPAGER", "cat")
                .env("MANWIDTH", "100"),
        );
        assert!(rendered.contains("--junit"), "{rendered}");
    }

    // Completions: what each shell loads from its vendor directory.
    let share = inst.join("usr/share");
    let bash = share.join("bash-completion/completions/nomad-conform");
    run(Command::new("bash").arg("-n").arg(&bash));
    assert!(
        std::fs::read_to_string(&bash)
            .unwrap()
            .contains("complete -F _nomad__conform")
    );
    assert!(
        std::fs::read_to_string(share.join("zsh/vendor-completions/_nomad-conform"))
            .unwrap()
            .starts_with("#compdef nomad-conform")
    );
    assert!(
        std::fs::read_to_string(share.join("fish/vendor_completions.d/nomad-conform.fish"))
            .unwrap()
            .contains("complete -c nomad-conform")
    );
    let readme = std::fs::read_to_string(share.join("doc/nomad-conform/README.md")).unwrap();
    assert!(readme.starts_with("# nomad-conform"));
    let copyright = std::fs::read_to_string(share.join("doc/nomad-conform/copyright")).unwrap();
    assert!(copyright.contains("License: MPL-2.0"), "{copyright}");
}
