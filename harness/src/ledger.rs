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
    /// What the harness could not check or undo for reasons of its own (the mount table could
    /// not be read): the clause's verdict cannot stand as a pass, and the plugin is not blamed.
    pub errors: Vec<String>,
}

impl TeardownOutcome {
    pub fn leak(what: impl Into<String>) -> Self {
        TeardownOutcome {
            leaked: vec![what.into()],
            ..TeardownOutcome::default()
        }
    }

    pub fn absorb(&mut self, other: TeardownOutcome) {
        self.leaked.extend(other.leaked);
        self.notes.extend(other.notes);
        self.errors.extend(other.errors);
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
/// reported as leaked. False when a mount could not be undone, or when the mount table cannot
/// be read: then `dir` must stay.
fn clear_scratch(dir: &Path) -> (TeardownOutcome, bool) {
    let mut outcome = TeardownOutcome::default();
    let mounts = match crate::mounts::under(dir) {
        Ok(m) => m,
        Err(e) => {
            outcome.errors.push(format!(
                "{} left in place: what is mounted under it cannot be told ({e})",
                crate::mounts::shown(dir)
            ));
            return (outcome, false);
        }
    };
    for m in &mounts {
        // Stacked mounts come off one at a time: unmount while it is still a mount point.
        let mut undone = false;
        let mut failed = None;
        for _ in 0..MAX_STACKED {
            match crate::mounts::is_mount_point(m) {
                Ok(false) => {
                    undone = true;
                    break;
                }
                Ok(true) => {}
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
            }
            if let Err(e) = nix::mount::umount2(m, nix::mount::MntFlags::MNT_DETACH) {
                failed = Some(format!("umount failed: {e}"));
                break;
            }
        }
        outcome.leaked.push(if undone {
            format!(
                "{} was still mounted after the scenario's cleanup (the harness unmounted it)",
                crate::mounts::shown(m)
            )
        } else {
            format!(
                "{} is still mounted ({}); left in place",
                crate::mounts::shown(m),
                failed.unwrap_or_else(|| format!("more than {MAX_STACKED} mounts stacked on it"))
            )
        });
    }
    // The mount table is read again only when something had to be unmounted.
    if !mounts.is_empty() && !crate::mounts::under(dir).is_ok_and(|m| m.is_empty()) {
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

/// How many mounts stacked on one path the harness takes off before it gives up and leaves
/// the path in place.
const MAX_STACKED: usize = 256;

/// Remove the harness's own directory `dir`, never through a mount or a symlink: what is on
/// another mount stays, and is told.
fn remove_dir(dir: &Path) -> TeardownOutcome {
    TeardownOutcome {
        leaked: crate::safe_remove::remove_tree(dir),
        ..TeardownOutcome::default()
    }
}

/// Remove a path the plugin created outside the harness's scratch directories, after the caller
/// has established that it is new and carries the run's token. Symlinks are removed, not
/// followed.
pub fn remove_stray(path: &Path) -> TeardownOutcome {
    let mounted = crate::mounts::is_mount_point(path)
        .and_then(|m| Ok(m || !crate::mounts::under(path)?.is_empty()));
    match mounted {
        Ok(false) => {}
        Ok(true) => {
            return TeardownOutcome::leak(format!(
                "{} is a mount the plugin made outside the volumes directory; left in place",
                crate::mounts::shown(path)
            ));
        }
        Err(e) => {
            return TeardownOutcome {
                errors: vec![format!(
                    "{} left in place: whether it is mounted cannot be told ({e})",
                    crate::mounts::shown(path)
                )],
                ..TeardownOutcome::default()
            };
        }
    }
    if std::fs::symlink_metadata(path).is_err() {
        return TeardownOutcome::default();
    }
    let left = crate::safe_remove::remove_tree(path);
    if left.is_empty() {
        TeardownOutcome {
            notes: vec![format!(
                "the plugin created {} outside its volumes directory; the harness removed it",
                crate::mounts::shown(path)
            )],
            ..TeardownOutcome::default()
        }
    } else {
        TeardownOutcome {
            leaked: left,
            ..TeardownOutcome::default()
        }
    }
}

/// A file the harness wrote into something that is not its own (a marker in a plugin's
/// volume): removed at the end of the scenario if it is still there and still the harness's
/// (it holds what was written), so that nothing the harness wrote outlives the run wherever
/// the volume's path led.
#[derive(Debug)]
pub struct OwnFile {
    pub path: PathBuf,
    pub content: String,
}

impl Resource for OwnFile {
    fn describe(&self) -> String {
        format!("the harness's file {}", crate::mounts::shown(&self.path))
    }

    fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
        blocking(move || {
            match std::fs::symlink_metadata(&self.path) {
                Ok(m) if m.is_file() => {}
                _ => return TeardownOutcome::default(),
            }
            if std::fs::read_to_string(&self.path).is_ok_and(|s| s == self.content)
                && let Err(e) = std::fs::remove_file(&self.path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                return TeardownOutcome {
                    errors: vec![format!(
                        "the harness could not remove its own file {}: {e}",
                        crate::mounts::shown(&self.path)
                    )],
                    ..TeardownOutcome::default()
                };
            }
            TeardownOutcome::default()
        })
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
        assert_eq!(crate::mounts::under(&dir).unwrap(), vec![m.clone()]);
        let out = remove_scratch(&dir);
        assert_eq!(out.leaked.len(), 1, "{:?}", out.leaked);
        assert!(out.leaked[0].contains("still mounted"), "{:?}", out.leaked);
        assert!(!dir.exists(), "the directory is removed once unmounted");
        assert!(crate::mounts::under(scratch.path()).unwrap().is_empty());
    }

    /// Eleven mounts stacked on one path all come off before the directory goes; the files
    /// of the bind-mounted directory beneath them stay.
    #[test]
    fn scratch_removal_unmounts_stacked_mounts_and_never_removes_through_one() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: mounting needs root");
            assert!(std::env::var_os("CI").is_none(), "CI must run this as root");
            return;
        }
        let canary = tempfile::tempdir().unwrap();
        std::fs::write(canary.path().join("precious"), "x").unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("s");
        let m = dir.join("vol");
        std::fs::create_dir_all(&m).unwrap();
        for _ in 0..11 {
            nix::mount::mount(
                Some(canary.path()),
                &m,
                None::<&str>,
                nix::mount::MsFlags::MS_BIND,
                None::<&str>,
            )
            .unwrap();
        }
        let out = remove_scratch(&dir);
        assert_eq!(out.leaked.len(), 1, "{:?}", out.leaked);
        assert!(
            out.leaked[0].contains("the harness unmounted it"),
            "{:?}",
            out.leaked
        );
        assert!(!dir.exists(), "the directory is removed once unmounted");
        assert!(canary.path().join("precious").exists());
        assert!(!crate::mounts::is_mount_point(&m).unwrap());
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
