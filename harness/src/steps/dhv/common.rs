//! Steps shared by several DHV features: volume requests and preconditions, and Then steps
//! about the latest call.

use std::path::Path;

use cucumber::{given, then};
use nomad_conform_reports::model::ExitStatus;

use super::{DhvWorld, StepResult, list_paths};
use crate::fmt_duration;
use crate::recorder::Hint;

#[given("a volume request")]
async fn a_volume_request(w: &mut DhvWorld) {
    w.add_volume();
}

#[given("a second volume request")]
async fn a_second_volume_request(w: &mut DhvWorld) {
    w.add_volume();
}

#[given(expr = "{int} volume requests")]
async fn n_volume_requests(w: &mut DhvWorld, n: usize) {
    for _ in 0..n {
        w.add_volume();
    }
}

#[given("the plugin has created the volume")]
async fn created_the_volume(w: &mut DhvWorld) -> StepResult {
    w.must_create(0).await
}

#[given("the plugin has created a volume")]
async fn created_a_volume(w: &mut DhvWorld) -> StepResult {
    let i = w.add_volume();
    w.must_create(i).await
}

#[given("the plugin has created a second volume")]
async fn created_a_second_volume(w: &mut DhvWorld) -> StepResult {
    let i = w.add_volume();
    w.must_create(i).await
}

/// "created 3 volumes": requests already made count toward the 3; "created 8 more volumes":
/// 8 new ones.
#[given(regex = r"^the plugin has created (\d+) (more )?volumes$")]
async fn created_n_volumes(w: &mut DhvWorld, n: usize, more: String) -> StepResult {
    let mut todo: Vec<usize> = if more.is_empty() {
        (0..w.volumes.len())
            .filter(|i| w.volumes[*i].created.is_none())
            .take(n)
            .collect()
    } else {
        Vec::new()
    };
    while todo.len() < n {
        todo.push(w.add_volume());
    }
    for i in todo {
        w.must_create(i).await?;
    }
    Ok(())
}

#[given("a file is written into the volume")]
async fn file_into_the_volume(w: &mut DhvWorld) -> StepResult {
    w.write_marker(0)
}

#[given("a file is written into the second volume")]
async fn file_into_the_second_volume(w: &mut DhvWorld) -> StepResult {
    w.write_marker(1)
}

#[given("a file is written into each volume")]
async fn file_into_each_volume(w: &mut DhvWorld) -> StepResult {
    for i in 0..w.volumes.len() {
        w.write_marker(i)?;
    }
    Ok(())
}

#[then("the plugin exits with status 0")]
async fn exits_zero(w: &mut DhvWorld) -> StepResult {
    w.last_call()?;
    for call in &w.last {
        if call.succeeded() {
            continue;
        }
        let expected = format!("{} exits with status 0", call.label);
        // Killed at the deadline: the deadline clause judges that, not the exit status.
        if call.killed_at_deadline() {
            return Err(w.precondition(
                super::deadline_clause(call),
                &format!("{} ends before its deadline", call.label),
                &call.summary(),
                &[call],
            ));
        }
        if let Some(problem) = &w.root_problem {
            return Err(w.blocked_on(problem, &call.summary()));
        }
        return Err(w.fail(&expected, &call.summary(), &[call]));
    }
    Ok(())
}

#[then("the plugin exits with a non-zero status")]
async fn exits_non_zero(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    if let Some(problem) = &w.root_problem {
        return Err(w.blocked_on(problem, &call.summary()));
    }
    let problem = match &call.out.status {
        ExitStatus::Exited { code } if *code != 0 => return Ok(()),
        ExitStatus::Exited { .. } => "it exited with status 0",
        ExitStatus::Signaled { .. } => "it was killed by a signal: a crash, not a refusal",
        ExitStatus::KilledAtDeadline => "it was still running at its deadline",
        ExitStatus::SpawnFailed { .. } => "it could not be started",
        ExitStatus::StoppedByHarness { .. } => {
            "the harness stopped it (it was filling a disk): the failure is not the plugin's own"
        }
    };
    Err(w.fail(
        &format!("{} exits with a non-zero status", call.label),
        &format!("{problem}\n{}", call.summary()),
        &[call],
    ))
}

#[then("stdout is exactly one JSON object")]
async fn stdout_one_object(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    // Nomad never reads the answer of a call that failed as an answer: the exit status (or
    // the deadline) is what is wrong, and its clause judges it.
    if !call.succeeded() {
        return Err(w.precondition(
            super::exit_clause(call),
            &format!("{} exits with status 0", call.label),
            &call.summary(),
            &[call],
        ));
    }
    match call.stdout_json() {
        // Go decodes `null` into a struct as a no-op: every field is left unset, which the
        // clauses about the fields judge.
        Ok(serde_json::Value::Object(_) | serde_json::Value::Null) => Ok(()),
        Ok(other) => Err(w.fail(
            "stdout holds exactly one JSON object",
            &format!(
                "stdout holds {}: {other}",
                crate::plugins::dhv::env::json_kind(&other)
            ),
            &[call],
        )),
        Err(problem) => Err(w.fail(
            "stdout holds exactly one JSON object (whitespace around it is fine, nothing else)",
            &format!("{problem}\n{}", call.summary()),
            &[call],
        )),
    }
}

#[then(regex = r#"^the call completes within the "([^"]+)" deadline$"#)]
async fn within_deadline(w: &mut DhvWorld, name: String) -> StepResult {
    let Some(deadline) = w.deadlines().deadline(&name) else {
        return Err(w
            .ctx()
            .harness_error(format!("the profile has no deadline called {name:?}")));
    };
    let call = w.last_call()?;
    if call.out.wall <= deadline && !call.killed_at_deadline() {
        return Ok(());
    }
    // A fingerprint still running at the documented deadline is killed there: that clause
    // judges it, and the shorter discovery deadline is broken by the same slowness.
    let root = super::deadline_clause(call);
    if call.killed_at_deadline() && root != w.ctx().clause.id {
        return Err(w.precondition(
            root,
            &format!("{} ends before its deadline", call.label),
            &call.summary(),
            &[call],
        ));
    }
    w.ctx().hint(Hint::TimedOut);
    let profile = &w.ctx().run.profile.name;
    Err(w.fail(
        &format!(
            "{} completes within {} (the {name} deadline of profile {profile})",
            call.label,
            fmt_duration(deadline)
        ),
        &format!(
            "it took {}\n{}",
            fmt_duration(call.out.wall),
            call.summary()
        ),
        &[call],
    ))
}

#[then("nothing new is left in the volumes directory")]
async fn nothing_new_in_volumes_dir(w: &mut DhvWorld) -> StepResult {
    let new = w.new_in_volumes_dir()?;
    if new.is_empty() {
        return Ok(());
    }
    let call = w.last_call()?;
    Err(w.fail(
        "a create that fails leaves DHV_VOLUMES_DIR as it found it (Nomad will not call delete)",
        &format!(
            "new after the call: {}\n{}",
            list_paths(&new),
            call.summary()
        ),
        &[call],
    ))
}

#[then("the reported path exists")]
async fn reported_path_exists(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let Some(created) = &w.volume(0)?.created else {
        let seen = super::created_problem(call).unwrap_or_else(|| call.summary());
        return Err(w.precondition(
            super::create_root_clause(call),
            "create reports a path Nomad would register",
            &format!("no usable path was reported: {seen}"),
            &[call],
        ));
    };
    if Path::new(&created.path).exists() {
        return Ok(());
    }
    Err(w.fail(
        "the path create reported exists once create returns",
        &format!("{} does not exist", created.path),
        &[call],
    ))
}

#[then("the reported path no longer exists")]
async fn reported_path_gone(w: &mut DhvWorld) -> StepResult {
    let path = w.created_path(0)?;
    let call = w.last_call()?;
    if Path::new(&path).symlink_metadata().is_err() {
        return Ok(());
    }
    // A failed ordinary delete is judged by the exit (or deadline) clause. What a special
    // delete (the automatic one) left is this clause's own finding, unless an ordinary delete
    // of the same volume fails, or leaves it, too.
    if call.label == "delete" && !call.succeeded() {
        return Err(w.precondition(
            super::exit_clause(call),
            "delete exits with status 0",
            &call.summary(),
            &[call],
        ));
    }
    if call.label != "delete" {
        let ordinary = w
            .delete(0, "delete (ordinary, to tell a general failure)")
            .await?;
        if !ordinary.succeeded() {
            return Err(w.precondition(
                super::exit_clause(&ordinary),
                "an ordinary delete exits with status 0",
                &ordinary.summary(),
                &[&ordinary],
            ));
        }
        if Path::new(&path).symlink_metadata().is_ok() {
            return Err(w.precondition(
                "DHV-DELETE-REMOVES-PATH",
                "an ordinary delete removes the volume's path",
                &format!("{path} still exists after an ordinary delete too"),
                &[&ordinary],
            ));
        }
    }
    Err(w.fail(
        "delete removes the path create reported",
        &format!("{path} still exists after delete\n{}", call.summary()),
        &[call],
    ))
}
