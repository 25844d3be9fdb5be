//! Scratch directories removed while the run goes on.
//!
//! Removing a clause's scratch directory costs about 0.1 ms per directory in it on a journaling
//! filesystem (ext4 here): one to two milliseconds for a CSI clause's staging and allocation
//! tree, paid between clauses, which a serial run adds up. What decides a verdict is done before
//! (nothing left mounted beneath it, no loop device on its files: `ledger::ScratchDir`); the
//! directory is then renamed aside in one step, so it is gone from where the clause made it, and
//! one background thread removes it while the next clauses talk to the plugin. The end of the
//! run waits for that thread before it removes the run's own directory, and says what it could
//! not remove.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

struct Worker {
    queue: Sender<PathBuf>,
    done: JoinHandle<Vec<String>>,
}

static WORKER: Mutex<Option<Worker>> = Mutex::new(None);

/// Rename `dir` aside (next to it, `.removing-<name>`) and have it removed in the background.
/// An error means it was not renamed: the caller removes it itself.
pub fn remove_later(dir: &Path) -> std::io::Result<()> {
    let name = dir
        .file_name()
        .ok_or_else(|| std::io::Error::other("no directory name"))?;
    let aside = dir.with_file_name(format!(".removing-{}", name.to_string_lossy()));
    match std::fs::rename(dir, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    let mut worker = WORKER.lock().unwrap_or_else(|p| p.into_inner());
    let w = worker.get_or_insert_with(start);
    if let Err(back) = w.queue.send(aside) {
        // The thread is gone (it cannot be, short of a panic): remove it here.
        crate::safe_remove::remove_tree_or_err(&back.0)?;
    }
    Ok(())
}

/// Wait for every directory handed over so far to be removed; what could not be, one line each.
/// The lock is held until then, so that a second caller also returns only once they are gone.
pub fn wait() -> Vec<String> {
    let mut worker = WORKER.lock().unwrap_or_else(|p| p.into_inner());
    let Some(Worker { queue, done }) = worker.take() else {
        return Vec::new();
    };
    drop(queue);
    done.join()
        .unwrap_or_else(|_| vec!["the background removal of scratch directories panicked".into()])
}

fn start() -> Worker {
    let (queue, dirs) = channel::<PathBuf>();
    let done = std::thread::Builder::new()
        .name("scratch-removal".into())
        .spawn(move || {
            let mut failed = Vec::new();
            for dir in dirs {
                // Checked before it was handed over (nothing mounted beneath it); a mount made
                // since is still never removed through.
                failed.extend(crate::safe_remove::remove_tree(&dir));
            }
            failed
        })
        .expect("start the scratch removal thread");
    Worker { queue, done }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_gone_at_once_and_removed_by_the_end() {
        let base = tempfile::tempdir().unwrap();
        let dirs: Vec<PathBuf> = (0..5).map(|i| base.path().join(format!("c{i}"))).collect();
        for d in &dirs {
            std::fs::create_dir_all(d.join("csi/staging/default/vol0")).unwrap();
            std::fs::write(d.join("csi/f"), "x").unwrap();
            remove_later(d).unwrap();
            assert!(!d.exists(), "renamed aside at once");
        }
        assert!(wait().is_empty());
        let left: Vec<_> = std::fs::read_dir(base.path()).unwrap().flatten().collect();
        assert!(left.is_empty(), "{left:?}");
        // A directory already gone is nothing to do.
        remove_later(&base.path().join("never-made")).unwrap();
        assert!(wait().is_empty());
    }
}
