//! Plain-text rendering of what happened in one case: the operations, what was sent, what came
//! back. Used for JUnit `system-out` and the console's failure details.

use std::fmt::Write as _;

use crate::model::{Case, OpEvent, Request, Response};

/// The transcript of every operation of a case, oldest first.
pub fn case_transcript(case: &Case) -> String {
    let mut out = String::new();
    for (i, ev) in case.events.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&event_transcript(ev));
    }
    out
}

/// One operation as text: header with timing against the deadline, request, response, notes.
pub fn event_transcript(ev: &OpEvent) -> String {
    let mut out = String::new();
    let deadline = match ev.deadline_ms {
        Some(d) => format!(" (deadline {})", fmt_ms(d as f64)),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "== {} at +{} took {}{}",
        ev.operation,
        fmt_ms(ev.started_ms as f64),
        fmt_ms(ev.duration_ms),
        deadline
    );
    match &ev.request {
        Request::Exec { argv, env, cwd } => {
            let _ = writeln!(out, "argv: {argv:?}");
            if let Some(cwd) = cwd {
                let _ = writeln!(out, "cwd:  {cwd}");
            }
            let _ = writeln!(out, "env:");
            for (k, v) in env {
                let _ = writeln!(out, "  {k}={v}");
            }
        }
        Request::Grpc { method, request } => {
            let _ = writeln!(out, "method: {method}");
            let _ = writeln!(out, "request: {}", pretty(request));
        }
        Request::Http { method, path, body } => {
            let _ = writeln!(out, "{method} {path}");
            if let Some(b) = body {
                let _ = writeln!(out, "body: {}", pretty(b));
            }
        }
    }
    match &ev.response {
        Response::Exec {
            status,
            stdout,
            stderr,
        } => {
            let _ = writeln!(out, "result: {status}");
            for (name, ex) in [("stdout", stdout), ("stderr", stderr)] {
                if ex.total_bytes == 0 {
                    let _ = writeln!(out, "{name}: (empty)");
                } else {
                    let cut = if ex.truncated { ", excerpt" } else { "" };
                    let _ = writeln!(out, "{name} ({} bytes{cut}):", ex.total_bytes);
                    for line in ex.text.lines() {
                        let _ = writeln!(out, "  | {line}");
                    }
                }
            }
        }
        Response::Grpc {
            code,
            message,
            response,
        } => {
            if message.is_empty() {
                let _ = writeln!(out, "status: {code}");
            } else {
                let _ = writeln!(out, "status: {code}: {message}");
            }
            if let Some(r) = response {
                let _ = writeln!(out, "response: {}", pretty(r));
            }
        }
        Response::Http { status, body } => {
            let _ = writeln!(out, "status: {status}");
            if let Some(b) = body {
                let _ = writeln!(out, "body: {}", pretty(b));
            }
        }
    }
    for note in &ev.notes {
        let _ = writeln!(out, "note: {note}");
    }
    if let Some(r) = &ev.reproduce {
        let _ = writeln!(out, "reproduce: {r}");
    }
    out
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// Milliseconds as a short human figure: `850ms`, `1.25s`.
pub fn fmt_ms(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{:.2}s", ms / 1000.0)
    }
}
