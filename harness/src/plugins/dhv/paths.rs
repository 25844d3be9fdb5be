//! Which paths can be a volume's own. Used by the checks (a volume must have a path of its own)
//! and by cleanup (a path that is not a volume's own is never reported as a leaked volume, and
//! the harness never writes into it).

use std::path::{Path, PathBuf};

/// Why `path` cannot be a volume's own path: empty, relative, "/", the volumes directory or
/// one of its parents, or the path of another volume. `None` when it is fine.
pub fn own_path_problem(path: &str, volumes_dir: &Path, others: &[String]) -> Option<String> {
    if path.is_empty() {
        return Some("the path is empty".into());
    }
    let p = Path::new(path);
    if !p.is_absolute() {
        return Some(format!("{path:?} is not an absolute path"));
    }
    let norm = normalise(p);
    if norm == Path::new("/") {
        return Some(format!("{path:?} is the root directory"));
    }
    let vols = normalise(volumes_dir);
    if vols.starts_with(&norm) {
        return Some(format!(
            "{path:?} is the volumes directory ({}) or one of its parents",
            volumes_dir.display()
        ));
    }
    for o in others {
        if !o.is_empty() && normalise(Path::new(o)) == norm {
            return Some(format!("{path:?} was also reported for another volume"));
        }
    }
    None
}

/// `path` made absolute with `.` and `..` resolved lexically (as Go's filepath.Join cleans
/// it), symlinks untouched.
pub fn lexically_clean(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(s) => out.push(s),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// A path with `.` and `..` resolved lexically, then symlinks resolved if it exists.
fn normalise(p: &Path) -> PathBuf {
    let out = lexically_clean(p);
    out.canonicalize().unwrap_or(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_paths() {
        let v = Path::new("/tmp/x/volumes");
        assert!(own_path_problem("/tmp/x/volumes/a", v, &[]).is_none());
        assert!(own_path_problem("", v, &[]).is_some());
        assert!(own_path_problem("rel/a", v, &[]).is_some());
        assert!(own_path_problem("/", v, &[]).is_some());
        assert!(own_path_problem("/tmp/x/volumes/", v, &[]).is_some());
        assert!(own_path_problem("/tmp/x/volumes/a/..", v, &[]).is_some());
        assert!(own_path_problem("/tmp", v, &[]).is_some());
        assert!(own_path_problem("/tmp/x/volumes/a", v, &["/tmp/x/volumes/a/".into()]).is_some());
        assert!(own_path_problem("/srv/vol-1", v, &["/srv/vol-2".into()]).is_none());
    }
}
