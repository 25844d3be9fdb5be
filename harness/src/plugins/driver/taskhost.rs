//! What the Nomad client builds on the node for a task before StartTask, as it builds it
//! (client/allocdir, client/allocrunner/taskrunner/task_dir_hook.go, wrangler_hook.go,
//! dynamic_users_hook.go, client/taskenv): the allocation and task directories with the
//! client's modes (0777, `tmp` 1777; `secrets` and `private` on tmpfs when root), the task's
//! view of them by the driver's filesystem isolation (host paths for none; `/alloc`, `/local`,
//! `/secrets` for chroot and image, the chroot's root filesystem built by the client; bind
//! mounts under the mounts directory for unveil), the task's cgroup, a dynamic workload user
//! when the driver asks for one, and the agent's environment for drivers that do not bring an
//! image.
//!
//! One departure, said in docs/guides/driver.md: the client hard-links (or copies) the chroot_env's files
//! into every chroot; the harness bind-mounts each entry read-only, which gives the task the
//! same tree at a fraction of the cost. Everything mounted here lies under the task's
//! allocation directory, and [`unmount_under`] undoes it.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use nix::mount::{MsFlags, mount};

/// The driver's filesystem isolation (Capabilities.fs_isolation), as the client maps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    None,
    Chroot,
    Image,
    Unveil,
}

impl Isolation {
    /// From the proto enum value (NONE 0, CHROOT 1, IMAGE 2, UNVEIL 3); the client maps any
    /// other value to none.
    pub fn from_proto(v: i32) -> Isolation {
        match v {
            1 => Isolation::Chroot,
            2 => Isolation::Image,
            3 => Isolation::Unveil,
            _ => Isolation::None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Isolation::None => "none",
            Isolation::Chroot => "chroot",
            Isolation::Image => "image",
            Isolation::Unveil => "unveil",
        }
    }
}

/// The client's default `chroot_env` (client/config/config.go).
pub const DEFAULT_CHROOT_ENV: &[&str] = &[
    "/bin",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/run/resolvconf",
    "/sbin",
    "/usr",
    "/run/systemd/resolve",
];

/// Variables of the agent's environment the client never passes to a task
/// (command/agent/host DefaultEnvDenyList).
pub const ENV_DENYLIST: &[&str] = &[
    "CONSUL_TOKEN",
    "CONSUL_HTTP_TOKEN",
    "CONSUL_HTTP_TOKEN_FILE",
    "NOMAD_TOKEN",
    "VAULT_TOKEN",
    "CONSUL_LICENSE",
    "NOMAD_LICENSE",
    "VAULT_LICENSE",
    "CONSUL_LICENSE_PATH",
    "NOMAD_LICENSE_PATH",
    "VAULT_LICENSE_PATH",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_METADATA_URL",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_OAUTH_ACCESS_TOKEN",
];

/// The first and last dynamic workload user IDs (client `users` block defaults).
pub const DYNAMIC_USER_MIN: u32 = 80000;
pub const DYNAMIC_USER_MAX: u32 = 89999;

/// Where the client puts task cgroups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cgroups {
    /// cgroup v2 at this mount: `<root>/nomad.slice/share.slice/<alloc>.<task>.scope`.
    V2(PathBuf),
    /// cgroup v1 with a cpuset hierarchy at this mount: `<root>/nomad/share`, shared by tasks.
    V1(PathBuf),
    /// None can be made here (the reason): the task gets no cgroup path.
    Unavailable(String),
}

impl Cgroups {
    /// What this node offers, as the client's cgroupslib sees it.
    pub fn detect(as_root: bool) -> Cgroups {
        if !as_root {
            return Cgroups::Unavailable(
                "the harness does not run as root, and only root can make the task cgroups Nomad's client (root) makes".into(),
            );
        }
        let root = Path::new("/sys/fs/cgroup");
        if root.join("cgroup.controllers").is_file() {
            return Cgroups::V2(root.to_path_buf());
        }
        if root.join("cpuset").join("cpuset.cpus").is_file() {
            return Cgroups::V1(root.join("cpuset"));
        }
        Cgroups::Unavailable("no cgroup v2 or v1 cpuset hierarchy under /sys/fs/cgroup".into())
    }

    /// The task's cgroup path as the client computes it (cgroupslib LinuxResourcesPath).
    pub fn task_path(&self, alloc_id: &str, task: &str) -> Option<PathBuf> {
        match self {
            Cgroups::V2(root) => Some(
                root.join("nomad.slice")
                    .join("share.slice")
                    .join(format!("{alloc_id}.{task}.scope")),
            ),
            Cgroups::V1(root) => Some(root.join("nomad").join("share")),
            Cgroups::Unavailable(_) => None,
        }
    }
}

/// What the client knows when it builds a task: from the driver's Capabilities, the node and
/// the run.
#[derive(Clone, Debug)]
pub struct TaskHost {
    pub isolation: Isolation,
    /// chroot_env: host path -> path inside the task directory.
    pub chroot_env: Vec<(PathBuf, PathBuf)>,
    /// Capabilities.dynamic_workload_users: the client gives each task a `nomad-<N>` user.
    pub dynamic_users: bool,
    pub cgroups: Cgroups,
    /// The agent's environment as tasks of non-image drivers get it (denylist applied).
    pub host_env: Vec<(String, String)>,
    /// The node's usable CPU compute in MHz (for PercentTicks).
    pub usable_compute_mhz: u64,
    pub as_root: bool,
    next_user: Arc<AtomicU32>,
}

impl TaskHost {
    /// A host for a driver of `isolation` on this node; `chroot_env` as the client config
    /// gives it (None: the client's default).
    pub fn new(
        isolation: Isolation,
        dynamic_users: bool,
        chroot_env: Option<Vec<(PathBuf, PathBuf)>>,
    ) -> TaskHost {
        let as_root = nix::unistd::geteuid().is_root();
        let chroot_env = chroot_env.unwrap_or_else(|| {
            DEFAULT_CHROOT_ENV
                .iter()
                .map(|p| (PathBuf::from(p), PathBuf::from(p)))
                .collect()
        });
        TaskHost {
            isolation,
            chroot_env,
            dynamic_users,
            cgroups: Cgroups::detect(as_root),
            host_env: agent_env(),
            usable_compute_mhz: super::topology::usable_compute_mhz(),
            as_root,
            next_user: Arc::new(AtomicU32::new(DYNAMIC_USER_MIN)),
        }
    }

    /// Make (or join) the task's cgroup (see [`make_cgroup`]).
    pub fn task_cgroup(&self, alloc_id: &str, task: &str) -> Result<PathBuf, String> {
        make_cgroup(&self.cgroups, alloc_id, task)
    }

    /// The user the client sets for a task whose job names none.
    pub fn dynamic_user(&self) -> Option<String> {
        if !self.dynamic_users {
            return None;
        }
        let span = DYNAMIC_USER_MAX - DYNAMIC_USER_MIN + 1;
        let n = self.next_user.fetch_add(1, Ordering::SeqCst);
        Some(format!(
            "nomad-{}",
            DYNAMIC_USER_MIN + (n - DYNAMIC_USER_MIN) % span
        ))
    }

    /// Why tasks of this driver cannot be built here, if they cannot.
    pub fn cannot_build(&self) -> Option<String> {
        match self.isolation {
            Isolation::Chroot | Isolation::Unveil if !self.as_root => Some(format!(
                "the driver's filesystem isolation is {}: Nomad's client (as root) builds the task's directories with bind mounts, and the harness needs root to do the same",
                self.isolation.name()
            )),
            _ => None,
        }
    }
}

/// The agent's environment with the client's denylist applied: what tasks of drivers without
/// image isolation get (task_dir_hook.go, SetHostEnvvars).
fn agent_env() -> Vec<(String, String)> {
    let env = without_denied(std::env::vars());
    // Whatever the agent's environment holds that looks secret (a CI token, say) reaches the
    // task, as with Nomad, but never a report.
    for (k, v) in &env {
        if nomad_conform_reports::redact::is_secret_name(k) {
            crate::secrets::register(v);
        }
    }
    env
}

/// Leave the agent's own environment out of a recorded StartTask or RecoverTask request (at
/// `/task/env` or `/handle/config/env`): the variables the task got from the harness's
/// environment unchanged are replaced by one entry saying how many there were. Reports stay
/// readable, and a reproduce command sends the task's own variables.
pub fn elide_agent_env(request: &mut serde_json::Value, host_env: &[(String, String)]) {
    for pointer in ["/task/env", "/handle/config/env"] {
        let Some(serde_json::Value::Object(env)) = request.pointer_mut(pointer) else {
            continue;
        };
        let before = env.len();
        env.retain(|k, v| {
            !host_env
                .iter()
                .any(|(hk, hv)| hk == k && v.as_str() == Some(hv.as_str()))
        });
        let left_out = before - env.len();
        if left_out > 0 {
            env.insert(
                "(agent environment)".into(),
                serde_json::Value::String(format!(
                    "{left_out} variables of the harness's own environment, which Nomad's client passes to drivers without image isolation, are left out of this record"
                )),
            );
        }
    }
}

fn without_denied(vars: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vars
        .filter(|(k, _)| !ENV_DENYLIST.contains(&k.as_str()))
        .collect();
    env.sort();
    env
}

/// Set `path`'s mode exactly (DirBuilder's mode is cut by the umask; the client chmods).
fn chmod(path: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// `mkdir -p` then chmod `mode`, and as root chown to nobody: the client's allocMkdirAll
/// (dropDirPermissions).
pub fn client_mkdir(path: &Path, mode: u32, as_root: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(path)?;
    chmod(path, mode)?;
    if as_root && let Some(nobody) = nobody() {
        let _ = nix::unistd::chown(path, Some(nobody.0), Some(nobody.1));
    }
    Ok(())
}

fn nobody() -> Option<(nix::unistd::Uid, nix::unistd::Gid)> {
    let u = nix::unistd::User::from_name("nobody").ok()??;
    Some((u.uid, u.gid))
}

/// A tmpfs of `size_mib` at `dir` (noexec), as the client mounts secrets and private
/// directories when it runs as root.
pub fn mount_tmpfs(dir: &Path, size_mib: u32) -> Result<(), String> {
    let opts = format!("size={size_mib}m");
    mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        MsFlags::MS_NOEXEC,
        Some(opts.as_str()),
    )
    .map_err(|e| format!("failed to mount a tmpfs at {}: {e}", dir.display()))
}

/// Bind `src` at `dst` (recursively), read-only when asked.
pub fn bind(src: &Path, dst: &Path, read_only: bool) -> Result<(), String> {
    let fail =
        |e: nix::Error| format!("failed to bind {} at {}: {e}", src.display(), dst.display());
    mount(
        Some(src),
        dst,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(fail)?;
    if read_only {
        mount(
            None::<&str>,
            dst,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
            None::<&str>,
        )
        .map_err(fail)?;
    }
    Ok(())
}

/// Build the chroot's root filesystem in `task_dir` from `chroot_env` (each host path appears
/// at its destination inside: directories and files bound read-only, symlinks recreated,
/// missing ones left out), with the shared allocation directory bound at `alloc` and its logs
/// read-only, as the client's TaskDir.Build does for chroot isolation.
pub fn build_chroot(
    task_dir: &Path,
    shared_alloc: &Path,
    chroot_env: &[(PathBuf, PathBuf)],
) -> Result<(), String> {
    for (src, dst) in chroot_env {
        let Ok(meta) = std::fs::symlink_metadata(src) else {
            continue;
        };
        let rel = dst.strip_prefix("/").unwrap_or(dst);
        let target = task_dir.join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("failed to create {}: {e}", parent.display()))?;
        }
        if meta.file_type().is_symlink() {
            let link = std::fs::read_link(src)
                .map_err(|e| format!("failed to read {}: {e}", src.display()))?;
            if std::fs::symlink_metadata(&target).is_err() {
                std::os::unix::fs::symlink(&link, &target)
                    .map_err(|e| format!("failed to link {}: {e}", target.display()))?;
            }
        } else if meta.is_dir() {
            std::fs::create_dir_all(&target)
                .map_err(|e| format!("failed to create {}: {e}", target.display()))?;
            bind(src, &target, true)?;
        } else if meta.is_file() {
            std::fs::write(&target, b"")
                .map_err(|e| format!("failed to create {}: {e}", target.display()))?;
            bind(src, &target, true)?;
        }
    }
    let alloc = task_dir.join("alloc");
    std::fs::create_dir_all(&alloc)
        .map_err(|e| format!("failed to create {}: {e}", alloc.display()))?;
    bind(shared_alloc, &alloc, false)?;
    bind(&shared_alloc.join("logs"), &alloc.join("logs"), true)?;
    Ok(())
}

/// Make (or join) the task's cgroup as the client's wrangler hook does before StartTask:
/// v2 a scope of its own; v1 the shared `nomad/share` cpuset (its cpus and mems copied from
/// the parent, which a new cpuset needs before a process can join). Returns the path. The
/// node's partitions above a task's own scope (v2 `nomad.slice/share.slice`, v1
/// `nomad/share`) stay, empty, as a Nomad client leaves them: other runs may be using them.
pub fn make_cgroup(cgroups: &Cgroups, alloc_id: &str, task: &str) -> Result<PathBuf, String> {
    let path = cgroups
        .task_path(alloc_id, task)
        .ok_or_else(|| "no cgroup hierarchy".to_string())?;
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    match cgroups {
        Cgroups::V2(root) => {
            let mut dir = root.clone();
            for part in path.strip_prefix(root).unwrap_or(&path).components() {
                dir = dir.join(part);
                match std::fs::create_dir(&dir) {
                    Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                        return Err(io(&dir, e));
                    }
                    _ => {}
                }
            }
        }
        Cgroups::V1(root) => {
            let mut dir = root.clone();
            for part in ["nomad", "share"] {
                let parent = dir.clone();
                dir = dir.join(part);
                match std::fs::create_dir(&dir) {
                    Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                        return Err(io(&dir, e));
                    }
                    _ => {}
                }
                // Another run may have made it a moment ago: whoever finds it without CPUs
                // or memory nodes gives it the parent's.
                for f in ["cpuset.cpus", "cpuset.mems"] {
                    let mine = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
                    if mine.trim().is_empty() {
                        let v = std::fs::read_to_string(parent.join(f))
                            .map_err(|e| io(&parent.join(f), e))?;
                        std::fs::write(dir.join(f), v.trim()).map_err(|e| io(&dir.join(f), e))?;
                    }
                }
            }
        }
        Cgroups::Unavailable(why) => return Err(why.clone()),
    }
    Ok(path)
}

/// The processes in a task's own cgroup (v2 scopes only: the v1 partition is shared).
pub fn cgroup_members(cgroups: &Cgroups, path: &Path) -> Vec<i32> {
    if !matches!(cgroups, Cgroups::V2(_)) {
        return Vec::new();
    }
    std::fs::read_to_string(path.join("cgroup.procs"))
        .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// The client's last-resort kill of a task's cgroup, then its removal (wrangler stop hook):
/// v2 only, `cgroup.kill` then rmdir; the shared v1 partition stays.
pub fn destroy_cgroup(cgroups: &Cgroups, path: &Path) {
    if !matches!(cgroups, Cgroups::V2(_)) {
        return;
    }
    let _ = std::fs::write(path.join("cgroup.kill"), "1");
    for _ in 0..50 {
        if std::fs::remove_dir(path).is_ok() || !path.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Unmount everything mounted under `dir`, deepest first (detaching busy ones): what the
/// client does to a task directory when it destroys it. Returns what it unmounted. Where the
/// mount table cannot be read nothing is unmounted; the directory's removal then leaves every
/// mount in place on its own (`safe_remove`).
pub fn unmount_under(dir: &Path) -> Vec<PathBuf> {
    let mut mounts = crate::mounts::under(dir).unwrap_or_default();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    let mut done = Vec::new();
    for m in mounts {
        if nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH).is_ok() {
            done.push(m);
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isolation_from_the_proto_enum() {
        assert_eq!(Isolation::from_proto(0), Isolation::None);
        assert_eq!(Isolation::from_proto(1), Isolation::Chroot);
        assert_eq!(Isolation::from_proto(2), Isolation::Image);
        assert_eq!(Isolation::from_proto(3), Isolation::Unveil);
        assert_eq!(Isolation::from_proto(9), Isolation::None);
    }

    #[test]
    fn cgroup_paths_are_the_clients() {
        let v2 = Cgroups::V2("/sys/fs/cgroup".into());
        assert_eq!(
            v2.task_path("a1", "web").unwrap(),
            Path::new("/sys/fs/cgroup/nomad.slice/share.slice/a1.web.scope")
        );
        let v1 = Cgroups::V1("/sys/fs/cgroup/cpuset".into());
        assert_eq!(
            v1.task_path("a1", "web").unwrap(),
            Path::new("/sys/fs/cgroup/cpuset/nomad/share")
        );
        assert!(
            Cgroups::Unavailable("x".into())
                .task_path("a", "b")
                .is_none()
        );
    }

    #[test]
    fn dynamic_users_count_up_from_80000() {
        let h = TaskHost::new(Isolation::None, true, None);
        assert_eq!(h.dynamic_user().as_deref(), Some("nomad-80000"));
        assert_eq!(h.dynamic_user().as_deref(), Some("nomad-80001"));
        let off = TaskHost::new(Isolation::None, false, None);
        assert_eq!(off.dynamic_user(), None);
    }

    #[test]
    fn the_agent_env_never_carries_denied_tokens() {
        let vars = [
            ("VAULT_TOKEN", "s.x"),
            ("HOME", "/root"),
            ("NOMAD_TOKEN", "t"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(
            without_denied(vars.into_iter()),
            vec![("HOME".to_string(), "/root".to_string())]
        );
    }
}
