//! `nomad-conform dhv --plugin-dir DIR`: the DHV suite for every plugin in a directory, as the
//! Nomad client finds them in its `host_volume_plugin_dir`, one run record per plugin.
//!
//! Which files are plugins, from Nomad's source (1.10.0 to 2.0.x):
//! - client/fingerprint/dynamic_host_volumes.go (GetHostVolumePluginVersions) lists the
//!   directory with helper/funcs.go (FindExecutableFiles): `os.ReadDir`, not recursive, every
//!   entry whose `DirEntry.Info()` (an lstat: a symlink is not followed) is not a directory and
//!   has any execute bit (helper/funcs_unix.go, IsExecutable). No name is filtered out: hidden
//!   files count, and so does every symlink (its own mode is 0777).
//! - Each is then opened by client/hostvolumemanager/host_volume_plugin.go
//!   (NewHostVolumePluginExternal) through `os.OpenRoot(pluginDir)` and `root.Stat(name)`: a
//!   symlink is followed only while it stays inside the directory (os.Root refuses absolute
//!   links and links that leave the root), and the file it reaches must again be a non-directory
//!   with an execute bit. Anything refused there is logged and never used.
//! - client/hostvolumemanager/host_volumes.go (getPlugin) looks up the built-in `mkdir` before
//!   the directory, so a file called `mkdir` is fingerprinted but never created or deleted with.
//!
//! Plugins run one after another, sorted by file name; each run is a whole, ordinary DHV run.

use crate::console::shown;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Component, Path, PathBuf};

use nomad_conform_reports::model::RunRecord;

use super::{DhvSuite, check_plugin, io_reason};
use crate::cli::DhvArgs;
use crate::console::Output;
use crate::error::{HarnessError, exit, exit_code_for};
use crate::run::SuiteOptions;

/// The built-in plugin of the Nomad client (client/hostvolumemanager/host_volume_plugin.go,
/// HostVolumePluginMkdirID).
const BUILT_IN: &str = "mkdir";

/// Most symlinks followed from one entry (as the kernel's own limit).
const MAX_LINKS: usize = 40;

/// What a plugin directory holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// The plugins, by file name (byte order): `(name, path)`, the path inside the directory.
    pub plugins: Vec<(String, PathBuf)>,
    /// Entries the Nomad client would not use, each with why.
    pub ignored: Vec<(String, String)>,
}

/// The plugins in `dir`, exactly as the Nomad client counts them (see the module's text).
pub fn list_plugins(dir: &Path) -> Result<Listing, HarnessError> {
    let shown = dir.display();
    let root = dir
        .canonicalize()
        .map_err(|e| HarnessError::Usage(format!("--plugin-dir {shown}: {}", io_reason(&e))))?;
    if !root.is_dir() {
        return Err(HarnessError::Usage(format!(
            "--plugin-dir {shown} is not a directory"
        )));
    }
    let entries = std::fs::read_dir(&root)
        .map_err(|e| HarnessError::Usage(format!("--plugin-dir {shown}: {}", io_reason(&e))))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry
            .map_err(|e| HarnessError::Usage(format!("--plugin-dir {shown}: {}", io_reason(&e))))?;
        names.push(entry.file_name());
    }
    // os.ReadDir sorts by name: so do we.
    names.sort();
    let mut listing = Listing::default();
    for name in names {
        let shown_name = name.to_string_lossy().into_owned();
        let path = root.join(&name);
        // lstat, as DirEntry.Info() in Go: a symlink is judged by its own mode here.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            listing
                .ignored
                .push((shown_name, "vanished while the directory was read".into()));
            continue;
        };
        if meta.is_dir() {
            continue;
        }
        if meta.permissions().mode() & 0o111 == 0 {
            listing.ignored.push((
                shown_name,
                "no execute bit: the Nomad client lists only files with one".into(),
            ));
            continue;
        }
        match resolve_inside(&root, &path) {
            Ok(()) => listing.plugins.push((shown_name, path)),
            Err(why) => listing.ignored.push((shown_name, why)),
        }
    }
    Ok(listing)
}

/// What `root.Stat(name)` through an `os.Root` accepts: the entry, after following its
/// symlinks without leaving `root` and without an absolute link, is a non-directory with an
/// execute bit. `Err` says why the Nomad client refuses it.
fn resolve_inside(root: &Path, entry: &Path) -> Result<(), String> {
    let refused = "the Nomad client opens plugins through os.Root and refuses it";
    let mut path = entry.to_path_buf();
    for _ in 0..MAX_LINKS {
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|_| format!("a symlink to nothing ({refused})"))?;
        if !meta.file_type().is_symlink() {
            let meta = std::fs::metadata(&path).map_err(|e| io_reason(&e))?;
            if meta.is_dir() {
                return Err(format!("a symlink to a directory ({refused})"));
            }
            if meta.permissions().mode() & 0o111 == 0 {
                return Err(format!(
                    "a symlink to a file without an execute bit ({refused})"
                ));
            }
            return Ok(());
        }
        let target = std::fs::read_link(&path).map_err(|e| format!("unreadable symlink: {e}"))?;
        if target.is_absolute() {
            return Err(format!(
                "an absolute symlink to {} ({refused})",
                target.display()
            ));
        }
        let parent = path.parent().unwrap_or(root).to_path_buf();
        path = normalize(&parent.join(&target));
        if !path.starts_with(root) {
            return Err(format!(
                "a symlink out of the directory, to {} ({refused})",
                path.display()
            ));
        }
    }
    Err(format!("too many levels of symlinks ({refused})"))
}

/// `a/b/../c` as `a/c`, lexically (as os.Root resolves `..` within the root).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Where each plugin's reports go: `<name>.json`, `<name>.xml`, `<name>.html` in `dir`.
fn report_paths(dir: &Path, name: &str) -> [(PathBuf, WriteFn); 3] {
    [
        (
            dir.join(format!("{name}.json")),
            crate::report::write_json as WriteFn,
        ),
        (dir.join(format!("{name}.xml")), crate::report::write_junit),
        (dir.join(format!("{name}.html")), crate::report::write_html),
    ]
}

type WriteFn = fn(&RunRecord, &Path) -> Result<(), HarnessError>;

/// How one plugin's run ended.
struct Outcome {
    name: String,
    /// The exit status a run of this plugin alone would have had.
    code: i32,
    line: String,
}

/// Run the suite for every plugin in `dir`, write each one's reports into `out_dir`, print
/// each summary and then one line per plugin. Returns the worst exit status over the plugins
/// (130 interrupted, then 3, then 1, then 0).
pub async fn run(
    common: &SuiteOptions,
    args: &DhvArgs,
    dir: &Path,
    out_dir: Option<&Path>,
    output: Output,
) -> Result<i32, HarnessError> {
    // The reports' directory first, so a job that reads it finds it even when nothing ran.
    if let Some(out) = out_dir {
        std::fs::create_dir_all(out).map_err(|e| {
            HarnessError::Internal(format!("failed to create --out-dir {}: {e}", out.display()))
        })?;
    }
    let listing = list_plugins(dir)?;
    for (name, why) in &listing.ignored {
        eprintln!(
            "{}",
            shown(&format!(
                "note: {}: not a plugin: {why}",
                dir.join(name).display()
            ))
        );
    }
    if listing.plugins.is_empty() {
        // Nothing could be tested: exit 3, as a run in which no clause could be judged.
        return Err(HarnessError::Internal(format!(
            "no plugins in {}: the Nomad client counts every entry that is not a directory and \
             has an execute bit (see docs/guides/dhv.md)",
            dir.display()
        )));
    }
    // Every report path of every plugin, before any plugin runs: none may be a plugin, and
    // each is a file of its own.
    if let Some(out) = out_dir {
        let protected: Vec<crate::report::Protected> = listing
            .plugins
            .iter()
            .map(|(n, p)| crate::report::Protected::new(p, format!("the plugin {n}")))
            .collect();
        let paths: Vec<PathBuf> = listing
            .plugins
            .iter()
            .flat_map(|(n, _)| report_paths(out, n).map(|(p, _)| p))
            .collect();
        let named: Vec<(&str, &Path)> = paths.iter().map(|p| ("--out-dir", p.as_path())).collect();
        crate::report::check_targets(&named, &protected)?;
    }
    let names: Vec<&str> = listing.plugins.iter().map(|(n, _)| n.as_str()).collect();
    println!(
        "{}",
        shown(&format!(
            "nomad-conform dhv: {} plugin{} in {}: {}",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            dir.display(),
            names.join(", ")
        ))
    );
    if names.contains(&BUILT_IN) {
        eprintln!(
            "note: {}: the Nomad client has a built-in plugin called {BUILT_IN} and uses it for \
             plugin_id = \"{BUILT_IN}\" (client/hostvolumemanager/host_volumes.go, getPlugin): \
             this file is fingerprinted but never asked to create or delete; it is tested all \
             the same",
            dir.join(BUILT_IN).display()
        );
    }

    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut interrupted = false;
    for (name, path) in &listing.plugins {
        // A plugin the harness cannot run (not executable by this user) is this plugin's
        // failure to be tested, not a usage error of the whole run.
        if let Err(e) = check_plugin(path) {
            eprintln!("{}", shown(&format!("nomad-conform: error: {e}")));
            outcomes.push(Outcome {
                name: name.clone(),
                code: exit::HARNESS,
                line: format!("not tested: {e}"),
            });
            continue;
        }
        let one = DhvSuite {
            args,
            plugin: path,
            common,
        };
        let mut record = match crate::run::run_suite(common, &one).await {
            Ok(r) => r,
            // Flags, tags, profile: wrong for every plugin alike, so stop at the first.
            Err(e @ HarnessError::Usage(_)) => return Err(e),
            Err(e) => {
                eprintln!("{}", shown(&format!("nomad-conform: error: {name}: {e}")));
                outcomes.push(Outcome {
                    name: name.clone(),
                    code: exit::HARNESS,
                    line: format!("not tested: {e}"),
                });
                continue;
            }
        };
        // The plugin's ID as Nomad knows it (the file name in the directory, also for a
        // symlink, whose target is what the run names).
        record
            .subject
            .details
            .insert("plugin_id".into(), name.clone());
        let mut code = exit_code_for(&record);
        let mut written = Vec::new();
        if let Some(out) = out_dir {
            for (file, write) in report_paths(out, name) {
                match write(&record, &file) {
                    Ok(()) => written.push(file.display().to_string()),
                    Err(e) => {
                        eprintln!("{}", shown(&format!("nomad-conform: error: {e}")));
                        code = code.max(exit::HARNESS);
                    }
                }
            }
        }
        println!(
            "{}\n",
            shown(&nomad_conform_reports::summary::render(
                &record,
                output.verbosity()
            ))
        );
        let mut line = format!(
            "{}: {}",
            record.assessment().as_str(),
            nomad_conform_reports::fleet::counts_line(&record)
        );
        if !written.is_empty() {
            line.push_str(&format!(
                "; reports {}",
                out_dir
                    .map(|d| d.join(format!("{name}.{{json,xml,html}}")))
                    .unwrap_or_default()
                    .display()
            ));
        }
        outcomes.push(Outcome {
            name: name.clone(),
            code,
            line,
        });
        if record.interrupted {
            interrupted = true;
            break;
        }
    }

    let width = outcomes.iter().map(|o| o.name.len()).max().unwrap_or(0);
    println!("{}", shown(&format!("plugins in {}:", dir.display())));
    for o in &outcomes {
        let line = format!("  {:<width$}  exit {:<3}  {}", o.name, o.code, o.line);
        println!("{}", shown(&line));
    }
    if interrupted {
        let left = listing.plugins.len() - outcomes.len();
        if left > 0 {
            println!("  ... {left} more not run: the run was interrupted");
        }
        return Ok(exit::INTERRUPTED);
    }
    Ok(outcomes
        .iter()
        .map(|o| o.code)
        .max()
        .unwrap_or(exit::HARNESS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, mode: u32) {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn counts_what_the_nomad_client_counts() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("plugins");
        std::fs::create_dir(&d).unwrap();
        file(&d, "zeta", 0o755);
        file(&d, "alpha", 0o700);
        file(&d, ".hidden", 0o755); // no name is filtered out
        file(&d, "others-only", 0o601); // any execute bit
        file(&d, "README", 0o644);
        std::fs::create_dir(d.join("subdir")).unwrap();
        file(&d.join("subdir"), "nested", 0o755); // not recursive
        std::os::unix::fs::symlink("alpha", d.join("link-in")).unwrap();
        std::os::unix::fs::symlink("subdir/nested", d.join("link-deep")).unwrap();
        std::os::unix::fs::symlink("subdir", d.join("link-dir")).unwrap();
        std::os::unix::fs::symlink("missing", d.join("link-dangling")).unwrap();
        std::os::unix::fs::symlink("README", d.join("link-plain")).unwrap();
        file(tmp.path(), "outside", 0o755);
        std::os::unix::fs::symlink("../outside", d.join("link-out")).unwrap();
        std::os::unix::fs::symlink(d.join("alpha"), d.join("link-abs")).unwrap();

        let l = list_plugins(&d).unwrap();
        let names: Vec<&str> = l.plugins.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                ".hidden",
                "alpha",
                "link-deep",
                "link-in",
                "others-only",
                "zeta"
            ]
        );
        let ignored: Vec<&str> = l.ignored.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            ignored,
            [
                "README",
                "link-abs",
                "link-dangling",
                "link-dir",
                "link-out",
                "link-plain"
            ]
        );
        let why = |n: &str| l.ignored.iter().find(|(m, _)| m == n).unwrap().1.clone();
        assert!(why("link-abs").contains("absolute"), "{}", why("link-abs"));
        assert!(why("link-out").contains("out of the directory"));
        assert!(why("link-dir").contains("directory"));
        assert!(why("README").contains("execute bit"));
        assert!(l.plugins.iter().all(|(_, p)| p.is_absolute()));
    }

    #[test]
    fn a_missing_directory_is_a_usage_error() {
        let e = list_plugins(Path::new("/nonexistent/plugins")).unwrap_err();
        assert!(matches!(e, HarnessError::Usage(_)), "{e}");
        assert!(e.to_string().contains("no such file"), "{e}");
        let tmp = tempfile::tempdir().unwrap();
        file(tmp.path(), "f", 0o755);
        let e = list_plugins(&tmp.path().join("f")).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }
}
