//! The task lifecycle over the real socket: StartTask with real FIFOs, WaitTask, InspectTask,
//! StopTask, DestroyTask, SignalTask, TaskStats, TaskEvents, and start errors.

mod support;

use std::time::{Duration, Instant, SystemTime};

use nomad_conform_proto::nomad::drivers::{
    DestroyTaskRequest, InspectTaskRequest, SignalTaskRequest, StopTaskRequest, TaskEventsRequest,
    TaskState, TaskStatsRequest, WaitTaskRequest,
};
use nomad_conform_proto::nomad::structs::RecoverableError;
use prost::Message as _;
use rmpv::Value;
use support::*;
use tonic::Code;

#[tokio::test]
async fn output_reaches_the_fifos_and_wait_reports_the_exit_code() {
    let mut setup = Setup::new(&[]).await;
    let task = setup
        .scratch
        .task("web", &["/bin/sh", "-c", "echo out; echo err >&2; exit 3"]);
    let handle = setup.clients.start(&task).await;

    assert_eq!(handle.version, 1);
    assert_eq!(handle.state, TaskState::Running as i32);
    assert_eq!(
        handle.config.as_ref(),
        Some(&task.config),
        "config is echoed"
    );
    let state = rmpv::decode::read_value(&mut handle.driver_state.as_slice()).expect("msgpack");
    let keys: Vec<&str> = state
        .as_map()
        .expect("a map")
        .iter()
        .filter_map(|(k, _)| k.as_str())
        .collect();
    for key in [
        "supervisor_pid",
        "task_pid",
        "started_at_unix_nanos",
        "status_file",
    ] {
        assert!(keys.contains(&key), "driver_state lacks {key}: {keys:?}");
    }

    assert_eq!(task.stdout.all(10), "out\n");
    assert_eq!(task.stderr.all(10), "err\n");
    let result = setup.clients.wait(&task.id(), 10).await;
    assert_eq!((result.exit_code, result.signal), (3, 0));
}

#[tokio::test]
async fn concurrent_waiters_all_return_and_late_waits_return_at_once() {
    let mut setup = Setup::new(&[]).await;
    let task = setup
        .scratch
        .task("job", &["/bin/sh", "-c", "sleep 0.5; exit 5"]);
    setup.clients.start(&task).await;

    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let mut clients = setup.clients.clone();
            let id = task.id();
            tokio::spawn(async move { clients.wait(&id, 10).await })
        })
        .collect();
    for waiter in waiters {
        assert_eq!(waiter.await.expect("waiter").exit_code, 5);
    }
    let started = Instant::now();
    assert_eq!(setup.clients.wait(&task.id(), 2).await.exit_code, 5);
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn task_runs_in_its_directory_with_nomads_environment() {
    let mut setup = Setup::new(&[]).await;
    let task = setup.scratch.task(
        "env",
        &[
            "/bin/sh",
            "-c",
            "pwd; echo \"$NOMAD_TASK_DIR\"; echo \"$NOMAD_TASK_NAME\"",
        ],
    );
    setup.clients.start(&task).await;
    let output = task.stdout.all(10);
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(
        lines,
        [
            task.task_dir.display().to_string(),
            task.config.env["NOMAD_TASK_DIR"].clone(),
            "env".to_string()
        ]
    );
    assert_eq!(setup.clients.wait(&task.id(), 10).await.exit_code, 0);
}

#[tokio::test]
async fn plain_msgpack_task_config_without_args_is_accepted() {
    let mut setup = Setup::new(&[]).await;
    let config = msgpack_map(&[("command", Value::from("/bin/true"))]);
    let task = setup.scratch.task_with_config("plain", config);
    setup.clients.start(&task).await;
    assert_eq!(setup.clients.wait(&task.id(), 10).await.exit_code, 0);
}

#[tokio::test]
async fn inspect_reports_timestamps_while_running_and_after_exit() {
    let mut setup = Setup::new(&[]).await;
    let before = SystemTime::now();
    let task = setup
        .scratch
        .task("inspect", &["/bin/sh", "-c", "sleep 0.5; exit 2"]);
    setup.clients.start(&task).await;

    let inspect = |mut clients: Clients, id: String| async move {
        clients
            .driver
            .inspect_task(InspectTaskRequest { task_id: id })
            .await
            .expect("InspectTask")
            .into_inner()
            .task
            .expect("a status")
    };
    let running = inspect(setup.clients.clone(), task.id()).await;
    assert_eq!(running.id, task.id());
    assert_eq!(running.name, "inspect");
    assert_eq!(running.state, TaskState::Running as i32);
    let started_at = running.started_at.expect("started_at while running");
    let started = SystemTime::try_from(started_at).expect("a valid time");
    assert!(started >= before - Duration::from_secs(1), "{started:?}");
    assert_eq!(
        running
            .completed_at
            .expect("completed_at while running")
            .seconds,
        GO_ZERO_SECONDS
    );
    assert_eq!(running.result, None);

    setup.clients.wait(&task.id(), 10).await;
    let exited = inspect(setup.clients.clone(), task.id()).await;
    assert_eq!(exited.state, TaskState::Exited as i32);
    let completed = SystemTime::try_from(exited.completed_at.expect("completed_at")).unwrap();
    assert!(completed >= started, "{completed:?} before {started:?}");
    assert_eq!(exited.result.expect("a result").exit_code, 2);
}

#[tokio::test]
async fn stop_escalates_to_sigkill_when_the_task_ignores_the_signal() {
    let mut setup = Setup::new(&[]).await;
    let task = setup.scratch.task(
        "stubborn",
        &["/bin/sh", "-c", "trap '' TERM; echo ready; sleep 30"],
    );
    setup.clients.start(&task).await;
    assert_eq!(task.stdout.line(10), "ready\n");

    let started = Instant::now();
    within(
        10,
        "StopTask",
        setup.driver().stop_task(StopTaskRequest {
            task_id: task.id(),
            timeout: Some(duration(1.0)),
            signal: "SIGTERM".into(),
        }),
    )
    .await
    .expect("StopTask");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(950),
        "returned after {took:?}"
    );
    let result = setup.clients.wait(&task.id(), 5).await;
    assert_eq!((result.signal, result.exit_code), (9, 137));

    // Stopping a task that has exited succeeds, and changes nothing.
    setup
        .driver()
        .stop_task(StopTaskRequest {
            task_id: task.id(),
            timeout: Some(duration(1.0)),
            signal: String::new(),
        })
        .await
        .expect("StopTask of an exited task");
    assert_eq!(setup.clients.wait(&task.id(), 2).await.signal, 9);
}

#[tokio::test]
async fn stop_delivers_the_requested_signal() {
    let mut setup = Setup::new(&[]).await;
    let task = setup.scratch.task("sleeper", &["sleep", "30"]);
    setup.clients.start(&task).await;
    let started = Instant::now();
    within(
        10,
        "StopTask",
        setup.driver().stop_task(StopTaskRequest {
            task_id: task.id(),
            timeout: Some(duration(5.0)),
            signal: "SIGINT".into(),
        }),
    )
    .await
    .expect("StopTask");
    assert!(started.elapsed() < Duration::from_secs(3));
    let result = setup.clients.wait(&task.id(), 5).await;
    assert_eq!((result.signal, result.exit_code), (2, 130));
}

#[tokio::test]
async fn stop_without_a_signal_sends_sigint() {
    // Nomad sends "" for a job without kill_signal; its executor then uses SIGINT.
    let mut setup = Setup::new(&[]).await;
    let task = setup.scratch.task("sleeper", &["sleep", "30"]);
    setup.clients.start(&task).await;
    within(
        10,
        "StopTask",
        setup.driver().stop_task(StopTaskRequest {
            task_id: task.id(),
            timeout: Some(duration(5.0)),
            signal: String::new(),
        }),
    )
    .await
    .expect("StopTask");
    let result = setup.clients.wait(&task.id(), 5).await;
    assert_eq!((result.signal, result.exit_code), (2, 130));
}

#[tokio::test]
async fn destroy_refuses_a_running_task_without_force_and_kills_the_session_with_it() {
    let mut setup = Setup::new(&[]).await;
    // A background child in the task's group, and a perl process that left the group but
    // stays in the session.
    let script = "sleep 300 & \
                  perl -e 'setpgrp(0, 0); sleep 300' & \
                  echo ready; sleep 300";
    let task = setup.scratch.task("tree", &["/bin/sh", "-c", script]);
    let handle = setup.clients.start(&task).await;
    assert_eq!(task.stdout.line(10), "ready\n");
    let state = rmpv::decode::read_value(&mut handle.driver_state.as_slice()).unwrap();
    let field = |name: &str| -> i32 {
        state
            .as_map()
            .unwrap()
            .iter()
            .find(|(k, _)| k.as_str() == Some(name))
            .and_then(|(_, v)| v.as_i64())
            .expect(name) as i32
    };
    let (supervisor, main) = (field("supervisor_pid"), field("task_pid"));
    assert!(
        eventually(5, || processes_in_session_or_group(supervisor, main).len()
            >= 4),
        "supervisor, shell, sleep and perl: {:?}",
        processes_in_session_or_group(supervisor, main)
    );

    let refused = setup
        .driver()
        .destroy_task(DestroyTaskRequest {
            task_id: task.id(),
            force: false,
        })
        .await
        .expect_err("DestroyTask(force=false) of a running task");
    assert_eq!(refused.code(), Code::Unknown);
    assert!(is_alive(main));

    within(
        10,
        "DestroyTask",
        setup.driver().destroy_task(DestroyTaskRequest {
            task_id: task.id(),
            force: true,
        }),
    )
    .await
    .expect("DestroyTask(force=true)");
    assert!(
        eventually(5, || processes_in_session_or_group(supervisor, main)
            .is_empty()),
        "left running: {:?}",
        processes_in_session_or_group(supervisor, main)
    );

    for status in [
        setup
            .driver()
            .inspect_task(InspectTaskRequest { task_id: task.id() })
            .await
            .expect_err("InspectTask after destroy"),
        setup
            .driver()
            .wait_task(WaitTaskRequest { task_id: task.id() })
            .await
            .expect_err("WaitTask after destroy"),
    ] {
        assert_eq!(status.code(), Code::Unknown);
        assert_eq!(status.message(), "task not found for given id");
    }
}

#[tokio::test]
async fn signals_reach_the_task_and_unknown_names_are_refused() {
    let mut setup = Setup::new(&[]).await;
    let task = setup.scratch.task(
        "hup",
        &[
            "/bin/sh",
            "-c",
            "trap 'echo got-hup; exit 0' HUP; echo ready; while :; do sleep 0.05; done",
        ],
    );
    setup.clients.start(&task).await;
    assert_eq!(task.stdout.line(10), "ready\n");

    let unknown = setup
        .driver()
        .signal_task(SignalTaskRequest {
            task_id: task.id(),
            signal: "SIGNOPE".into(),
        })
        .await
        .expect_err("an unknown signal");
    assert_eq!(unknown.code(), Code::Unknown);

    setup
        .driver()
        .signal_task(SignalTaskRequest {
            task_id: task.id(),
            signal: "SIGHUP".into(),
        })
        .await
        .expect("SignalTask");
    assert_eq!(task.stdout.line(10), "got-hup\n");
    assert_eq!(setup.clients.wait(&task.id(), 10).await.exit_code, 0);
}

#[tokio::test]
async fn stats_stream_at_the_interval_and_end_when_the_task_exits() {
    let mut setup = Setup::new(&[]).await;
    let task = setup.scratch.task("stats", &["/bin/sh", "-c", "sleep 1"]);
    setup.clients.start(&task).await;
    let mut stream = setup
        .driver()
        .task_stats(TaskStatsRequest {
            task_id: task.id(),
            collection_interval: Some(duration(0.2)),
        })
        .await
        .expect("TaskStats")
        .into_inner();

    let started = Instant::now();
    let mut samples = Vec::new();
    while let Some(message) = within(5, "a TaskStats message", stream.message())
        .await
        .expect("stream")
    {
        samples.push(message.stats.expect("stats"));
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the stream did not end"
    );
    assert!(
        samples.len() >= 3,
        "{} samples in ~1 s at 200 ms",
        samples.len()
    );
    let first = &samples[0];
    assert_eq!(first.id, task.id());
    assert!(first.timestamp.is_some());
    let usage = first.agg_resource_usage.as_ref().expect("aggregate usage");
    let memory = usage.memory.as_ref().expect("memory");
    assert!(memory.rss > 0, "rss of sh and sleep");
    assert!(!memory.measured_fields.is_empty());
    assert!(!usage.cpu.as_ref().expect("cpu").measured_fields.is_empty());
    assert!(!first.resource_usage_by_pid.is_empty());
}

#[tokio::test]
async fn events_carry_the_task_id_alloc_id_and_task_name() {
    let mut setup = Setup::new(&[]).await;
    let mut events = setup
        .driver()
        .task_events(TaskEventsRequest {})
        .await
        .expect("TaskEvents")
        .into_inner();
    let task = setup.scratch.task("events", &["/bin/true"]);
    setup.clients.start(&task).await;
    let event = within(5, "a task event", events.message())
        .await
        .expect("stream")
        .expect("an event");
    assert_eq!(event.task_id, task.id());
    assert_eq!(event.alloc_id, task.config.alloc_id);
    assert_eq!(event.task_name, "events");
    assert!(event.timestamp.is_some());
    assert!(event.message.contains("started"), "{}", event.message);
}

#[tokio::test]
async fn a_bad_task_config_is_refused_with_a_recoverable_error_detail_and_starts_nothing() {
    let mut setup = Setup::new(&[]).await;
    let config = cty_config(&[("args", Value::Nil), ("command", Value::Nil)]);
    let task = setup.scratch.task_with_config("bad", config);
    let status = setup
        .driver()
        .start_task(task.start_request())
        .await
        .expect_err("StartTask without a command");
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert!(status.message().contains("command"), "{}", status.message());
    let details = RpcStatus::decode(status.details()).expect("google.rpc.Status details");
    assert_eq!(details.details.len(), 1);
    assert_eq!(
        details.details[0].type_url,
        "type.googleapis.com/hashicorp.nomad.plugins.shared.structs.RecoverableError"
    );
    let detail = RecoverableError::decode(details.details[0].value.as_slice()).unwrap();
    assert!(!detail.recoverable);

    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        processes_of(setup.scratch.path(), &setup.scratch.marker()),
        Vec::<i32>::new(),
        "a refused task left processes"
    );
    let unknown = setup
        .driver()
        .wait_task(WaitTaskRequest { task_id: task.id() })
        .await
        .expect_err("the refused task is unknown");
    assert_eq!(unknown.code(), Code::Unknown);
}

#[tokio::test]
async fn a_command_that_cannot_start_is_a_start_error() {
    let mut setup = Setup::new(&[]).await;
    let task = setup.scratch.task("missing", &["/nonexistent/binary"]);
    let status = within(
        10,
        "StartTask",
        setup.driver().start_task(task.start_request()),
    )
    .await
    .expect_err("StartTask of a missing binary");
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert!(
        status.message().contains("/nonexistent/binary"),
        "{}",
        status.message()
    );
    assert!(!status.details().is_empty());
}

#[tokio::test]
async fn tasks_start_with_the_usual_signals_not_ignored() {
    // The plugin catches SIGINT and Rust programs ignore SIGPIPE: neither may reach the task,
    // because an ignored disposition survives exec. (glibc's internal real-time signals 32
    // and 33 may show as ignored after any posix_spawn; they are not checked.)
    let mut setup = Setup::new(&[]).await;
    let task = setup
        .scratch
        .task("signals", &["grep", "SigIgn", "/proc/self/status"]);
    setup.clients.start(&task).await;
    let line = task.stdout.all(10);
    let mask = line
        .trim()
        .strip_prefix("SigIgn:")
        .map(|hex| u64::from_str_radix(hex.trim(), 16).expect("a hex mask"))
        .unwrap_or_else(|| panic!("{line:?}"));
    for (name, number) in [
        ("SIGHUP", 1),
        ("SIGINT", 2),
        ("SIGQUIT", 3),
        ("SIGPIPE", 13),
        ("SIGTERM", 15),
    ] {
        assert_eq!(
            mask & (1 << (number - 1)),
            0,
            "{name} is ignored in the task: {line}"
        );
    }
}
