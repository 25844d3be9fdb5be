//! Redaction: secret values never reach a report. The harness collects the values it knows to
//! be secret (parameters with secret-looking names, CSI secrets, tokens); every string of the
//! record has them replaced, in every form they take ([`crate::secret_forms`]), before any
//! writer sees it.

use std::borrow::Cow;

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value;

use crate::model::{
    Attachment, Case, Environment, Excerpt, ExitStatus, HarnessInfo, KnownFailure, OpEvent,
    ProfileInfo, Request, Response, RunRecord, StepRecord, Subject,
};

pub const MARK: &str = "[redacted]";

/// Values shorter than this are not redacted: replacing "1" everywhere would destroy the report.
pub const MIN_SECRET_LEN: usize = 4;

/// Whether a parameter or field name suggests its value is a secret.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "password",
        "passwd",
        "passphrase",
        "secret",
        "token",
        "credential",
        "apikey",
        "api_key",
        "api-key",
        "private_key",
        "private-key",
        "privatekey",
        "access_key",
        "access-key",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// Finds every form of a set of secrets ([`crate::secret_forms::forms`]) in one pass over a text
/// and replaces each by [`MARK`], the longest where forms overlap.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    forms: Option<AhoCorasick>,
}

impl Redactor {
    pub fn new<S: AsRef<str>>(secrets: &[S]) -> Redactor {
        let mut forms = std::collections::BTreeSet::new();
        for s in secrets {
            let s = s.as_ref();
            if s.len() >= MIN_SECRET_LEN {
                forms.extend(crate::secret_forms::forms(s));
            }
        }
        let forms = (!forms.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&forms)
                    .ok()
            })
            .flatten();
        Redactor { forms }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.forms.is_none()
    }

    /// Whether `text` holds a secret in any of its forms.
    pub fn finds(&self, text: &str) -> bool {
        self.forms.as_ref().is_some_and(|f| f.is_match(text))
    }

    /// `text` with every form of every secret replaced by [`MARK`] (borrowed when it has none).
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.forms {
            Some(f) if f.is_match(text) => {
                Cow::Owned(f.replace_all(text, &vec![MARK; f.patterns_len()]))
            }
            _ => Cow::Borrowed(text),
        }
    }
}

/// The record with every occurrence of every secret replaced by [`MARK`]: a copy of `record`
/// redacted with [`redact_in_place`].
pub fn redact(record: &RunRecord, secrets: &[String]) -> RunRecord {
    let mut copy = record.clone();
    redact_in_place(&mut copy, secrets);
    copy
}

/// Replace every occurrence of every secret, in every form, in every string of `record` by
/// [`MARK`], in place: a string is rewritten only when it holds a secret, so a record of large
/// outputs is not copied to be redacted. Every string a reader sees is covered (map keys, enum
/// names and timestamps are not free text and are left as they are).
pub fn redact_in_place(record: &mut RunRecord, secrets: &[String]) {
    let redactor = Redactor::new(secrets);
    if !redactor.is_empty() {
        Scrubber(&redactor).record(record);
    }
}

/// Every string field of the record, visited once. The destructuring patterns name every
/// field, so that a field added to the model must be placed here (or explicitly left out).
struct Scrubber<'a>(&'a Redactor);

impl Scrubber<'_> {
    fn text(&self, s: &mut String) {
        if let Cow::Owned(clean) = self.0.redact(s) {
            *s = clean;
        }
    }

    fn opt(&self, s: &mut Option<String>) {
        if let Some(s) = s {
            self.text(s);
        }
    }

    fn all(&self, v: &mut [String]) {
        v.iter_mut().for_each(|s| self.text(s));
    }

    fn record(&self, r: &mut RunRecord) {
        let RunRecord {
            schema_version: _,
            run_id,
            kind,
            harness,
            subject,
            profile,
            seed: _,
            command_line,
            started_at: _,
            finished_at: _,
            interrupted: _,
            strict: _,
            environment,
            shard: _,
            merged_from,
            cases,
        } = r;
        self.text(run_id);
        self.text(kind);
        let HarnessInfo { name, version } = harness;
        self.text(name);
        self.text(version);
        let Subject {
            plugin,
            version,
            details,
        } = subject;
        self.text(plugin);
        self.opt(version);
        details.values_mut().for_each(|v| self.text(v));
        let ProfileInfo {
            name,
            nomad_versions,
        } = profile;
        self.text(name);
        self.text(nomad_versions);
        self.all(command_line);
        let Environment {
            os,
            kernel,
            arch,
            hostname,
            harness_commit,
        } = environment;
        self.text(os);
        self.text(kernel);
        self.text(arch);
        self.text(hostname);
        self.opt(harness_commit);
        self.all(merged_from);
        cases.iter_mut().for_each(|c| self.case(c));
    }

    fn case(&self, c: &mut Case) {
        let Case {
            clause,
            level: _,
            title,
            text,
            basis,
            kind,
            operation,
            spec_file,
            line: _,
            verdict: _,
            reason,
            blocked_by,
            rerun,
            duration_ms: _,
            steps,
            events,
            notes,
            attachments,
            known,
        } = c;
        self.text(clause);
        self.text(title);
        self.text(text);
        self.opt(basis);
        self.text(kind);
        self.text(operation);
        self.text(spec_file);
        self.opt(reason);
        self.opt(blocked_by);
        self.opt(rerun);
        for StepRecord {
            keyword,
            text,
            outcome: _,
            duration_ms: _,
        } in steps
        {
            self.text(keyword);
            self.text(text);
        }
        events.iter_mut().for_each(|e| self.event(e));
        self.all(notes);
        if let Some(KnownFailure {
            reason,
            link,
            plugin_version,
            expires,
            via,
            status: _,
        }) = known
        {
            self.text(reason);
            self.opt(link);
            self.opt(plugin_version);
            self.opt(expires);
            self.opt(via);
        }
        for Attachment {
            title,
            media_type,
            content,
            total_bytes: _,
            truncated: _,
        } in attachments
        {
            self.text(title);
            self.text(media_type);
            self.text(content);
        }
    }

    fn event(&self, e: &mut OpEvent) {
        let OpEvent {
            operation,
            started_ms: _,
            duration_ms: _,
            deadline_ms: _,
            request,
            response,
            reproduce,
            notes,
        } = e;
        self.text(operation);
        match request {
            Request::Exec { argv, env, cwd } => {
                self.all(argv);
                for (k, v) in env {
                    self.text(k);
                    self.text(v);
                }
                self.opt(cwd);
            }
            Request::Grpc { method, request } => {
                self.text(method);
                self.json(request);
            }
            Request::Http { method, path, body } => {
                self.text(method);
                self.text(path);
                if let Some(b) = body {
                    self.json(b);
                }
            }
        }
        match response {
            Response::Exec {
                status,
                stdout,
                stderr,
            } => {
                match status {
                    ExitStatus::SpawnFailed { message } => self.text(message),
                    ExitStatus::StoppedByHarness { reason } => self.text(reason),
                    ExitStatus::Exited { .. }
                    | ExitStatus::Signaled { .. }
                    | ExitStatus::KilledAtDeadline => {}
                }
                for Excerpt {
                    text,
                    total_bytes: _,
                    truncated: _,
                } in [stdout, stderr]
                {
                    self.text(text);
                }
            }
            Response::Grpc {
                code,
                message,
                response,
            } => {
                self.text(code);
                self.text(message);
                if let Some(r) = response {
                    self.json(r);
                }
            }
            Response::Http { status: _, body } => {
                if let Some(b) = body {
                    self.json(b);
                }
            }
        }
        self.opt(reproduce);
        self.all(notes);
    }

    /// Every string value in a JSON document (object keys are left alone).
    fn json(&self, v: &mut Value) {
        match v {
            Value::String(s) => self.text(s),
            Value::Array(a) => a.iter_mut().for_each(|x| self.json(x)),
            Value::Object(o) => o.values_mut().for_each(|x| self.json(x)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        assert!(is_secret_name("password"));
        assert!(is_secret_name("DB_PASSWORD"));
        assert!(is_secret_name("apiToken"));
        assert!(is_secret_name("ssh_passphrase"));
        assert!(is_secret_name("Credentials"));
        assert!(is_secret_name("tls_private_key"));
        assert!(!is_secret_name("mode"));
        assert!(!is_secret_name("uid"));
    }

    #[test]
    fn scrubs_everywhere_longest_first() {
        let mut v = serde_json::json!({
            "a": "x hunter2hunter2 y",
            "b": ["hunter2", {"c": "k=hunter2"}],
            "hunter2": 5
        });
        Scrubber(&Redactor::new(&["hunter2hunter2", "hunter2"])).json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({
                "a": "x [redacted] y",
                "b": ["[redacted]", {"c": "k=[redacted]"}],
                "hunter2": 5
            })
        );
    }

    #[test]
    fn a_secret_is_redacted_in_its_escaped_forms() {
        let secret = "Sup3r\"Secret-x9";
        let mut record = crate::json::parse(include_str!("../tests/data/golden-run.json")).unwrap();
        record.command_line = vec![
            "--parameters".into(),
            r#"{"password":"Sup3r\"Secret-x9"}"#.into(),
        ];
        let case = &mut record.cases[0];
        case.rerun =
            Some(r#"nomad-conform --parameters "{\"password\":\"Sup3r\\\"Secret-x9\"}""#.into());
        case.notes = vec![
            "url: ?p=Sup3r%22Secret-x9".into(),
            "page: Sup3r&quot;Secret-x9".into(),
            "raw: Sup3r\"Secret-x9".into(),
        ];
        redact_in_place(&mut record, &[secret.to_string()]);
        let text = serde_json::to_string(&record).unwrap();
        assert!(!text.contains("Secret-x9"), "{text}");
        assert_eq!(record.command_line[1], r#"{"password":"[redacted]"}"#);
        assert_eq!(
            record.cases[0].rerun.as_deref(),
            Some(r#"nomad-conform --parameters "{\"password\":\"[redacted]\"}""#)
        );
    }

    /// What redaction did before it worked in place: the record through a JSON value, every
    /// string value replaced, and back.
    fn through_json(record: &RunRecord, secrets: &[&str]) -> Option<RunRecord> {
        fn scrub(v: &mut Value, secrets: &[&str]) {
            match v {
                Value::String(s) => {
                    for secret in secrets {
                        *s = s.replace(secret, MARK);
                    }
                }
                Value::Array(a) => a.iter_mut().for_each(|x| scrub(x, secrets)),
                Value::Object(o) => o.values_mut().for_each(|x| scrub(x, secrets)),
                _ => {}
            }
        }
        let mut value = serde_json::to_value(record).ok()?;
        scrub(&mut value, secrets);
        serde_json::from_value(value).ok()
    }

    #[test]
    fn in_place_redaction_covers_what_the_json_round_trip_did() {
        let mut record = crate::json::parse(include_str!("../tests/data/golden-run.json")).unwrap();
        // Beside the golden record's calls (plugin executions): gRPC and HTTP exchanges, a
        // failed spawn and subject details.
        record
            .subject
            .details
            .insert("capabilities".into(), "CONTROLLER_SERVICE, ONLINE".into());
        let mut event = record.cases[0].events[0].clone();
        event.request = Request::Grpc {
            method: "/csi.v1.Controller/CreateVolume".into(),
            request: serde_json::json!({"name": "volume-name-1", "secrets": {"tokenvalue": "s3cr3t-value"}, "sizes": [1, "two-hundred"]}),
        };
        event.response = Response::Grpc {
            code: "INVALID_ARGUMENT".into(),
            message: "missing parameter basepath".into(),
            response: Some(serde_json::json!({"volume": {"volume_id": "vol-abcdef"}})),
        };
        record.cases[0].events.push(event.clone());
        event.request = Request::Http {
            method: "PUT".into(),
            path: "/v1/var/nomad/jobs/lockpath?lock-acquire".into(),
            body: Some(serde_json::json!({"Items": {"holder": "client-number-one"}})),
        };
        event.response = Response::Http {
            status: 409,
            body: Some(serde_json::json!({"Lock": {"ID": "lock-identifier"}})),
        };
        record.cases[0].events.push(event.clone());
        event.request = record.cases[0].events[0].request.clone();
        event.response = Response::Exec {
            status: ExitStatus::SpawnFailed {
                message: "permission denied (os error 13)".into(),
            },
            stdout: Excerpt::default(),
            stderr: Excerpt::default(),
        };
        record.cases[0].events.push(event);
        // Secrets cut from every string value of the record: fields of every kind, requests,
        // responses, outputs, attachments.
        let mut strings = Vec::new();
        fn collect(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::String(s) => out.push(s.clone()),
                Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
                Value::Object(o) => o.values().for_each(|x| collect(x, out)),
                _ => {}
            }
        }
        collect(&serde_json::to_value(&record).unwrap(), &mut strings);
        let mut candidates: Vec<String> = strings
            .iter()
            .filter_map(|s| {
                let chars: Vec<char> = s.chars().collect();
                (chars.len() >= 8)
                    .then(|| chars[chars.len() / 3..chars.len() / 3 + 6].iter().collect())
            })
            .collect();
        candidates.sort();
        candidates.dedup();
        assert!(candidates.len() > 50, "{}", candidates.len());
        let mut compared = 0;
        for secret in &candidates {
            let secrets = [secret.clone()];
            let Some(expected) = through_json(&record, &[secret.as_str()]) else {
                // The round trip broke on this one (it hit an enum name or a timestamp) and
                // left the record unredacted: nothing to compare with.
                continue;
            };
            assert_eq!(redact(&record, &secrets), expected, "secret {secret:?}");
            compared += 1;
        }
        assert!(
            compared * 10 > candidates.len() * 8,
            "{compared} of {}",
            candidates.len()
        );
    }
}
