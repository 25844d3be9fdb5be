//! Embeds the spec tree (feature files and profiles) into the binary, so that an installed
//! `nomad-conform` needs no source tree.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn collect(dir: &Path, root: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, root, out);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("feature" | "toml")
        ) {
            let rel = path
                .strip_prefix(root)
                .expect("spec file under the spec root")
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, path));
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets this"));
    let root = manifest.join("../specs");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    let mut code = String::from(
        "/// Spec files embedded at build time: (path relative to specs/, contents).\n\
         pub static EMBEDDED: &[(&str, &str)] = &[\n",
    );
    for (rel, path) in &files {
        let abs = path.canonicalize().expect("spec file exists");
        println!("cargo:rerun-if-changed={}", abs.display());
        let _ = writeln!(
            code,
            "    ({rel:?}, include_str!({:?})),",
            abs.display().to_string()
        );
    }
    code.push_str("];\n");
    // The commit the harness is built from, for the report's environment section.
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(&manifest)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("cargo:rustc-env=NOMAD_CONFORM_COMMIT={commit}");
    // Built again when HEAD moves or the branch it names gets a commit. The files are asked of
    // git: in a worktree `.git` is a file, and a path that does not exist would make cargo run
    // this script, and rebuild the crate, on every build.
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&manifest)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
    };
    let watched = [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["rev-parse", "--symbolic-full-name", "HEAD"])
            .and_then(|r| git(&["rev-parse", "--git-path", &r.to_string_lossy()])),
    ];
    for path in watched.into_iter().flatten() {
        let path = if path.is_absolute() {
            path
        } else {
            manifest.join(path)
        };
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets this"));
    std::fs::write(out.join("embedded_specs.rs"), code).expect("write embedded_specs.rs");
}
