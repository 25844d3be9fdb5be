//! Every `nomad-conform` command README.md and the pages under docs/ show is one the binary
//! takes: each command line of their code blocks, and each inline code span that gives a flag,
//! is parsed by the command line the binary parses (`cli::Cli`, as `main` does after the
//! settings file is merged in). A renamed or removed flag, a subcommand that moved, a required
//! flag left out or a value clap refuses fails here, naming the file and line. Parsing runs
//! nothing, so the test is fast and needs no plugin.

use std::path::{Path, PathBuf};

use clap::Parser as _;
use nomad_conform::cli::Cli;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README.md and every Markdown page under docs/, relative to the repository root.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut out);
    out
}

/// A command shown in a page: where, and its text as written (continuation lines joined).
#[derive(Debug)]
struct Shown {
    page: String,
    line: usize,
    text: String,
}

/// Whether `text` leaves a quote open or ends in a line continuation, so that the command goes
/// on on the next line.
fn continues(text: &str) -> bool {
    let (mut single, mut double, mut escaped) = (false, false, false);
    for c in text.chars() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            _ => {}
        }
    }
    single || double || escaped
}

/// The command a line starts, if it starts one: `nomad-conform ...` after an optional `$ `
/// prompt and `NAME=value` assignments.
fn command_start(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    rest = rest.strip_prefix("$ ").unwrap_or(rest);
    loop {
        let word = rest.split_whitespace().next()?;
        let is_assignment = word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        });
        if !is_assignment {
            break;
        }
        rest = rest.trim_start()[word.len()..].trim_start();
    }
    (rest == "nomad-conform" || rest.starts_with("nomad-conform ")).then_some(rest)
}

/// Every command of a page: the lines of its fenced code blocks that start one, and its inline
/// code spans that start one and give a flag (a span without a flag names a subcommand in
/// prose: `nomad-conform lock`).
fn commands(page: &Path) -> Vec<Shown> {
    let text = std::fs::read_to_string(page).unwrap();
    let name = page
        .strip_prefix(root())
        .unwrap_or(page)
        .display()
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut in_fence = false;
    let mut prompted = false;
    let mut prose = String::new();
    let mut prose_start = 0;
    let flush_prose = |prose: &mut String, start: usize, out: &mut Vec<Shown>| {
        for (i, span) in prose.split('`').enumerate() {
            if i % 2 == 1
                && let Some(cmd) = command_start(span)
                && cmd.contains(" -")
            {
                out.push(Shown {
                    page: name.clone(),
                    line: start,
                    text: cmd.to_string(),
                });
            }
        }
        prose.clear();
    };
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim_start().starts_with("```") {
            flush_prose(&mut prose, prose_start, &mut out);
            in_fence = !in_fence;
            // A block that shows a session (`$ nomad-conform ...` and what it printed): only
            // its prompted lines are commands, not the output's header line.
            if in_fence {
                prompted = lines[i + 1..]
                    .iter()
                    .take_while(|l| !l.trim_start().starts_with("```"))
                    .any(|l| l.starts_with("$ "));
            }
            i += 1;
            continue;
        }
        if in_fence {
            let start = command_start(line).filter(|_| !prompted || line.starts_with("$ "));
            if let Some(start) = start {
                let first = i + 1;
                let mut cmd = start.to_string();
                while continues(&cmd) && i + 1 < lines.len() {
                    i += 1;
                    cmd.push('\n');
                    cmd.push_str(lines[i]);
                }
                out.push(Shown {
                    page: name.clone(),
                    line: first,
                    text: cmd,
                });
            }
        } else if line.trim().is_empty() {
            // A code span never crosses a paragraph.
            flush_prose(&mut prose, prose_start, &mut out);
        } else {
            if prose.is_empty() {
                prose_start = i + 1;
            }
            prose.push_str(line);
            prose.push('\n');
        }
        i += 1;
    }
    flush_prose(&mut prose, prose_start, &mut out);
    out
}

/// The words of a command as a POSIX shell splits them: quotes, backslashes and line
/// continuations; a `#` comment, a redirection or an operator (`|`, `;`, `&`) ends it.
/// Variables are kept as written (`"$NOMAD_TOKEN"` is the word `$NOMAD_TOKEN`).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                            word.push(chars.next().unwrap())
                        }
                        '\\' if chars.peek() == Some(&'\n') => {
                            chars.next();
                        }
                        _ => word.push(q),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(n) => {
                    in_word = true;
                    word.push(n);
                }
            },
            '#' if !in_word => break,
            '|' | ';' | '&' | '>' => break,
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// Every page's commands, parsed.
fn check_pages() -> (usize, Vec<String>, Vec<String>) {
    let mut found = 0;
    let mut refused = Vec::new();
    let mut pages_with_commands = Vec::new();
    for page in pages() {
        let shown = commands(&page);
        if !shown.is_empty() {
            pages_with_commands.push(shown[0].page.clone());
        }
        for s in shown {
            found += 1;
            let argv = words(&s.text);
            assert_eq!(
                argv.first().map(String::as_str),
                Some("nomad-conform"),
                "{s:?}"
            );
            if let Err(e) = Cli::try_parse_from(&argv) {
                let why = e.to_string();
                let why = why.lines().next().unwrap_or_default();
                refused.push(format!("{}:{}: {}\n    {why}", s.page, s.line, s.text));
            }
        }
    }
    (found, refused, pages_with_commands)
}

#[test]
fn every_command_in_readme_and_docs_parses() {
    let (found, refused, pages) = check_pages();
    assert!(
        refused.is_empty(),
        "commands the binary does not take ({} of {found}):\n{}",
        refused.len(),
        refused.join("\n")
    );
    // The extraction finds what the pages show: README and every guide have commands.
    for page in [
        "README.md",
        "docs/guides/ci.md",
        "docs/guides/csi.md",
        "docs/guides/dhv.md",
        "docs/guides/driver.md",
        "docs/guides/fleet.md",
        "docs/guides/lock.md",
        "docs/guides/variables.md",
        "docs/reference/reports.md",
    ] {
        assert!(
            pages.iter().any(|p| p == page),
            "no nomad-conform command found in {page}: {pages:?}"
        );
    }
    assert!(found >= 40, "only {found} commands found");
}

/// The extraction and the splitting, on what the pages write: prompts, comments, continuation
/// lines, quotes spanning lines, variables, redirections, inline spans.
#[test]
fn commands_are_read_as_a_shell_reads_them() {
    assert_eq!(
        words("nomad-conform csi --launch \"p --endpoint {endpoint}\" --html csi.html  # note"),
        [
            "nomad-conform",
            "csi",
            "--launch",
            "p --endpoint {endpoint}",
            "--html",
            "csi.html"
        ]
    );
    assert_eq!(
        words("nomad-conform fleet collect --job j \\\n  --html f.html"),
        [
            "nomad-conform",
            "fleet",
            "collect",
            "--job",
            "j",
            "--html",
            "f.html"
        ]
    );
    assert_eq!(
        words("nomad-conform driver d --task-command 'command = {command}\nargs = {args}'"),
        [
            "nomad-conform",
            "driver",
            "d",
            "--task-command",
            "command = {command}\nargs = {args}"
        ]
    );
    assert_eq!(
        words("nomad-conform variables --token \"$NOMAD_TOKEN\" --volume 'v,{\"a\":\"b\"}'"),
        [
            "nomad-conform",
            "variables",
            "--token",
            "$NOMAD_TOKEN",
            "--volume",
            "v,{\"a\":\"b\"}"
        ]
    );
    assert_eq!(
        words("nomad-conform completions bash > out"),
        ["nomad-conform", "completions", "bash"]
    );
    assert_eq!(
        command_start("$ nomad-conform list dhv"),
        Some("nomad-conform list dhv")
    );
    assert_eq!(
        command_start("  X_Y=1 nomad-conform list dhv"),
        Some("nomad-conform list dhv")
    );
    assert_eq!(command_start("rerun: nomad-conform dhv p"), None);
    assert_eq!(command_start("nomad-conformance"), None);
    assert!(continues("nomad-conform x --a 'b"));
    assert!(continues("nomad-conform x \\"));
    assert!(!continues("nomad-conform x --a 'b' \"c\""));

    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("p.md");
    std::fs::write(
        &page,
        "Run `nomad-conform lock` or `nomad-conform dhv --plugin-dir\nDIR --out-dir out`.\n\n\
         ```sh\nnomad-conform dhv ./p --junit a.xml   # comment\nnomad-conform driver d --task-command 'a\nb'\n```\n\
         ```\n$ nomad-conform list dhv\nnomad-conform dhv: header\n```\n",
    )
    .unwrap();
    let shown: Vec<(usize, String)> = commands(&page)
        .into_iter()
        .map(|s| (s.line, s.text))
        .collect();
    assert_eq!(
        shown,
        [
            (
                1,
                "nomad-conform dhv --plugin-dir\nDIR --out-dir out".to_string()
            ),
            (
                5,
                "nomad-conform dhv ./p --junit a.xml   # comment".to_string()
            ),
            (
                6,
                "nomad-conform driver d --task-command 'a\nb'".to_string()
            ),
            (10, "nomad-conform list dhv".to_string()),
        ]
    );
}

/// A flag the binary does not have is refused, so a renamed flag in a page fails the test.
#[test]
fn a_renamed_flag_is_refused() {
    let ok = words("nomad-conform lock --client 'c {protected}' --give-up 5m");
    assert!(Cli::try_parse_from(&ok).is_ok());
    let renamed = words("nomad-conform lock --client 'c {protected}' --give-up-after 5m");
    assert!(Cli::try_parse_from(&renamed).is_err());
    let missing = words("nomad-conform fleet csi-node --plugin-id p --node-id n");
    assert!(Cli::try_parse_from(&missing).is_err(), "--json is required");
}

/// README's overview gives each suite's clause count: the number of clauses the specs have.
#[test]
fn readme_counts_each_suites_clauses() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    for (kind, bullet) in [
        ("dhv", "- **dynamic host volume (DHV) plugins**: "),
        ("csi", "- **CSI plugins**: "),
        ("driver", "- **task driver plugins**: "),
        ("lock", "- **singleton lock clients**: "),
        ("variables", "- **Variables servers**: "),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
            .args(["list", kind, "--format", "json"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let items: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        let line = readme
            .lines()
            .find(|l| l.starts_with(bullet))
            .unwrap_or_else(|| panic!("README has the bullet {bullet:?}"));
        assert!(
            line.starts_with(&format!("{bullet}{} clauses", items.len())),
            "README says {line:?}; the {kind} suite has {} clauses",
            items.len()
        );
    }
}
