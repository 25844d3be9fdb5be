//! The resource ledger: everything a scenario makes is registered here and undone newest-first
//! when the scenario ends, whatever its verdict, and again by `main` if the run is interrupted.
//!
//! The harness deletes only what it created: its own scratch directories, and paths the plugin
//! made during the run whose names carry the run's unique token. A path a plugin reports is never
//! removed by the harness unless it lies inside a scratch directory the harness made.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

/// What tearing something down left behind.
#[derive(Debug, Default)]
pub struct TeardownOutcome {
    /// Things that still exist on the host and could not be removed.
    pub leaked: Vec<String>,
    /// Things worth knowing that are not leaks (e.g. a mount the harness had to remove itself).
    pub notes: Vec<String>,
}

impl TeardownOutcome {
    pub fn leak(what: impl Into<String>) -> Self {
        TeardownOutcome {
            leaked: vec![what.into()],
            notes: Vec::new(),
        }
    }

    pub fn absorb(&mut self, other: TeardownOutcome) {
        self.leaked.extend(other.leaked);
        self.notes.extend(other.notes);
    }
}

/// Something a scenario made that must be undone.
pub trait Resource: Send + 'static {
    fn describe(&self) -> String;
    fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome>;
    /// Whether it can be torn down at the same time as its neighbours of the same kind (volumes
    /// are independent of each other: deleting them one by one would wait out each deadline in
    /// turn when a plugin hangs).
    fn independent(&self) -> bool {
        false
    }
}

#[derive(Clone, Default)]
pub struct Ledger {
    entries: Arc<Mutex<Vec<Box<dyn Resource>>>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .entries
            .lock()
            .map(|e| e.iter().map(|r| r.describe()).collect())
            .unwrap_or_default();
        f.debug_struct("Ledger").field("entries", &names).finish()
    }
}

impl Ledger {
    pub fn track(&self, resource: impl Resource) {
        if let Ok(mut e) = self.entries.lock() {
            e.push(Box::new(resource));
        }
    }

    /// Register `resource` to be undone after everything already registered (a directory
    /// that what came before it may have put things in).
    pub fn track_first(&self, resource: impl Resource) {
        if let Ok(mut e) = self.entries.lock() {
            e.insert(0, Box::new(resource));
        }
    }

    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What is still to undo, newest first.
    pub fn describe_all(&self) -> Vec<String> {
        self.entries
            .lock()
            .map(|e| e.iter().rev().map(|r| r.describe()).collect())
            .unwrap_or_default()
    }

    /// Undo everything, newest first; a run of independent entries is undone concurrently.
    /// Safe to call more than once: entries are taken out.
    pub async fn teardown(&self) -> TeardownOutcome {
        let mut outcome = TeardownOutcome::default();
        loop {
            let batch = self.next_batch();
            if batch.is_empty() {
                break;
            }
            let results = futures::future::join_all(batch.into_iter().map(|r| r.teardown())).await;
            for r in results {
                outcome.absorb(r);
            }
        }
        outcome
    }

    /// The newest entry, with the independent entries directly below it if it is independent.
    fn next_batch(&self) -> Vec<Box<dyn Resource>> {
        let Ok(mut entries) = self.entries.lock() else {
            return Vec::new();
        };
        let mut batch = Vec::new();
        while let Some(last) = entries.last() {
            if !batch.is_empty() && !last.independent() {
                break;
            }
            let independent = last.independent();
            batch.extend(entries.pop());
            if !independent {
                break;
            }
        }
        batch
    }
}

/// A directory the harness created for a scenario. Teardown unmounts whatever is still mounted
/// beneath it and reports it as leaked (the plugin's own undo should have unmounted it), then
/// removes the directory.
#[derive(Debug)]
pub struct ScratchDir {
    pub path: PathBuf,
}

impl Resource for ScratchDir {
    fn describe(&self) -> String {
        format!("scratch directory {}", self.path.display())
    }

    fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
        blocking(move || {
            let (mut outcome, removable) = clear_scratch(&self.path);
            if removable && let Err(e) = crate::background_removal::remove_later(&self.path) {
                outcome.notes.push(format!(
                    "harness: could not set {} aside for removal ({e}); removed it at once",
                    self.path.display()
                ));
                outcome.absorb(remove_dir(&self.path));
            }
            outcome
        })
    }
}

/// Run filesystem cleanup on the blocking pool (it may walk large trees).
fn blocking(
    f: impl FnOnce() -> TeardownOutcome + Send + 'static,
) -> BoxFuture<'static, TeardownOutcome> {
    Box::pin(async move {
        tokio::task::spawn_blocking(f)
            .await
            .unwrap_or_else(|e| TeardownOutcome::leak(format!("cleanup task failed: {e}")))
    })
}

/// Unmount everything under `dir` (deepest first), detach loop devices attached to files in it,
/// then remove it. Removal never follows symlinks and is refused if a mount could not be
/// detached.
pub fn remove_scratch(dir: &Path) -> TeardownOutcome {
    let (mut outcome, removable) = clear_scratch(dir);
    if removable {
        outcome.absorb(remove_dir(dir));
    }
    outcome
}

/// Unmount what is still mounted under `dir` and detach loop devices on its files, each one
/// reported as leaked. False when a mount could not be undone: then `dir` must stay.
fn clear_scratch(dir: &Path) -> (TeardownOutcome, bool) {
    let mut outcome = TeardownOutcome::default();
    let mounts = mounts_under(dir);
    for m in &mounts {
        match nix::mount::umount2(m, nix::mount::MntFlags::MNT_DETACH) {
            Ok(()) => outcome.leaked.push(format!(
                "{} was still mounted after the scenario's cleanup (the harness unmounted it)",
                m.display()
            )),
            Err(e) => outcome.leaked.push(format!(
                "{} is still mounted (umount failed: {e})",
                m.display()
            )),
        }
    }
    // The mount table is read again only when something had to be unmounted.
    if !mounts.is_empty() && !mounts_under(dir).is_empty() {
        return (outcome, false);
    }
    // Loop devices on images in the directory (a plugin's state kept there) would pin the
    // images' space after removal; the directory is the harness's, so they go with it.
    // A loop device on a file here whose mount was just undone may still be letting go (its
    // detach ends when the last opener closes it: udev, a probe, a mount namespace that held a
    // copy): those found get the same grace as the CSI clauses' loop watch.
    let attached = crate::loop_devices::attached_under(dir);
    let attached = if attached.is_empty() {
        attached
    } else {
        crate::loop_devices::still_attached_after_blocking(
            attached,
            crate::loop_devices::DETACH_GRACE,
        )
    };
    for attached in attached {
        outcome
            .leaked
            .push(match crate::loop_devices::detach(&attached.device) {
                Ok(()) => format!("{attached} was still attached (the harness detached it)"),
                Err(e) => format!("{attached} is still attached (detaching failed: {e})"),
            });
    }
    (outcome, true)
}

fn remove_dir(dir: &Path) -> TeardownOutcome {
    let mut outcome = TeardownOutcome::default();
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => outcome
            .leaked
            .push(format!("failed to remove {}: {e}", dir.display())),
    }
    outcome
}

/// Remove a path the plugin created outside the harness's scratch directories, after the caller
/// has established that it is new and carries the run's token. Symlinks are removed, not
/// followed.
pub fn remove_stray(path: &Path) -> TeardownOutcome {
    if !mounts_under(path).is_empty() || is_mount_point(path) {
        return TeardownOutcome::leak(format!(
            "{} is a mount the plugin made outside the volumes directory; left in place",
            path.display()
        ));
    }
    let result = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return TeardownOutcome::default(),
        Err(e) => Err(e),
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
    };
    match result {
        Ok(()) => TeardownOutcome {
            leaked: Vec::new(),
            notes: vec![format!(
                "the plugin created {} outside its volumes directory; the harness removed it",
                path.display()
            )],
        },
        Err(e) => TeardownOutcome::leak(format!("failed to remove {}: {e}", path.display())),
    }
}

/// A path the plugin created outside the scratch directories during this scenario.
#[derive(Debug)]
pub struct StrayPath {
    pub path: PathBuf,
}

impl Resource for StrayPath {
    fn describe(&self) -> String {
        format!("stray path {}", self.path.display())
    }

    fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
        blocking(move || remove_stray(&self.path))
    }
}

/// Mount points strictly below `dir`, deepest first, from /proc/self/mountinfo.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let mut prefix = dir.as_os_str().to_string_lossy().into_owned();
    if !prefix.ends_with('/') {
        prefix.push('/');
    }
    let mut found: Vec<PathBuf> = mount_points()
        .into_iter()
        .filter(|m| m.to_string_lossy().starts_with(&prefix))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    found.dedup();
    found
}

pub fn is_mount_point(path: &Path) -> bool {
    mount_points().iter().any(|m| m == path)
}

fn mount_points() -> Vec<PathBuf> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape_mountinfo(m)))
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape_mountinfo(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Probe(Arc<Mutex<Vec<u32>>>, u32);
    impl Resource for Probe {
        fn describe(&self) -> String {
            format!("probe {}", self.1)
        }
        fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
            Box::pin(async move {
                self.0.lock().unwrap().push(self.1);
                if self.1 == 2 {
                    TeardownOutcome::leak("two")
                } else {
                    TeardownOutcome::default()
                }
            })
        }
    }

    #[tokio::test]
    async fn teardown_is_newest_first_and_collects_every_leak() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let ledger = Ledger::default();
        for i in 1..=3 {
            ledger.track(Probe(order.clone(), i));
        }
        let out = ledger.teardown().await;
        assert_eq!(*order.lock().unwrap(), vec![3, 2, 1]);
        assert_eq!(out.leaked, vec!["two".to_string()]);
        assert!(ledger.is_empty());
        assert!(ledger.teardown().await.leaked.is_empty());
    }

    #[tokio::test]
    async fn what_is_tracked_first_is_undone_last() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let ledger = Ledger::default();
        ledger.track(Probe(order.clone(), 1));
        ledger.track(Probe(order.clone(), 3));
        // A scratch directory made after a volume: still removed after the volume is gone.
        ledger.track_first(Probe(order.clone(), 4));
        ledger.teardown().await;
        assert_eq!(*order.lock().unwrap(), vec![3, 1, 4]);
    }

    #[derive(Debug)]
    struct Slow(Arc<Mutex<Vec<u32>>>, u32, bool);
    impl Resource for Slow {
        fn describe(&self) -> String {
            format!("slow {}", self.1)
        }
        fn independent(&self) -> bool {
            self.2
        }
        fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
            Box::pin(async move {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                self.0.lock().unwrap().push(self.1);
                TeardownOutcome::default()
            })
        }
    }

    #[tokio::test]
    async fn independent_entries_are_undone_together() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let ledger = Ledger::default();
        ledger.track(Slow(order.clone(), 1, false));
        for i in 2..=6 {
            ledger.track(Slow(order.clone(), i, true));
        }
        let t = std::time::Instant::now();
        ledger.teardown().await;
        // Five independent entries at once, then the dependent one: two rounds, not six.
        assert!(
            t.elapsed() < std::time::Duration::from_millis(1000),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(order.lock().unwrap().last(), Some(&1));
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo(r"/a\040b\134c"), "/a b\\c");
        assert_eq!(unescape_mountinfo(r"/plain"), "/plain");
        assert_eq!(unescape_mountinfo(r"/end\04"), r"/end\04");
    }

    #[test]
    fn scratch_removal_does_not_follow_symlinks() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "x").unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("s");
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.join("link")).unwrap();
        let out = remove_scratch(&dir);
        assert!(out.leaked.is_empty(), "{:?}", out.leaked);
        assert!(!dir.exists());
        assert!(outside.path().join("keep").exists());
    }

    #[test]
    fn scratch_removal_unmounts_leftover_mounts() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: mounting needs root");
            assert!(std::env::var_os("CI").is_none(), "CI must run this as root");
            return;
        }
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("s");
        let m = dir.join("vol");
        std::fs::create_dir_all(&m).unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            &m,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .unwrap();
        std::fs::write(m.join("f"), "x").unwrap();
        assert_eq!(mounts_under(&dir), vec![m.clone()]);
        let out = remove_scratch(&dir);
        assert_eq!(out.leaked.len(), 1, "{:?}", out.leaked);
        assert!(out.leaked[0].contains("still mounted"), "{:?}", out.leaked);
        assert!(!dir.exists(), "the directory is removed once unmounted");
        assert!(mounts_under(scratch.path()).is_empty());
    }

    #[test]
    fn scratch_removal_detaches_loop_devices_on_its_images() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: loop devices need root");
            assert!(std::env::var_os("CI").is_none(), "CI must run this as root");
            return;
        }
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("s");
        std::fs::create_dir_all(&dir).unwrap();
        let image = dir.join("vol.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        let out = std::process::Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&image)
            .output()
            .expect("losetup (util-linux) runs");
        assert!(out.status.success(), "{out:?}");
        let device = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        let seen = crate::loop_devices::loop_behind(&device).expect("a loop device");
        assert_eq!(seen.backing, image);
        assert_eq!(
            crate::loop_devices::attached_under(&dir),
            vec![seen.clone()]
        );

        let out = remove_scratch(&dir);
        assert_eq!(out.leaked.len(), 1, "{:?}", out.leaked);
        assert!(
            out.leaked[0].contains("harness detached it"),
            "{:?}",
            out.leaked
        );
        assert!(!dir.exists());
        // The kernel finishes a detach when the last opener (udev, say) closes the device.
        for _ in 0..100 {
            if !crate::loop_devices::still_attached(&seen) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("{seen} is still attached after the scratch directory was removed");
    }
}
