//! Ctrl-C (SIGINT) and SIGTERM during a run. The first stops the clauses and undoes what they
//! made, patiently, saying what is being cleaned up; the second stops waiting for the plugin's
//! answers, but the run still kills every process group it started, unmounts, detaches, removes
//! its files and writes its reports; only a third exits at once.

use std::sync::OnceLock;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// How many interrupts the process has received. One per process: every run of a
/// `--plugin-dir` shares it.
#[derive(Clone, Debug)]
pub struct Interrupts {
    count: watch::Receiver<u32>,
}

static INTERRUPTS: OnceLock<Interrupts> = OnceLock::new();

impl Interrupts {
    /// The process's counter, listening from the first call on (call it inside the runtime).
    pub fn get() -> Interrupts {
        INTERRUPTS.get_or_init(Interrupts::install).clone()
    }

    fn install() -> Interrupts {
        let (tx, rx) = watch::channel(0u32);
        let mut int = signal(SignalKind::interrupt()).ok();
        let mut term = signal(SignalKind::terminate()).ok();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    Some(()) = recv(&mut int) => {}
                    Some(()) = recv(&mut term) => {}
                    else => return,
                }
                let n = *tx.borrow() + 1;
                if n >= 3 {
                    eprintln!(
                        "nomad-conform: third interrupt: exiting at once; processes, mounts or files of this run may be left behind"
                    );
                    crate::process::kill_all_live_groups();
                    std::process::exit(crate::error::exit::INTERRUPTED);
                }
                tx.send_replace(n);
            }
        });
        Interrupts { count: rx }
    }

    /// How many interrupts came so far.
    pub fn count(&self) -> u32 {
        *self.count.borrow()
    }

    /// Resolves once at least `n` interrupts came.
    pub async fn at_least(&self, n: u32) {
        let mut rx = self.count.clone();
        if rx.wait_for(|c| *c >= n).await.is_err() {
            // The listener is gone: no interrupt will come.
            std::future::pending::<()>().await;
        }
    }
}

async fn recv(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => None,
    }
}

/// The line printed at the first interrupt: what is being cleaned up.
pub fn first_notice(running: usize, undo: &[String], groups: usize) -> String {
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for d in undo {
        *kinds.entry(kind_of(d)).or_default() += 1;
    }
    let what: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} × {k}")).collect();
    format!(
        "nomad-conform: interrupted: stopping {running} clause(s) under way and cleaning up{}{}; this can take as long as the plugin takes to answer. Press Ctrl-C again to stop waiting for the plugin (every process the run started is still killed, its mounts and files removed and the reports written); a third Ctrl-C exits at once.",
        if what.is_empty() {
            String::new()
        } else {
            format!(": {}", what.join(", "))
        },
        if groups == 0 {
            String::new()
        } else {
            format!(" ({groups} process group(s) still running)")
        }
    )
}

/// The sort of thing an undo entry undoes, from its description: its words up to the first
/// name, path or number ("volume", "scratch directory", "publication of volume").
fn kind_of(description: &str) -> String {
    let words: Vec<&str> = description
        .split_whitespace()
        .take_while(|w| {
            !w.contains(['"', '/', '\'', '`']) && !w.contains(|c: char| c.is_ascii_digit())
        })
        .collect();
    if words.is_empty() {
        "other".into()
    } else {
        words.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_notice_counts_what_is_cleaned_up() {
        let undo = vec![
            "scratch directory /tmp/a".to_string(),
            "scratch directory /tmp/b".to_string(),
            "volume \"vol-1\"".to_string(),
        ];
        let line = first_notice(2, &undo, 1);
        assert!(line.contains("stopping 2 clause(s)"), "{line}");
        assert!(line.contains("2 × scratch directory"), "{line}");
        assert!(line.contains("1 × volume"), "{line}");
        assert!(line.contains("1 process group(s)"), "{line}");
        assert!(line.contains("Press Ctrl-C again"), "{line}");
    }
}
