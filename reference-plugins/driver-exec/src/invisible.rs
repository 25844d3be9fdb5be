//! The invisible-tasks variant: tasks whose processes do not carry their environment.
//!
//! A driver that runs tasks in a VM gives them their environment inside the VM, where no
//! host process shows it in `/proc/<pid>/environ`. This variant models that on the host:
//! the supervisor and the task start with `PATH` only ([`MINIMAL_PATH`]). The task still sees
//! `TaskConfig.env` when it is a shell script, `/bin/sh -c SCRIPT [args...]`: the variables
//! go, as plain (not exported) shell assignments `NAME='value'`, into a file (mode 0600) in
//! the task's state directory, and the task runs as `/bin/sh -c '. FILE; SCRIPT' [args...]`.
//! So the script expands them, but the commands it starts do not inherit them. Names that are
//! no shell identifier are left out. Any other argv runs with `PATH` only.
//!
//! ExecTask and ExecTaskStreaming are not changed: they still run with the task's env.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// The file in a task's state directory that holds its environment.
pub const ENV_FILE: &str = "task-env.sh";

/// The only environment variable the supervisor and the task start with.
const MINIMAL_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The argv and the process environment to start a task with.
pub struct Hidden {
    pub argv: Vec<String>,
    pub env: HashMap<String, String>,
}

/// Hides `env` from the process environment of the task started as `argv`, writing the env
/// file into `task_state_dir` when the task is a `/bin/sh -c` script.
pub fn hide(
    argv: Vec<String>,
    env: &HashMap<String, String>,
    task_state_dir: &Path,
) -> Result<Hidden, String> {
    let minimal = HashMap::from([("PATH".to_string(), MINIMAL_PATH.to_string())]);
    let argv = match argv.as_slice() {
        [shell, flag, script, rest @ ..] if shell == "/bin/sh" && flag == "-c" => {
            let file = task_state_dir.join(ENV_FILE);
            write_env_file(&file, env)?;
            let script = format!(". {}; {script}", quote(&file.to_string_lossy()));
            let mut wrapped = vec![shell.clone(), flag.clone(), script];
            wrapped.extend(rest.iter().cloned());
            wrapped
        }
        _ => argv,
    };
    Ok(Hidden { argv, env: minimal })
}

/// Writes `NAME='value'` lines, sorted, to a new file that only the owner can read.
fn write_env_file(path: &Path, env: &HashMap<String, String>) -> Result<(), String> {
    let sorted: BTreeMap<&String, &String> = env.iter().collect();
    let mut text = String::new();
    for (name, value) in sorted {
        if is_shell_name(name) {
            text.push_str(&format!("{name}={}\n", quote(value)));
        }
    }
    let write = || -> std::io::Result<()> {
        match std::fs::remove_file(path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
            _ => {}
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        file.write_all(text.as_bytes())
    };
    write().map_err(|err| format!("failed to write {}: {err}", path.display()))
}

/// `value` in single quotes, for sh: each `'` becomes `'\''`.
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// Whether `name` can be assigned in sh: a letter or `_`, then letters, digits and `_`.
fn is_shell_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shell_scripts_source_the_env_file() {
        let dir = tempfile::tempdir().unwrap();
        let env = HashMap::from([
            ("B".to_string(), "it's".to_string()),
            ("A_1".to_string(), "x y".to_string()),
            ("not-a-name".to_string(), "skipped".to_string()),
            ("1X".to_string(), "skipped".to_string()),
        ]);
        let argv = strings(&["/bin/sh", "-c", "echo \"$0 $1\"", "zero", "one"]);
        let hidden = hide(argv, &env, dir.path()).unwrap();
        let file = dir.path().join(ENV_FILE);
        assert_eq!(
            hidden.argv,
            strings(&[
                "/bin/sh",
                "-c",
                &format!(". '{}'; echo \"$0 $1\"", file.display()),
                "zero",
                "one"
            ])
        );
        assert_eq!(hidden.env.keys().collect::<Vec<_>>(), ["PATH"]);
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text, "A_1='x y'\nB='it'\\''s'\n");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        let output = std::process::Command::new("/bin/sh")
            .args(&hidden.argv[1..])
            .env_clear()
            .envs(&hidden.env)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "zero one\n");
    }

    #[test]
    fn the_script_sees_the_variables_but_its_children_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let env = HashMap::from([("GREETING".to_string(), "it's me".to_string())]);
        let script = "echo \"$GREETING\"; /bin/sh -c 'echo \"${GREETING-unset}\"'";
        let argv = strings(&["/bin/sh", "-c", script]);
        let hidden = hide(argv, &env, dir.path()).unwrap();
        let output = std::process::Command::new(&hidden.argv[0])
            .args(&hidden.argv[1..])
            .env_clear()
            .envs(&hidden.env)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "it's me\nunset\n");
    }

    #[test]
    fn other_commands_run_unchanged_with_path_only() {
        let dir = tempfile::tempdir().unwrap();
        let env = HashMap::from([("X".to_string(), "1".to_string())]);
        for argv in [
            strings(&["sleep", "1"]),
            strings(&["/bin/sh", "-c"]),
            strings(&["/bin/bash", "-c", "true"]),
        ] {
            let hidden = hide(argv.clone(), &env, dir.path()).unwrap();
            assert_eq!(hidden.argv, argv);
            assert_eq!(hidden.env.len(), 1);
        }
        assert!(!dir.path().join(ENV_FILE).exists());
    }

    #[test]
    fn shell_names() {
        for good in ["A", "_", "a_1", "NOMAD_TASK_DIR"] {
            assert!(is_shell_name(good), "{good}");
        }
        for bad in ["", "1A", "a-b", "a.b", "é"] {
            assert!(!is_shell_name(bad), "{bad}");
        }
    }
}
