//! What a plugin writes outside its volumes: into the agent's working directory, the plugin
//! directory and /tmp. Fingerprint should write nothing there at all; create and delete should
//! leave nothing there once the volume is gone. The calls run alone (no other call of the plugin
//! runs, so nothing else writes where they are watched) and with a /tmp of their own (a
//! directory of the scenario the stand-in for the agent bind-mounts over /tmp, see
//! [`crate::plugins::dhv::agent`]), so that what they write under /tmp lands where it can be
//! seen, and nothing else does.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cucumber::{then, when};

use super::{DhvWorld, StepResult, create_root_clause, list_paths, list_tree};
use crate::plugins::dhv::{Call, CallOpts, EnvPolicy};

/// The watched places before the calls.
#[derive(Debug)]
pub struct Outside {
    cwd: BTreeSet<PathBuf>,
    plugin_dir: Vec<(PathBuf, Option<SystemTime>)>,
    tmp: PathBuf,
}

/// Top-level entries of a directory with their modification times.
fn entries_with_mtime(dir: &Path) -> Vec<(PathBuf, Option<SystemTime>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let m = e.metadata().ok().and_then(|m| m.modified().ok());
                    (e.path(), m)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

impl DhvWorld {
    /// Take the listings the calls about to run are judged against; `tmp` is the directory
    /// they get as /tmp.
    pub fn watch_outside_before(&mut self, tmp: &Path) {
        self.outside_before = Some(Outside {
            cwd: list_tree(&self.cwd()),
            plugin_dir: entries_with_mtime(&self.plugin().dir),
            tmp: tmp.to_path_buf(),
        });
    }

    /// What the latest calls created or modified in the working directory, the plugin
    /// directory and their private /tmp (shown as the plugin saw it). Where a call had no
    /// private /tmp, /tmp is not judged and a note says why.
    pub fn written_outside(&self) -> Result<Vec<PathBuf>, String> {
        let Some(before) = &self.outside_before else {
            return Err(self
                .ctx()
                .harness_error("no listing was taken before the calls"));
        };
        let cwd_now = list_tree(&self.cwd());
        let mut changed: Vec<PathBuf> = cwd_now.difference(&before.cwd).cloned().collect();
        for entry in entries_with_mtime(&self.plugin().dir) {
            if !before.plugin_dir.contains(&entry) {
                changed.push(entry.0);
            }
        }
        let not_private = self.last.iter().find_map(|call| {
            let tmp = call.agent.as_ref().and_then(|a| a.tmp.clone());
            match tmp {
                Some((true, _)) => None,
                Some((false, note)) => Some(note),
                None => Some("the stand-in did not say".to_string()),
            }
        });
        match not_private {
            None => {
                // A tree kept visible under the private /tmp (the plugin's, the volumes
                // directory's) had an empty mount point made for it by the stand-in: that is not
                // the plugin's writing.
                let kept = crate::plugins::dhv::agent::kept_under_tmp([
                    self.plugin().path.as_path(),
                    self.volumes_dir().as_path(),
                ]);
                changed.extend(
                    list_tree(&before.tmp)
                        .into_iter()
                        .filter_map(|p| {
                            Some(Path::new("/tmp").join(p.strip_prefix(&before.tmp).ok()?))
                        })
                        .filter(|p| !kept.iter().any(|k| k == p || k.starts_with(p))),
                );
            }
            Some(why) => self.ctx().note(format!(
                "/tmp was not given to the plugin privately ({why}): what it wrote there could not be told from what others wrote"
            )),
        }
        changed.sort();
        changed.dedup();
        Ok(changed)
    }

    /// A directory of the scenario, made, to give the plugin as its /tmp.
    fn private_tmp_dir(&self) -> Result<PathBuf, String> {
        let tmp = self.ctx().scratch().join("tmp");
        std::fs::create_dir_all(&tmp)
            .map_err(|e| self.ctx().harness_error(format!("{}: {e}", tmp.display())))?;
        Ok(tmp)
    }

    /// One call alone with `tmp` as its /tmp, the volumes directory kept visible in it.
    async fn call_watched(
        &self,
        label: &str,
        op: &str,
        env: Vec<(String, String)>,
        deadline: std::time::Duration,
        tmp: &Path,
    ) -> Call {
        let opts = CallOpts {
            private_tmp: Some(tmp.to_path_buf()),
            keep_visible: vec![self.volumes_dir()],
            ..CallOpts::default()
        };
        self.invoke_with(label, op, env, EnvPolicy::Configured, deadline, opts)
            .await
    }
}

#[when("Nomad creates and deletes a volume while nothing else of it runs")]
async fn creates_and_deletes_alone(w: &mut DhvWorld) -> StepResult {
    let tmp = w.private_tmp_dir()?;
    let i = w.add_volume();
    let req = w.volume(i)?.req.clone();
    w.alone().await;
    w.watch_outside_before(&tmp);
    let deadlines = w.deadlines().clone();
    let create = w
        .call_watched(
            "create",
            "create",
            req.create_env(),
            deadlines.create_deadline,
            &tmp,
        )
        .await;
    let Some(created) = super::created_from(&create) else {
        w.together();
        let text = w.fail(
            "precondition: create succeeds",
            &create.summary(),
            &[&create],
        );
        return Err(w.ctx().blocked(create_root_clause(&create), text));
    };
    let deleted = w.volume(i)?.deleted.clone();
    w.track_volume(&req, &created.path, deleted.clone());
    let delete = w
        .call_watched(
            "delete",
            "delete",
            req.delete_env(&created.path),
            deadlines.delete_deadline,
            &tmp,
        )
        .await;
    w.together();
    if delete.succeeded() {
        deleted.store(true, std::sync::atomic::Ordering::SeqCst);
    } else {
        let text = w.fail(
            "precondition: delete succeeds",
            &delete.summary(),
            &[&create, &delete],
        );
        return Err(w.ctx().blocked(super::exit_clause(&delete), text));
    }
    w.last = vec![create, delete];
    Ok(())
}

#[then("nothing was left in the working directory, the plugin directory or /tmp")]
async fn nothing_left(w: &mut DhvWorld) -> StepResult {
    let changed = w.written_outside()?;
    if changed.is_empty() {
        return Ok(());
    }
    let calls: Vec<&Call> = w.last.iter().collect();
    Err(w.fail(
        "once the volume is deleted, create and delete have left no file in the working directory, the plugin directory or /tmp",
        &format!("left behind: {}", list_paths(&changed)),
        &calls,
    ))
}
