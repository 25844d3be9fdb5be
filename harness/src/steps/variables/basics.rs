//! Steps of plain variables: write, read, delete, list, check-and-set, namespaces and paths.

use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use serde_json::Value;

use super::setup::namespace_call;
use super::{Extras, StepResult, VariablesWorld, WRITE_ROOT, items, items_of, items_text, number};
use crate::plugins::variables::{Call, encode_query};

impl VariablesWorld {
    /// A write the scenario needs before the clause (by the harness, with the management
    /// token): anything but 200 blocks the clause on the write clause.
    async fn setup_write(&mut self, namespace: &str, name: &str, text: &str) -> StepResult {
        let path = self.path(name);
        let want = items(text);
        let i = self
            .write(
                namespace,
                &path,
                Some(&want),
                Extras::default(),
                self.admin(),
            )
            .await;
        let e = self.exchange(i);
        if e.status == Some(200) {
            return Ok(());
        }
        Err(self.blocked(
            WRITE_ROOT,
            &format!("the harness's write of {path} ({text}) answers 200"),
            &e.outcome(),
        ))
    }

    /// The index a `cas` phrase names for the subject variable.
    fn cas_index(&self, namespace: &str, path: &str, which: &str) -> Result<u64, String> {
        let writes = self.writes_of(namespace, path);
        let w = match which {
            "0" => return Ok(0),
            "at the first write's index" => writes.first(),
            _ => writes.last(),
        };
        w.map(|w| w.modify_index).ok_or_else(|| {
            self.blocked(
                WRITE_ROOT,
                &format!("the writes of {path} answered their ModifyIndex"),
                "no ModifyIndex known from the writes' answers",
            )
        })
    }
}

#[given(expr = "{string} holds {string}")]
async fn holds(w: &mut VariablesWorld, name: String, text: String) -> StepResult {
    w.setup_write("default", &name, &text).await
}

#[given(expr = "{string} has been rewritten with {string}")]
async fn rewritten(w: &mut VariablesWorld, name: String, text: String) -> StepResult {
    w.setup_write("default", &name, &text).await
}

#[given(expr = "{string} holds {string} in that namespace")]
async fn holds_in_namespace(w: &mut VariablesWorld, name: String, text: String) -> StepResult {
    let ns = w.that_namespace()?;
    w.setup_write(&ns, &name, &text).await
}

#[given("a namespace of the scenario's own")]
async fn own_namespace(w: &mut VariablesWorld) -> StepResult {
    let name = w.made_name("ns");
    let endpoint = w.endpoint();
    w.registry().namespace(&endpoint, &name);
    let i = w.send(namespace_call(&name, w.admin())).await;
    let e = w.exchange(i);
    if e.status != Some(200) {
        let message = format!(
            "failed to create the namespace {name}: {} (the clause needs a namespace of its own; the token must be allowed to create namespaces)",
            e.summary()
        );
        return Err(w.ctx().harness_error(message));
    }
    w.namespace = Some(name);
    Ok(())
}

#[when(expr = "the harness writes {string} with {string}")]
async fn harness_writes(w: &mut VariablesWorld, name: String, text: String) {
    let path = w.path(&name);
    w.write(
        "default",
        &path,
        Some(&items(&text)),
        Extras::default(),
        w.admin(),
    )
    .await;
}

#[when(
    regex = r#"^the harness writes "([^"]*)" with "([^"]*)" and cas (0|at the first write's index|at the current index)$"#
)]
async fn harness_writes_cas(
    w: &mut VariablesWorld,
    name: String,
    text: String,
    which: String,
) -> StepResult {
    let path = w.path(&name);
    let cas = w.cas_index("default", &path, &which)?;
    let with = Extras {
        lock_id: None,
        cas: Some(cas),
    };
    w.write("default", &path, Some(&items(&text)), with, w.admin())
        .await;
    Ok(())
}

#[when(expr = "the harness writes {string} with no items")]
async fn harness_writes_nothing(w: &mut VariablesWorld, name: String) {
    let path = w.path(&name);
    w.write("default", &path, None, Extras::default(), w.admin())
        .await;
}

#[when(expr = "the harness reads {string}")]
async fn harness_reads(w: &mut VariablesWorld, name: String) {
    let path = w.path(&name);
    w.read("default", &path, w.admin()).await;
}

#[when(expr = "the harness reads {string} in that namespace")]
async fn harness_reads_in_namespace(w: &mut VariablesWorld, name: String) -> StepResult {
    let ns = w.that_namespace()?;
    let path = w.path(&name);
    w.read(&ns, &path, w.admin()).await;
    Ok(())
}

#[when(expr = "the harness deletes {string}")]
async fn harness_deletes(w: &mut VariablesWorld, name: String) {
    let path = w.path(&name);
    w.delete("default", &path, None, w.admin()).await;
}

#[when(
    regex = r#"^the harness deletes "([^"]*)" with cas (at the first write's index|at the current index)$"#
)]
async fn harness_deletes_cas(w: &mut VariablesWorld, name: String, which: String) -> StepResult {
    let path = w.path(&name);
    let cas = w.cas_index("default", &path, &which)?;
    w.delete("default", &path, Some(cas), w.admin()).await;
    Ok(())
}

#[when(expr = "the harness deletes {string} in that namespace")]
async fn harness_deletes_in_namespace(w: &mut VariablesWorld, name: String) -> StepResult {
    let ns = w.that_namespace()?;
    let path = w.path(&name);
    w.delete(&ns, &path, None, w.admin()).await;
    Ok(())
}

impl VariablesWorld {
    /// `GET /v1/vars?prefix=<path>` with `credential`.
    pub async fn list(
        &mut self,
        prefix: &str,
        credential: crate::plugins::variables::Credential,
    ) -> usize {
        let i = self
            .send(Call {
                operation: "list",
                method: "GET",
                target: format!("/v1/vars?prefix={}", encode_query(prefix)),
                body: None,
                credential,
            })
            .await;
        self.last = Some(i);
        i
    }
}

#[when(expr = "the harness lists the prefix {string}")]
async fn harness_lists(w: &mut VariablesWorld, name: String) {
    let prefix = w.path(&name);
    w.list(&prefix, w.admin()).await;
}

#[when(expr = "the harness writes {string} at each of these paths:")]
async fn writes_each(w: &mut VariablesWorld, text: String, step: &Step) -> StepResult {
    let Some(table) = &step.table else {
        return Err(w.ctx().harness_error("the step needs a table of paths"));
    };
    let names: Vec<String> = table
        .rows
        .iter()
        .filter_map(|r| r.first().cloned())
        .collect();
    w.batch.clear();
    for name in names {
        let path = w.path(&name);
        let i = w
            .write(
                "default",
                &path,
                Some(&items(&text)),
                Extras::default(),
                w.admin(),
            )
            .await;
        w.batch.push(i);
    }
    Ok(())
}

/// A path of exactly `len` bytes below the scenario's prefix, made of `alphabet` with a `/`
/// now and then (never two in a row, never at the end).
fn long_path(prefix: &str, len: usize, alphabet: &[u8]) -> String {
    let mut path = format!("{prefix}/");
    let mut n = 0;
    while path.len() < len {
        let remaining = len - path.len();
        if n % 9 == 8 && remaining > 1 {
            path.push('/');
        } else {
            path.push(alphabet[n % alphabet.len()] as char);
        }
        n += 1;
    }
    path
}

#[when(expr = "the harness writes {string} at a path of 129 bytes")]
async fn writes_too_long(w: &mut VariablesWorld, text: String) {
    let path = long_path(&w.prefix(), 129, b"abcdefgh");
    w.write(
        "default",
        &path,
        Some(&items(&text)),
        Extras::default(),
        w.admin(),
    )
    .await;
}

#[when(expr = "the harness writes {string} at a path of 128 bytes made of every allowed character")]
async fn writes_longest(w: &mut VariablesWorld, text: String) {
    let path = long_path(&w.prefix(), 128, b"aZ09-_~yQ5");
    w.write(
        "default",
        &path,
        Some(&items(&text)),
        Extras::default(),
        w.admin(),
    )
    .await;
}

#[then(expr = "the answer is {int}")]
async fn answer_is(w: &mut VariablesWorld, status: u16) -> StepResult {
    w.expect_status(status)
}

#[then(expr = "the answer is {int} with {string}")]
async fn answer_with_text(w: &mut VariablesWorld, status: u16, text: String) -> StepResult {
    w.expect_text(status, &text, true, None)
}

#[then(expr = "the answer is {int} with {string} and X-Nomad-Index {int}")]
async fn answer_with_text_and_index(
    w: &mut VariablesWorld,
    status: u16,
    text: String,
    index: u64,
) -> StepResult {
    w.expect_text(status, &text, true, Some(index))
}

#[then(expr = "the answer is {int} and says {string}")]
async fn answer_says(w: &mut VariablesWorld, status: u16, text: String) -> StepResult {
    w.expect_text(status, &text, false, None)
}

#[then("every answer is 400")]
async fn every_answer_400(w: &mut VariablesWorld) -> StepResult {
    let wrong: Vec<String> = w
        .batch
        .iter()
        .map(|i| w.exchange(*i))
        .filter(|e| e.status != Some(400))
        .map(|e| e.summary())
        .collect();
    if wrong.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "every write at a path outside ^[a-zA-Z0-9-_~/]{1,128}$ answers 400",
        &wrong.join("\n"),
    ))
}

#[then(expr = "the answer is {int} with the variable {string} holding {string}")]
async fn answer_with_variable(
    w: &mut VariablesWorld,
    status: u16,
    name: String,
    text: String,
) -> StepResult {
    let e = w.last()?;
    let path = w.path(&name);
    let namespace = w
        .subject
        .as_ref()
        .map(|(ns, _)| ns.clone())
        .unwrap_or_else(|| "default".into());
    let want = items(&text);
    let expected = format!(
        "{} answers {status} with the variable {path} in namespace {namespace}: items {}, a CreateIndex and a ModifyIndex",
        e.request_line(),
        items_text(&want)
    );
    let mut problems = Vec::new();
    if e.status != Some(status) {
        problems.push(format!(
            "status {}",
            e.status.map_or("none".into(), |s| s.to_string())
        ));
    }
    match e.json() {
        None => problems.push("the body is not a JSON object".into()),
        Some(v) => {
            let field = |f: &str| {
                v.get(f)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            if field("Path") != path {
                problems.push(format!("Path {:?}", field("Path")));
            }
            if field("Namespace") != namespace {
                problems.push(format!("Namespace {:?}", field("Namespace")));
            }
            match items_of(&v) {
                Some(got) if got == want => {}
                Some(got) => problems.push(format!("items {}", items_text(&got))),
                None => problems.push("no Items".into()),
            }
            for f in ["CreateIndex", "ModifyIndex"] {
                if number(&v, f).is_none_or(|n| n == 0) {
                    problems.push(format!("no {f}"));
                }
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        &expected,
        &format!("{}\nanswer: {}", problems.join(", "), e.outcome()),
    ))
}

#[then("the answer carries the X-Nomad-Index of the write")]
async fn answer_index_header(w: &mut VariablesWorld) -> StepResult {
    let e = w.last()?;
    let modify = e.json().and_then(|v| number(&v, "ModifyIndex"));
    if e.index.is_some() && e.index == modify {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "{} answers an X-Nomad-Index header equal to the written ModifyIndex",
            e.request_line()
        ),
        &format!(
            "X-Nomad-Index {}, ModifyIndex {}",
            e.index.map_or("absent".into(), |i| i.to_string()),
            modify.map_or("absent".into(), |i| i.to_string())
        ),
    ))
}

#[then("the answer's ModifyIndex is the latest write's")]
async fn answer_latest_index(w: &mut VariablesWorld) -> StepResult {
    let e = w.last()?;
    let Some((ns, path)) = w.subject.clone() else {
        return Err(w.ctx().harness_error("no variable to compare"));
    };
    let Some(latest) = w.writes_of(&ns, &path).last().copied() else {
        return Err(w.blocked(
            WRITE_ROOT,
            &format!("the writes of {path} answered their ModifyIndex"),
            "no ModifyIndex known from the writes' answers",
        ));
    };
    let got = e.json().and_then(|v| number(&v, "ModifyIndex"));
    if got == Some(latest.modify_index) {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "{} answers the variable at ModifyIndex {}, the index its latest write answered",
            e.request_line(),
            latest.modify_index
        ),
        &format!(
            "ModifyIndex {}\nanswer: {}",
            got.map_or("absent".into(), |i| i.to_string()),
            e.outcome()
        ),
    ))
}

#[then("the answer keeps the first write's CreateIndex with a higher ModifyIndex")]
async fn answer_keeps_create_index(w: &mut VariablesWorld) -> StepResult {
    let e = w.last()?;
    let Some((ns, path)) = w.subject.clone() else {
        return Err(w.ctx().harness_error("no variable to compare"));
    };
    let Some(first) = w.writes_of(&ns, &path).first().copied() else {
        return Err(w.blocked(
            WRITE_ROOT,
            &format!("the first write of {path} answered its indexes"),
            "no indexes known from the write's answer",
        ));
    };
    let v = e.json();
    let create = v.as_ref().and_then(|v| number(v, "CreateIndex"));
    let modify = v.as_ref().and_then(|v| number(v, "ModifyIndex"));
    if create == Some(first.create_index) && modify.is_some_and(|m| m > first.modify_index) {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "{} answers CreateIndex {} (the first write's) and a ModifyIndex above {}",
            e.request_line(),
            first.create_index,
            first.modify_index
        ),
        &format!(
            "CreateIndex {}, ModifyIndex {}",
            create.map_or("absent".into(), |i| i.to_string()),
            modify.map_or("absent".into(), |i| i.to_string())
        ),
    ))
}

#[then(expr = "reading {string} gives {string}")]
async fn reading_gives(w: &mut VariablesWorld, name: String, text: String) -> StepResult {
    let path = w.path(&name);
    let i = w.read("default", &path, w.admin()).await;
    let e = w.exchange(i);
    let want = items(&text);
    let got = e.json().and_then(|v| items_of(&v));
    if e.status == Some(200) && got.as_ref() == Some(&want) {
        return Ok(());
    }
    Err(w.fail(
        &format!("{path} holds {}", items_text(&want)),
        &format!("a read answered {}", e.outcome()),
    ))
}

#[then(expr = "reading {string} gives no items")]
async fn reading_gives_no_items(w: &mut VariablesWorld, name: String) -> StepResult {
    let path = w.path(&name);
    let i = w.read("default", &path, w.admin()).await;
    let e = w.exchange(i);
    let items = e.json().and_then(|v| items_of(&v)).unwrap_or_default();
    if e.status == Some(200) && items.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        &format!("{path} holds no items: a read answers 200 without Items"),
        &format!("a read answered {}", e.outcome()),
    ))
}

#[then(expr = "reading {string} answers 404")]
async fn reading_404(w: &mut VariablesWorld, name: String) -> StepResult {
    let path = w.path(&name);
    let i = w.read("default", &path, w.admin()).await;
    let e = w.exchange(i);
    if e.status == Some(404) {
        return Ok(());
    }
    Err(w.fail(
        &format!("there is no variable at {path}: a read answers 404"),
        &format!("a read answered {}", e.outcome()),
    ))
}

#[then(expr = "the answer is 200 and lists exactly {string}, without items")]
async fn lists_exactly(w: &mut VariablesWorld, names: String) -> StepResult {
    let e = w.last()?;
    let want: std::collections::BTreeSet<String> =
        names.split_whitespace().map(|n| w.path(n)).collect();
    let expected = format!(
        "{} answers 200 with the metadata of exactly {}, and no Items",
        e.request_line(),
        want.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    let Some(Value::Array(list)) = e.json().filter(|_| e.status == Some(200)) else {
        return Err(w.fail(&expected, &e.outcome()));
    };
    let got: std::collections::BTreeSet<String> = list
        .iter()
        .filter_map(|v| v.get("Path").and_then(Value::as_str).map(str::to_string))
        .collect();
    let with_items: Vec<&str> = list
        .iter()
        .filter(|v| v.get("Items").is_some_and(|i| !i.is_null()))
        .filter_map(|v| v.get("Path").and_then(Value::as_str))
        .collect();
    if got == want && with_items.is_empty() {
        return Ok(());
    }
    let mut seen = format!(
        "listed {}",
        if got.is_empty() {
            "nothing".to_string()
        } else {
            got.iter().cloned().collect::<Vec<_>>().join(", ")
        }
    );
    if !with_items.is_empty() {
        seen.push_str(&format!("; with Items: {}", with_items.join(", ")));
    }
    Err(w.fail(&expected, &seen))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::variables::encode_path;

    #[test]
    fn long_paths_have_the_length_and_characters_asked_for() {
        let p = long_path("conform/nc12345678ab", 128, b"aZ09-_~yQ5");
        assert_eq!(p.len(), 128);
        assert!(!p.contains("//") && !p.ends_with('/'));
        for c in "aZ09-_~".chars() {
            assert!(p.contains(c), "{c} missing from {p}");
        }
        assert_eq!(long_path("conform/x", 129, b"ab").len(), 129);
        assert_eq!(encode_path(&p), p, "no character of it needs encoding");
    }
}
