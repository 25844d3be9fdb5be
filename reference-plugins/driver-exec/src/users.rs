//! The dynamic-users variant: tasks that run as the dynamic workload user Nomad's client gives
//! them, in the cgroup the client made for them.
//!
//! A driver whose Capabilities say `dynamic_workload_users = true` gets, for a job that names
//! no user, `TaskConfig.user = "nomad-<N>"` (N in 80000..=89999 by default): uid = gid = N,
//! with no `/etc/passwd` entry. The client also puts the task's cgroup path in
//! `resources.linux_resources.cpuset_cgroup` and creates it before StartTask.
//!
//! With this variant StartTask refuses, with a plain error, a task without such a user or
//! without an existing cgroup directory. Otherwise the task's supervisor (root) opens the log
//! FIFOs and the cgroup's `cgroup.procs` (v2; `tasks` on v1 when there is no `cgroup.procs`),
//! and the task's process, between fork and exec, writes its pid there, drops every
//! supplementary group and becomes uid = gid = N (`confine.rs`). Commands exec'd in the task
//! do the same.

use std::fs::File;
use std::path::{Path, PathBuf};

use nomad_conform_proto::nomad::drivers::TaskConfig;

use crate::variants::{Variant, Variants};

/// What a dynamic workload user's name starts with; the uid follows.
const USER_PREFIX: &str = "nomad-";

/// A task's dynamic workload user and cgroup.
#[derive(Clone, Debug, PartialEq)]
pub struct DynamicUser {
    /// The uid, and the gid.
    pub id: u32,
    /// The task's cgroup directory.
    pub cgroup: PathBuf,
}

/// Capabilities.dynamic_workload_users.
pub fn asks_for_users(variants: &Variants) -> bool {
    variants.has(Variant::DynamicUsers)
}

/// The task's user and cgroup with the dynamic-users variant (None without it), or why the
/// task cannot run.
pub fn of_task(variants: &Variants, config: &TaskConfig) -> Result<Option<DynamicUser>, String> {
    if !asks_for_users(variants) {
        return Ok(None);
    }
    if config.user.is_empty() {
        return Err(
            "user must be set: this driver runs every task as a dynamic workload user".into(),
        );
    }
    let id = parse_user(&config.user)?;
    let cgroup = config
        .resources
        .as_ref()
        .and_then(|r| r.linux_resources.as_ref())
        .map(|l| l.cpuset_cgroup.as_str())
        .unwrap_or_default();
    if cgroup.is_empty() {
        return Err(
            "cgroup path \"\" does not exist: resources.linux_resources.cpuset_cgroup is empty"
                .into(),
        );
    }
    if !Path::new(cgroup).is_dir() {
        return Err(format!("cgroup path {cgroup:?} does not exist"));
    }
    Ok(Some(DynamicUser {
        id,
        cgroup: PathBuf::from(cgroup),
    }))
}

/// The uid of a dynamic workload user `nomad-<N>`: N, a positive decimal without a sign or
/// leading zeros (never 0, root; never 4294967295, which is -1 to setuid).
fn parse_user(user: &str) -> Result<u32, String> {
    let refuse = || {
        format!(
            "user {user:?} is not a dynamic workload user (nomad-<uid>): this driver runs \
             every task as one"
        )
    };
    let digits = user.strip_prefix(USER_PREFIX).ok_or_else(refuse)?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refuse());
    }
    match digits.parse::<u32>() {
        Ok(id) if id != u32::MAX => Ok(id),
        _ => Err(refuse()),
    }
}

/// The file a process writes its pid to in order to join the cgroup at `dir`, opened for
/// writing: `cgroup.procs` (cgroup v2, also on v1), else v1's `tasks`.
pub fn open_cgroup(dir: &Path) -> Result<File, String> {
    let procs = dir.join("cgroup.procs");
    let file = if procs.exists() {
        procs
    } else {
        dir.join("tasks")
    };
    File::options().write(true).open(&file).map_err(|err| {
        format!(
            "failed to open {} to join the task's cgroup: {err}",
            file.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use nomad_conform_proto::nomad::drivers::{LinuxResources, Resources};

    use super::*;

    fn config(user: &str, cgroup: &str) -> TaskConfig {
        TaskConfig {
            user: user.into(),
            resources: Some(Resources {
                linux_resources: Some(LinuxResources {
                    cpuset_cgroup: cgroup.into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn users_are_nomad_dash_uid() {
        assert_eq!(parse_user("nomad-80000"), Ok(80000));
        assert_eq!(parse_user("nomad-89999"), Ok(89999));
        assert_eq!(parse_user("nomad-1"), Ok(1));
        for bad in [
            "root",
            "nobody",
            "nomad",
            "nomad-",
            "nomad-0",
            "nomad-080000",
            "nomad-+80000",
            "nomad--1",
            "nomad-8e4",
            "nomad-4294967295",
            "nomad-4294967296",
            "nomad-80000 ",
            "80000",
        ] {
            let err = parse_user(bad).unwrap_err();
            assert!(
                err.contains("is not a dynamic workload user"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn only_the_variant_asks_for_a_user_and_a_cgroup() {
        let on = Variants::new([Variant::DynamicUsers]);
        let dir = tempfile::tempdir().unwrap();
        let cgroup = dir.path().display().to_string();
        assert_eq!(of_task(&Variants::default(), &config("", "")), Ok(None));
        assert_eq!(
            of_task(&on, &config("nomad-80001", &cgroup)),
            Ok(Some(DynamicUser {
                id: 80001,
                cgroup: dir.path().to_path_buf()
            }))
        );
        let err = of_task(&on, &config("", &cgroup)).unwrap_err();
        assert_eq!(
            err,
            "user must be set: this driver runs every task as a dynamic workload user"
        );
        let err = of_task(&on, &config("alice", &cgroup)).unwrap_err();
        assert!(
            err.contains("\"alice\" is not a dynamic workload user"),
            "{err}"
        );
        let err = of_task(&on, &config("nomad-80001", "")).unwrap_err();
        assert!(err.starts_with("cgroup path \"\" does not exist"), "{err}");
        let missing = dir.path().join("gone").display().to_string();
        let err = of_task(&on, &config("nomad-80001", &missing)).unwrap_err();
        assert_eq!(err, format!("cgroup path {missing:?} does not exist"));
        let err = of_task(
            &on,
            &TaskConfig {
                user: "nomad-80001".into(),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
    }

    #[test]
    fn the_cgroup_file_is_cgroup_procs_else_tasks() {
        let dir = tempfile::tempdir().unwrap();
        assert!(open_cgroup(dir.path()).unwrap_err().contains("tasks"));
        std::fs::write(dir.path().join("tasks"), b"").unwrap();
        open_cgroup(dir.path()).expect("v1 tasks");
        std::fs::write(dir.path().join("cgroup.procs"), b"").unwrap();
        std::fs::remove_file(dir.path().join("tasks")).unwrap();
        open_cgroup(dir.path()).expect("cgroup.procs");
    }
}
