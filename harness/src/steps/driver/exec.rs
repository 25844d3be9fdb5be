//! Steps of the signals and exec feature: SignalTask, ExecTask, and the cases of Nomad's exec
//! streaming conformance suite.

use std::time::Duration;

use cucumber::{then, when};

use super::tasks::TRAP_USR1_CODE;
use super::{DriverWorld, StepResult};
use crate::plugins::driver::drivers;
use crate::plugins::driver::drivers::exec_task_streaming_request::Setup;

/// What an exec (unary or streaming) gave.
#[derive(Clone, Debug, Default)]
pub struct ExecResult {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: Option<i64>,
    /// When each stdout chunk arrived, since the exec began.
    pub stdout_at: Vec<(Duration, String)>,
    /// What the stream did, for messages.
    pub summary: String,
    /// A file the command was asked to make, and its path on the host.
    pub temp_file: Option<String>,
}

fn sh(cmd: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), cmd.into()]
}

#[when(regex = r"^the harness signals the task with (SIG[A-Z0-9]+)$")]
async fn signals(w: &mut DriverWorld, signal: String) -> StepResult {
    let id = w.task(0)?.id.clone();
    let (rpc, _) = w
        .client()?
        .signal_task(&id, &signal, w.config().timings.rpc)
        .await;
    w.record(&rpc);
    w.last = vec![rpc];
    Ok(())
}

#[then("the task exits with its own code for SIGUSR1")]
async fn own_code_usr1(w: &mut DriverWorld) -> StepResult {
    super::lifecycle::own_code(w, TRAP_USR1_CODE, "SIGUSR1").await
}

#[when(regex = r#"^the harness runs "(.*)" in the task$"#)]
async fn runs(w: &mut DriverWorld, cmd: String) -> StepResult {
    let id = w.task(0)?.id.clone();
    let req = drivers::ExecTaskRequest {
        task_id: id,
        command: sh(&cmd),
        timeout: super::lifecycle::duration(w.driver_profile().exec_deadline),
    };
    let (rpc, resp) = w
        .client()?
        .exec_task(
            req,
            w.driver_profile().exec_deadline + Duration::from_secs(2),
        )
        .await;
    w.record(&rpc);
    w.exec = resp.map(|r| ExecResult {
        stdout: String::from_utf8_lossy(&r.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&r.stderr).into_owned(),
        exit_code: r.result.map(|x| x.exit_code as i64),
        ..Default::default()
    });
    w.last = vec![rpc];
    Ok(())
}

#[then(regex = r#"^ExecTask returns stdout "(.*)", stderr "(.*)" and exit code (\d+)$"#)]
async fn exec_returns(w: &mut DriverWorld, out: String, err: String, code: i64) -> StepResult {
    let rpc = w.last_call()?;
    let got = w.exec.clone().unwrap_or_default();
    if rpc.ok()
        && got.stdout.trim() == out
        && got.stderr.trim() == err
        && got.exit_code == Some(code)
    {
        return Ok(());
    }
    Err(w.fail(
        &format!("ExecTask answers stdout {out:?}, stderr {err:?}, exit code {code}"),
        &if rpc.ok() {
            format!(
                "stdout {:?}, stderr {:?}, exit code {:?}",
                got.stdout, got.stderr, got.exit_code
            )
        } else {
            rpc.summary()
        },
        &[rpc],
    ))
}

/// Input to send during a streamed exec.
#[derive(Default)]
struct Input {
    stdin: Option<String>,
    close: bool,
    resizes: Vec<(i32, i32)>,
}

async fn stream(w: &mut DriverWorld, cmd: &str, tty: bool, input: Input) -> StepResult {
    let id = w.task(0)?.id.clone();
    let deadline = w.driver_profile().exec_deadline;
    let setup = Setup {
        task_id: id,
        command: sh(cmd),
        tty,
    };
    let session = w
        .client()?
        .exec_streaming(setup, Duration::ZERO, 4096)
        .await;
    for (hgt, wid) in &input.resizes {
        session.resize(*hgt, *wid);
    }
    if let Some(s) = &input.stdin {
        session.stdin(format!("{s}\n").as_bytes());
    }
    if input.close {
        session.close_stdin();
    }
    let end = session.stream.wait_end(deadline).await;
    if matches!(end, crate::plugins::driver::StreamEnd::Open) {
        session.stream.stop();
    }
    session.end_input();
    w.record_event(session.event(w.offset_now(), Some(w.spec()), 64));
    let out = session.output();
    let stdout_at = session
        .stream
        .messages()
        .into_iter()
        .filter_map(|a| {
            let d = a.message.stdout?.data;
            (!d.is_empty()).then(|| (a.at, String::from_utf8_lossy(&d).into_owned()))
        })
        .collect();
    w.exec = Some(ExecResult {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        exit_code: out.exited.map(|r| r.exit_code as i64),
        stdout_at,
        summary: format!("the stream ended: {end:?}"),
        temp_file: None,
    });
    Ok(())
}

#[when(regex = r#"^the harness streams "(.*)" in the task without a tty$"#)]
async fn streams_notty(w: &mut DriverWorld, cmd: String) -> StepResult {
    stream(w, &cmd, false, Input::default()).await
}

#[when(regex = r#"^the harness streams "(.*)" in the task with a tty$"#)]
async fn streams_tty(w: &mut DriverWorld, cmd: String) -> StepResult {
    stream(w, &cmd, true, Input::default()).await
}

#[when(
    regex = r#"^the harness streams "(.*)" in the task without a tty, sending "(.*)" and closing stdin$"#
)]
async fn streams_stdin_close(w: &mut DriverWorld, cmd: String, input: String) -> StepResult {
    let i = Input {
        stdin: Some(input),
        close: true,
        ..Input::default()
    };
    stream(w, &cmd, false, i).await
}

#[when(regex = r#"^the harness streams "(.*)" in the task with a tty, sending "(.*)"$"#)]
async fn streams_tty_stdin(w: &mut DriverWorld, cmd: String, input: String) -> StepResult {
    let i = Input {
        stdin: Some(input),
        ..Input::default()
    };
    stream(w, &cmd, true, i).await
}

#[when(
    regex = r#"^the harness streams "(.*)" in the task with a tty, resizing to (\d+)x(\d+) then (\d+)x(\d+)$"#
)]
async fn streams_resize(
    w: &mut DriverWorld,
    cmd: String,
    h1: i32,
    w1: i32,
    h2: i32,
    w2: i32,
) -> StepResult {
    let i = Input {
        resizes: vec![(h1, w1), (h2, w2)],
        ..Input::default()
    };
    stream(w, &cmd, true, i).await
}

fn unescape(s: &str) -> String {
    s.replace("\\r", "\r").replace("\\n", "\n")
}

fn stream_fail(w: &DriverWorld, expected: &str) -> String {
    let got = w.exec.clone().unwrap_or_default();
    crate::steps::failure_text(
        expected,
        &format!(
            "stdout {:?}, stderr {:?}, exit code {:?}; {}",
            got.stdout, got.stderr, got.exit_code, got.summary
        ),
        &[w.spec().command_line()],
    )
}

#[then(regex = r#"^the stream gives stdout "(.*)", stderr "(.*)" and exit code (\d+)$"#)]
async fn gives_both(w: &mut DriverWorld, out: String, err: String, code: i64) -> StepResult {
    let got = w.exec.clone().unwrap_or_default();
    let (out, err) = (unescape(&out), unescape(&err));
    if got.stdout == out && got.stderr == err && got.exit_code == Some(code) {
        return Ok(());
    }
    Err(stream_fail(
        w,
        &format!("stdout {out:?}, stderr {err:?}, then an exit message with code {code}"),
    ))
}

#[then(regex = r#"^the stream gives stdout "([^"]*)" and exit code (\d+)$"#)]
async fn gives_stdout(w: &mut DriverWorld, out: String, code: i64) -> StepResult {
    let got = w.exec.clone().unwrap_or_default();
    let out = unescape(&out);
    if got.stdout == out && got.exit_code == Some(code) {
        return Ok(());
    }
    Err(stream_fail(
        w,
        &format!("stdout {out:?}, then an exit message with code {code}"),
    ))
}

#[then("the first line arrived at least a second before the last")]
async fn streamed(w: &mut DriverWorld) -> StepResult {
    let got = w.exec.clone().unwrap_or_default();
    let first = got
        .stdout_at
        .iter()
        .find(|(_, t)| t.contains('1'))
        .map(|(a, _)| *a);
    let last = got
        .stdout_at
        .iter()
        .rev()
        .find(|(_, t)| t.contains('3'))
        .map(|(a, _)| *a);
    match (first, last) {
        (Some(a), Some(b)) if b >= a + Duration::from_millis(1000) => Ok(()),
        _ => Err(stream_fail(
            w,
            "output streamed as it comes: the line printed first arrives at least a second before the one printed two seconds later",
        )),
    }
}

#[then("the stream's stderr says the input is not a terminal and the exit code is 1")]
async fn no_terminal(w: &mut DriverWorld) -> StepResult {
    let got = w.exec.clone().unwrap_or_default();
    if got.stderr.contains("Inappropriate ioctl for device") && got.exit_code == Some(1) {
        return Ok(());
    }
    Err(stream_fail(
        w,
        "stty fails: stderr \"stty: ...standard input...: Inappropriate ioctl for device\", exit code 1",
    ))
}

#[when("the harness streams a command that makes a temporary file in the task")]
async fn makes_temp(w: &mut DriverWorld) -> StepResult {
    let name = format!("/tmp/nomad-conform-isolation-{}", w.ctx().token);
    let _ = std::fs::remove_file(&name);
    stream(
        w,
        &format!("echo isolated > {name} && cat {name}"),
        false,
        Input::default(),
    )
    .await?;
    if let Some(e) = w.exec.as_mut() {
        e.temp_file = Some(name);
    }
    Ok(())
}

#[then("the file is on the host exactly when the driver declares no filesystem isolation")]
async fn isolation(w: &mut DriverWorld) -> StepResult {
    let got = w.exec.clone().unwrap_or_default();
    let name = got.temp_file.clone().unwrap_or_default();
    let on_host = std::path::Path::new(&name).exists();
    let _ = std::fs::remove_file(&name);
    let none =
        w.config().probe.caps.as_ref().is_some_and(|c| {
            c.fs_isolation == drivers::driver_capabilities::FsIsolation::None as i32
        });
    if got.stdout.trim() != "isolated" || got.exit_code != Some(0) {
        return Err(stream_fail(
            w,
            "the command writes the file and reads it back (stdout \"isolated\", exit code 0)",
        ));
    }
    if on_host == none {
        return Ok(());
    }
    Err(stream_fail(
        w,
        &format!(
            "{name} {} on the host, as fs_isolation {} says",
            if none { "is" } else { "is not" },
            if none { "NONE" } else { "(not NONE)" }
        ),
    ))
}
