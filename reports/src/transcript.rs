//! Plain-text rendering of what happened in one case: the operations, what was sent, what came
//! back. Used for JUnit `system-out` and the console's failure details.

use std::fmt::Write as _;

use crate::model::{Attachment, Case, OpEvent, Request, Response};

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

/// One line naming an attachment: its title, media type and size, and whether it was cut.
pub fn attachment_line(a: &Attachment) -> String {
    let cut = if a.truncated {
        format!(", truncated to {}", fmt_bytes(a.content.len() as u64))
    } else {
        String::new()
    };
    format!(
        "attachment: {} ({}, {}{cut})",
        a.title,
        a.media_type,
        fmt_bytes(a.total_bytes)
    )
}

/// The attachments of a case as text: a line for each, followed by its content when it is text
/// (not an SVG drawing), at most `max_text` bytes of it.
pub fn attachments_transcript(case: &Case, max_text: usize) -> String {
    let mut out = String::new();
    for a in &case.attachments {
        out.push_str(&attachment_line(a));
        if a.media_type == crate::model::MEDIA_SVG {
            out.push_str(": drawn in the HTML report\n");
            continue;
        }
        out.push_str(":\n");
        let shown = crate::text::head(&a.content, max_text);
        let end = shown.len();
        out.push_str(shown);
        if !shown.ends_with('\n') {
            out.push('\n');
        }
        if end < a.content.len() {
            let _ = writeln!(
                out,
                "[... {} more in the HTML and JSON reports]",
                fmt_bytes((a.content.len() - end) as u64)
            );
        }
    }
    out
}

/// Bytes as a short human figure: `512 B`, `1.5 KiB`, `2.0 MiB`.
pub fn fmt_bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let f = n as f64;
    if f < KIB {
        format!("{n} B")
    } else if f < KIB * KIB {
        format!("{:.1} KiB", f / KIB)
    } else {
        format!("{:.1} MiB", f / KIB / KIB)
    }
}

/// Milliseconds as a short human figure: `850ms`, `1.25s`.
pub fn fmt_ms(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{:.2}s", ms / 1000.0)
    }
}
