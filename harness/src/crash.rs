//! How a program that died says why: the first lines of a Go `panic:` or `fatal error:` with
//! the first goroutine's frames, a Rust `thread '...' panicked at`, a Python traceback. Used in
//! failure messages of every kind whose subject is a process the harness runs (a driver plugin,
//! a lock client), so that an author reads the crash, not only "transport error" or an exit
//! status.

/// The crash report in `stderr`, from its first line through the first goroutine's frames (or
/// the end of a traceback), at most 16 lines; None when `stderr` holds none.
pub fn report(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    let start = lines.iter().position(|l| is_crash_start(l))?;
    let mut out = Vec::new();
    let mut in_goroutine = false;
    for l in lines[start..].iter().take(16) {
        if l.starts_with("goroutine ") {
            if in_goroutine {
                break;
            }
            in_goroutine = true;
        } else if in_goroutine && l.trim().is_empty() {
            break;
        }
        out.push(*l);
    }
    Some(out.join("\n"))
}

/// [`report`], or the last 12 lines when there is no crash report.
pub fn last_words(stderr: &str) -> String {
    report(stderr).unwrap_or_else(|| {
        let lines: Vec<&str> = stderr.lines().collect();
        let from = lines.len().saturating_sub(12);
        lines[from..].join("\n")
    })
}

/// The crash in one line, for the one-line "seen" of a failure: the panic's (or error's) first
/// line and the first frame in the program's own code, e.g. `panic: runtime error: index out of
/// range [1] with length 1, in lxc.mountEntries at /src/lxc/lxc.go:146`. Frames of Go's runtime,
/// of modules (`/pkg/mod/`, `vendor/`) and of Python's libraries are passed over: the author
/// wants the line of their own code. None when `stderr` holds no crash report.
pub fn headline(stderr: &str) -> Option<String> {
    let report = report(stderr)?;
    let lines: Vec<&str> = report.lines().collect();
    let first = lines.first()?.trim();
    if first.starts_with("Traceback ") {
        return Some(python_headline(&lines));
    }
    if first.starts_with("thread '") {
        // `thread 'main' panicked at src/lease.rs:9:5:` then the message.
        let at = first.split(" panicked at ").nth(1).unwrap_or("");
        let message = lines.get(1).map(|l| l.trim()).unwrap_or("");
        return Some(
            format!("panicked at {} {message}", at.trim())
                .trim()
                .to_string(),
        );
    }
    // Go: frames come in pairs, the function then a tab and `file:line +0x..`.
    let own = lines.windows(2).find_map(|w| {
        let (func, file) = (w[0].trim(), w[1]);
        if !file.starts_with('\t') || func.starts_with("created by ") {
            return None;
        }
        let file = file.split_whitespace().next()?;
        let library = [
            "/pkg/mod/",
            "/vendor/",
            "/src/runtime/",
            "/usr/local/go/",
            "/usr/lib/go",
        ]
        .iter()
        .any(|l| file.contains(l));
        if library || func.starts_with("runtime.") || func.starts_with("panic(") {
            return None;
        }
        Some(format!("in {} at {file}", go_function(func)))
    });
    Some(match own {
        Some(frame) => format!("{first}, {frame}"),
        None => first.to_string(),
    })
}

/// How a plugin process that died by itself went, in a line: its crash (see [`headline`]) when
/// `stderr` holds one, otherwise its exit `status`.
pub fn death_line(status: &dyn std::fmt::Display, stderr: &str) -> String {
    match headline(stderr) {
        Some(crash) => format!("the plugin crashed ({status}): {crash}"),
        None => format!("the plugin process died ({status})"),
    }
}

/// A Go frame's function without its arguments and its module path: `main.(*D).Start(0xc0,
/// {0x0})` is `main.(*D).Start`, `github.com/o/nomad-driver-x/x.mount(...)` is `x.mount`.
fn go_function(frame: &str) -> &str {
    let name = match frame.strip_suffix(')').and_then(|f| f.rfind('(')) {
        // `(*D)` is part of the name: the arguments' parenthesis follows a name character.
        Some(i) if i > 0 && !frame[..i].ends_with('.') => &frame[..i],
        _ => frame,
    };
    // Only a package path has slashes in a Go symbol.
    match name.rfind('/') {
        Some(i) => &name[i + 1..],
        None => name,
    }
}

/// A Python traceback in one line: the exception, and the last frame outside the libraries.
fn python_headline(lines: &[&str]) -> String {
    let exception = lines
        .iter()
        .rev()
        .find(|l| !l.starts_with(' ') && !l.starts_with("Traceback"))
        .map(|l| l.trim())
        .unwrap_or("a Python exception");
    let frame = lines.iter().rev().find_map(|l| {
        let rest = l.trim().strip_prefix("File \"")?;
        let (file, tail) = rest.split_once('"')?;
        if file.contains("site-packages") || file.contains("/lib/python") {
            return None;
        }
        // `, line 3, in <module>`
        let mut parts = tail.split(", ").filter(|p| !p.is_empty());
        let line = parts.next()?.trim_start_matches("line ").trim();
        let func = parts
            .next()
            .map(|p| p.trim_start_matches("in "))
            .unwrap_or("?");
        Some(format!(", in {func} at {file}:{line}"))
    });
    format!("{exception}{}", frame.unwrap_or_default())
}

fn is_crash_start(line: &str) -> bool {
    line.starts_with("panic: ")
        || line.starts_with("fatal error: ")
        || line.starts_with("Traceback (most recent call last):")
        // Newer Rust names the thread's id too: `thread 'main' (2738) panicked at`.
        || (line.starts_with("thread '") && line.contains(" panicked at "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_panics_are_cut_to_the_first_goroutine() {
        let stderr = "{\"@level\":\"info\"}\npanic: runtime error: invalid memory address\n[signal SIGSEGV]\n\ngoroutine 37 [running]:\nmain.(*D).StartTask(0x0)\n\t/src/start.go:88 +0x2b\n\ngoroutine 1 [chan receive]:\nmain.main()\n";
        let e = report(stderr).unwrap();
        assert!(e.starts_with("panic: runtime error"), "{e}");
        assert!(e.contains("/src/start.go:88"), "{e}");
        assert!(!e.contains("goroutine 1 "), "{e}");
    }

    #[test]
    fn headlines_name_the_first_frame_of_the_programs_own_code() {
        let go = "{\"@level\":\"debug\"}\npanic: runtime error: index out of range [1] with length 1\n\ngoroutine 12 [running]:\ngithub.com/hashicorp/nomad-driver-lxc/lxc.mountEntries(0xc000, {0x0, 0x0})\n\t/src/lxc/lxc.go:146 +0x5a5\ngithub.com/hashicorp/nomad/plugins/drivers.(*driverPluginServer).StartTask(0xc0)\n\t/root/go/pkg/mod/github.com/hashicorp/nomad/plugins/drivers/server.go:104 +0x1c5\n";
        assert_eq!(
            headline(go).unwrap(),
            "panic: runtime error: index out of range [1] with length 1, in lxc.mountEntries at /src/lxc/lxc.go:146"
        );
        // The runtime's and the modules' frames are passed over; a method keeps its receiver.
        let nil = "panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a3f2b]\n\ngoroutine 37 [running]:\nruntime.panicmem()\n\t/usr/local/go/src/runtime/panic.go:262 +0x2e\nmain.(*Driver).StartTask(0xc000112000, {0x0, 0x0})\n\t/src/driver/start.go:88 +0x2b\n";
        assert_eq!(
            headline(nil).unwrap(),
            "panic: runtime error: invalid memory address or nil pointer dereference, in main.(*Driver).StartTask at /src/driver/start.go:88"
        );
        let rust = "thread 'main' panicked at src/lease.rs:9:5:\nsend on closed channel\n";
        assert_eq!(
            headline(rust).unwrap(),
            "panicked at src/lease.rs:9:5: send on closed channel"
        );
        let py = "Traceback (most recent call last):\n  File \"/srv/plugin.py\", line 3, in create\n  File \"/usr/lib/python3.8/json/__init__.py\", line 357, in loads\nKeyError: 'Lock'\n";
        assert_eq!(
            headline(py).unwrap(),
            "KeyError: 'Lock', in create at /srv/plugin.py:3"
        );
        assert_eq!(headline("no crash here\n"), None);
    }

    #[test]
    fn rust_panics_and_python_tracebacks() {
        let rust = "lock-sidecar: renewing\nthread 'main' panicked at src/lease.rs:9:5:\nsend on closed channel\nnote: run with `RUST_BACKTRACE=1`";
        assert!(report(rust).unwrap().starts_with("thread 'main' panicked"));
        let with_id =
            "thread 'main' (2738) panicked at src/lease.rs:418:25:\nsend on closed channel";
        assert!(report(with_id).unwrap().contains("send on closed channel"));
        let py = "INFO start\nTraceback (most recent call last):\n  File \"c.py\", line 3, in <module>\nKeyError: 'Lock'\n";
        assert!(report(py).unwrap().contains("KeyError: 'Lock'"));
        assert_eq!(report("all fine\n"), None);
        assert_eq!(last_words("a\nb"), "a\nb");
    }
}
