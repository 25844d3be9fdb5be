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
