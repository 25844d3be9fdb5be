//! The remaining faults, briefly: each one seen breaking its rule. (`switches.rs` has the
//! first set and the variants; `slow-handshake` is left out, it costs 5 s.)

mod support;

use std::time::Duration;

use nomad_conform_proto::nomad::base::{ConfigSchemaRequest, PluginInfoRequest, SetConfigRequest};
use nomad_conform_proto::nomad::drivers::exec_task_streaming_request::{
    Setup as ExecSetup, TerminalSize,
};
use nomad_conform_proto::nomad::drivers::fingerprint_response::HealthState;
use nomad_conform_proto::nomad::drivers::{
    CapabilitiesRequest, DestroyTaskRequest, ExecTaskStreamingIoOperation,
    ExecTaskStreamingRequest, FingerprintRequest, InitRequest, InspectTaskRequest,
    RecoverTaskRequest, SignalTaskRequest, StopTaskRequest, TaskConfigSchemaRequest,
    TaskEventsRequest, TaskState, TaskStatsRequest, WaitTaskRequest,
};
use nomad_conform_proto::nomad::hclspec::Spec;
use nomad_conform_proto::nomad::hclspec::spec::Block;
use rmpv::Value;
use support::*;

/// Every Attr type in a schema.
fn attr_types(spec: &Spec) -> Vec<String> {
    match spec.block.as_ref() {
        Some(Block::Object(object)) => object.attributes.values().flat_map(attr_types).collect(),
        Some(Block::Default(default)) => default
            .primary
            .as_deref()
            .map(attr_types)
            .unwrap_or_default(),
        Some(Block::Attr(attr)) => vec![attr.r#type.clone()],
        _ => Vec::new(),
    }
}

/// What an ExecTaskStreaming session sent.
struct Streamed {
    stdout: String,
    stderr: String,
    exit_code: Option<i32>,
    /// How many messages carried stdout data.
    stdout_chunks: usize,
}

/// Runs `/bin/sh -c script` through ExecTaskStreaming.
async fn exec_stream(
    setup: &mut Setup,
    task_id: &str,
    script: &str,
    tty: bool,
    then: Vec<ExecTaskStreamingRequest>,
) -> Streamed {
    let mut messages = vec![ExecTaskStreamingRequest {
        setup: Some(ExecSetup {
            task_id: task_id.to_string(),
            command: vec!["/bin/sh".into(), "-c".into(), script.into()],
            tty,
        }),
        ..Default::default()
    }];
    messages.extend(then);
    // Keep the request stream open (a client that has nothing more to say).
    let requests =
        tokio_stream::StreamExt::chain(tokio_stream::iter(messages), tokio_stream::pending());
    let mut responses = setup
        .driver()
        .exec_task_streaming(requests)
        .await
        .expect("ExecTaskStreaming")
        .into_inner();
    let mut streamed = Streamed {
        stdout: String::new(),
        stderr: String::new(),
        exit_code: None,
        stdout_chunks: 0,
    };
    while let Some(message) = within(10, "the exec stream", responses.message())
        .await
        .unwrap()
    {
        if let Some(out) = message.stdout {
            streamed.stdout_chunks += usize::from(!out.data.is_empty());
            streamed
                .stdout
                .push_str(&String::from_utf8_lossy(&out.data));
        }
        if let Some(err) = message.stderr {
            streamed
                .stderr
                .push_str(&String::from_utf8_lossy(&err.data));
        }
        if message.exited {
            streamed.exit_code = message.result.map(|r| r.exit_code);
        }
    }
    streamed
}

async fn running(setup: &mut Setup) -> String {
    let task = setup.scratch.task("t", &["sleep", "30"]);
    setup.clients.start(&task).await;
    task.id()
}

#[test]
fn handshake_field_faults() {
    let scratch = Scratch::new();
    for (fault, index, value) in [
        ("handshake-core-2", 0, "2"),
        ("handshake-app-1", 1, "1"),
        ("handshake-netrpc", 4, "netrpc"),
    ] {
        let plugin = PluginProcess::launch(&scratch, &["--fault", fault]);
        assert_eq!(
            plugin.fields()[index],
            value,
            "{fault}: {}",
            plugin.handshake
        );
    }
    let plugin = PluginProcess::launch(&scratch, &["--fault", "stdout-banner"]);
    assert!(
        !plugin.handshake.starts_with("1|2|"),
        "{}",
        plugin.handshake
    );
}

#[tokio::test]
async fn base_plugin_faults() {
    let mut setup =
        Setup::new(&["--fault", "no-api-version", "--fault", "bad-config-schema"]).await;
    let info = setup
        .clients
        .base
        .plugin_info(PluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(info.plugin_api_versions.is_empty());
    let spec = setup
        .clients
        .base
        .config_schema(ConfigSchemaRequest {})
        .await
        .unwrap();
    let types = attr_types(&spec.into_inner().spec.unwrap());
    assert!(types.contains(&"strng".to_string()), "{types:?}");

    let mut setup = Setup::new(&["--fault", "set-config-needs-nomad-config"]).await;
    let status = setup
        .clients
        .base
        .set_config(SetConfigRequest::default())
        .await;
    assert!(status.is_err(), "SetConfig without nomad_config succeeded");

    let mut setup = Setup::new(&["--fault", "set-config-rejects-nil"]).await;
    let cty = cty_config(&[("enabled", Value::Nil), ("fingerprint_period", "5s".into())]);
    let request = SetConfigRequest {
        msgpack_config: cty,
        ..Default::default()
    };
    assert!(setup.clients.base.set_config(request).await.is_err());
}

#[tokio::test]
async fn driver_setup_faults() {
    let mut setup = Setup::new(&[
        "--fault",
        "init-fails",
        "--fault",
        "capabilities-error",
        "--fault",
        "bad-task-schema",
    ])
    .await;
    assert!(setup.driver().init(InitRequest {}).await.is_err());
    assert!(
        setup
            .driver()
            .capabilities(CapabilitiesRequest {})
            .await
            .is_err()
    );
    let spec = setup
        .driver()
        .task_config_schema(TaskConfigSchemaRequest {})
        .await
        .unwrap();
    let types = attr_types(&spec.into_inner().spec.unwrap());
    assert!(types.contains(&"strng".to_string()), "{types:?}");
}

#[tokio::test]
async fn fingerprint_faults() {
    let mut setup = Setup::new(&["--fault", "fingerprint-late"]).await;
    let mut stream = setup
        .driver()
        .fingerprint(FingerprintRequest {})
        .await
        .unwrap()
        .into_inner();
    let early = tokio::time::timeout(Duration::from_secs(1), stream.message()).await;
    assert!(early.is_err(), "a message within 1 s");

    let args = [
        "--fault",
        "fingerprint-bad-health",
        "--fault",
        "fingerprint-empty-attribute",
    ];
    let mut setup = Setup::new(&args).await;
    let mut stream = setup
        .driver()
        .fingerprint(FingerprintRequest {})
        .await
        .unwrap()
        .into_inner();
    let print = stream.message().await.unwrap().unwrap();
    assert_eq!(print.health, 7);
    assert!(print.attributes.values().any(|a| a.value.is_none()));
}

#[tokio::test]
async fn start_and_handle_faults() {
    let mut setup = Setup::new(&[
        "--fault",
        "handle-wrong-id",
        "--fault",
        "events-no-alloc-id",
    ])
    .await;
    let mut events = setup
        .driver()
        .task_events(TaskEventsRequest {})
        .await
        .unwrap()
        .into_inner();
    let task = setup.scratch.task("t", &["/bin/true"]);
    let handle = setup.clients.start(&task).await;
    assert_ne!(handle.config.unwrap().id, task.id());
    let event = within(5, "an event", events.message())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(event.alloc_id, "");
}

#[tokio::test]
async fn wait_and_inspect_faults() {
    let mut setup = Setup::new(&["--fault", "unknown-task-hangs"]).await;
    let wait = setup.driver().wait_task(WaitTaskRequest {
        task_id: "no/such/task".into(),
    });
    assert!(
        tokio::time::timeout(Duration::from_millis(500), wait)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn stop_and_destroy_faults() {
    let mut setup = Setup::new(&[
        "--fault",
        "stop-ignores-signal",
        "--fault",
        "stop-exited-errors",
        "--fault",
        "destroy-keeps-task",
    ])
    .await;
    let id = running(&mut setup).await;
    let stop = StopTaskRequest {
        task_id: id.clone(),
        timeout: Some(duration(5.0)),
        signal: "SIGINT".into(),
    };
    setup
        .driver()
        .stop_task(stop.clone())
        .await
        .expect("StopTask");
    assert_eq!(setup.clients.wait(&id, 5).await.signal, 9, "not SIGKILL");
    assert!(
        setup.driver().stop_task(stop).await.is_err(),
        "stop of an exited task"
    );
    let destroy = DestroyTaskRequest {
        task_id: id.clone(),
        force: true,
    };
    setup
        .driver()
        .destroy_task(destroy)
        .await
        .expect("DestroyTask");
    let inspect = InspectTaskRequest { task_id: id };
    setup
        .driver()
        .inspect_task(inspect)
        .await
        .expect("the task is still known");
}

#[tokio::test]
async fn signal_and_stats_faults() {
    let mut setup = Setup::new(&[
        "--fault",
        "signal-unknown-ok",
        "--fault",
        "stats-never-ends",
    ])
    .await;
    let id = running(&mut setup).await;
    let signal = SignalTaskRequest {
        task_id: id.clone(),
        signal: "SIGNOPE".into(),
    };
    setup
        .driver()
        .signal_task(signal)
        .await
        .expect("an unknown signal is OK");
    let stats = TaskStatsRequest {
        task_id: id.clone(),
        collection_interval: Some(duration(0.1)),
    };
    let mut stream = setup.driver().task_stats(stats).await.unwrap().into_inner();
    let stop = StopTaskRequest {
        task_id: id.clone(),
        timeout: Some(duration(1.0)),
        signal: String::new(),
    };
    setup.driver().stop_task(stop).await.unwrap();
    setup.clients.wait(&id, 5).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..5 {
        let next = within(2, "a stats message", stream.message())
            .await
            .unwrap();
        assert!(next.is_some(), "the stream ended after the exit");
    }
}

#[tokio::test]
async fn recover_fails_fails() {
    let mut setup = Setup::new(&["--fault", "recover-fails"]).await;
    let task = setup.scratch.task("t", &["/bin/true"]);
    let handle = setup.clients.start(&task).await;
    let request = RecoverTaskRequest {
        task_id: String::new(),
        handle: Some(handle),
    };
    assert!(setup.driver().recover_task(request).await.is_err());
}

#[tokio::test]
async fn exec_stream_output_faults() {
    let args = [
        "--fault",
        "exec-stream-no-stderr",
        "--fault",
        "exec-stream-no-exit-code",
    ];
    let mut setup = Setup::new(&args).await;
    let id = running(&mut setup).await;
    let script = "echo out; echo err >&2; exit 3";
    let out = exec_stream(&mut setup, &id, script, false, vec![]).await;
    assert_eq!(
        (out.stdout.as_str(), out.stderr.as_str(), out.exit_code),
        ("out\n", "", Some(0))
    );

    let mut setup = Setup::new(&["--fault", "exec-stream-buffers"]).await;
    let id = running(&mut setup).await;
    let out = exec_stream(&mut setup, &id, "echo a; sleep 0.3; echo b", false, vec![]).await;
    assert_eq!(out.stdout, "a\nb\n");
    assert_eq!(
        out.stdout_chunks, 1,
        "the output came in pieces, as it was written"
    );
}

#[tokio::test]
async fn exec_stream_input_faults() {
    let mut setup = Setup::new(&["--fault", "exec-stream-ignores-resize"]).await;
    let id = running(&mut setup).await;
    let resize = ExecTaskStreamingRequest {
        tty_size: Some(TerminalSize {
            height: 100,
            width: 100,
        }),
        ..Default::default()
    };
    let out = exec_stream(&mut setup, &id, "sleep 0.5; stty size", true, vec![resize]).await;
    assert_eq!(out.exit_code, Some(0));
    assert_ne!(out.stdout, "100 100\r\n");

    let mut setup = Setup::new(&["--fault", "exec-stream-ignores-stdin-close"]).await;
    let id = running(&mut setup).await;
    let close = ExecTaskStreamingRequest {
        stdin: Some(ExecTaskStreamingIoOperation {
            data: b"x\n".to_vec(),
            close: true,
        }),
        ..Default::default()
    };
    let session = exec_stream(&mut setup, &id, "cat", false, vec![close]);
    assert!(
        tokio::time::timeout(Duration::from_secs(1), session)
            .await
            .is_err(),
        "cat saw the end of its input"
    );
}

#[tokio::test]
async fn exec_stream_waits_children_waits() {
    let mut setup = Setup::new(&["--fault", "exec-stream-waits-children"]).await;
    let id = running(&mut setup).await;
    let script = "( sleep 1.5; echo late ) & echo main";
    let started = std::time::Instant::now();
    let out = exec_stream(&mut setup, &id, script, false, vec![]).await;
    assert_eq!(out.stdout, "main\nlate\n");
    assert!(started.elapsed() >= Duration::from_millis(1400));
}

#[tokio::test]
async fn bad_config_recoverable_marks_a_bad_config_worth_retrying() {
    let mut setup = Setup::new(&["--fault", "bad-config-recoverable"]).await;
    let config = cty_config(&[("args", Value::Nil), ("command", Value::Nil)]);
    let task = setup.scratch.task_with_config("bad", config);
    let status = setup
        .driver()
        .start_task(task.start_request())
        .await
        .expect_err("no command");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert_eq!(recoverable_detail(&status), Some(true));
}

#[tokio::test]
async fn panics_in_start_dies_like_a_go_plugin() {
    let mut setup = Setup::new(&["--fault", "panics-in-start"]).await;
    let task = setup.scratch.task("t", &["/bin/true"]);
    setup
        .driver()
        .start_task(task.start_request())
        .await
        .expect_err("the plugin died");
    let status = setup.plugin.wait_exit(5).expect("the plugin exited");
    assert_eq!(status.code(), Some(2));
    let stderr = setup.plugin.stderr_to_end(5);
    let has = |prefix: &str| stderr.iter().any(|l| l.starts_with(prefix));
    assert!(
        has("panic: runtime error: invalid memory address or nil pointer dereference")
            && has("[signal SIGSEGV: segmentation violation")
            && has("goroutine 37 [running]:")
            && has("main.(*Driver).StartTask(")
            && has("\t/src/driver/start.go:"),
        "{stderr:?}"
    );
}

#[tokio::test]
async fn undetected_variant_says_undetected_and_repeats_itself() {
    let mut setup = Setup::new(&["--variant", "undetected"]).await;
    let request = SetConfigRequest {
        msgpack_config: msgpack_map(&[("fingerprint_period", "200ms".into())]),
        ..Default::default()
    };
    setup.clients.base.set_config(request).await.unwrap();
    let mut stream = setup
        .driver()
        .fingerprint(FingerprintRequest {})
        .await
        .unwrap()
        .into_inner();
    for _ in 0..2 {
        let print = within(2, "a fingerprint", stream.message())
            .await
            .unwrap()
            .expect("the stream stays open");
        assert_eq!(print.health, HealthState::Undetected as i32);
        assert_eq!(
            print.health_description,
            "exec runtime not found on this node (undetected variant)"
        );
    }
}

#[tokio::test]
async fn healthy_but_start_fails_fails_every_start() {
    const MESSAGE: &str =
        "failed to start task: runtime binary /usr/bin/firecracker does not exist";
    let mut setup = Setup::new(&["--fault", "healthy-but-start-fails"]).await;
    let mut stream = setup
        .driver()
        .fingerprint(FingerprintRequest {})
        .await
        .unwrap()
        .into_inner();
    let print = stream.message().await.unwrap().unwrap();
    assert_eq!(print.health, HealthState::Healthy as i32);
    let task = setup.scratch.task("t", &["/bin/true"]);
    let status = setup
        .driver()
        .start_task(task.start_request())
        .await
        .expect_err("StartTask");
    assert_eq!(
        (status.code(), status.message()),
        (tonic::Code::FailedPrecondition, MESSAGE)
    );
    assert_eq!(recoverable_detail(&status), Some(false));
    assert!(setup.plugin.wait_exit(0).is_none(), "the plugin died");

    let args = [
        "--fault",
        "healthy-but-start-fails",
        "--variant",
        "plain-start-errors",
    ];
    let mut setup = Setup::new(&args).await;
    let task = setup.scratch.task("t", &["/bin/true"]);
    let status = setup
        .driver()
        .start_task(task.start_request())
        .await
        .expect_err("StartTask");
    assert_eq!(
        (status.code(), status.message()),
        (tonic::Code::Unknown, MESSAGE)
    );
    assert!(status.details().is_empty());
}

#[tokio::test]
async fn destroy_leaves_task_keeps_it_running() {
    let mut setup = Setup::new(&["--fault", "destroy-leaves-task"]).await;
    let task = setup.scratch.task("t", &["sleep", "30"]);
    let handle = setup.clients.start(&task).await;
    let destroy = DestroyTaskRequest {
        task_id: task.id(),
        force: true,
    };
    setup
        .driver()
        .destroy_task(destroy)
        .await
        .expect("DestroyTask");
    assert!(is_alive(task_pid(&handle)), "the task was killed");
    let status = setup
        .driver()
        .inspect_task(InspectTaskRequest { task_id: task.id() })
        .await
        .expect("the task is still known")
        .into_inner();
    assert_eq!(status.task.unwrap().state, TaskState::Running as i32);
    let wait = setup
        .driver()
        .wait_task(WaitTaskRequest { task_id: task.id() });
    assert!(
        tokio::time::timeout(Duration::from_millis(500), wait)
            .await
            .is_err(),
        "WaitTask returned"
    );
}

#[tokio::test]
async fn recover_decodes_raw_config_fails_on_an_empty_config() {
    let mut setup = Setup::new(&["--fault", "recover-decodes-raw-config"]).await;
    let task = setup.scratch.task("t", &["sleep", "30"]);
    let handle = setup.clients.start(&task).await;
    let recover = |handle| RecoverTaskRequest {
        task_id: String::new(),
        handle: Some(handle),
    };
    setup
        .driver()
        .recover_task(recover(handle.clone()))
        .await
        .expect("RecoverTask with the config as StartTask got it");
    let mut stored = handle;
    if let Some(config) = stored.config.as_mut() {
        config.msgpack_driver_config.clear();
    }
    let status = setup
        .driver()
        .recover_task(recover(stored))
        .await
        .expect_err("RecoverTask with an empty config");
    assert_eq!(status.message(), "failed to decode driver config: EOF");
}

#[tokio::test]
async fn second_init_fails_fails_the_second_time() {
    let mut setup = Setup::new(&["--fault", "second-init-fails"]).await;
    setup
        .driver()
        .init(InitRequest {})
        .await
        .expect("first Init");
    setup
        .driver()
        .init(InitRequest {})
        .await
        .expect_err("second Init");
}

#[tokio::test]
async fn recover_refuses_known_task_fails_for_a_running_task() {
    let mut setup = Setup::new(&["--fault", "recover-refuses-known-task"]).await;
    let task = setup.scratch.task("t", &["sleep", "30"]);
    let handle = setup.clients.start(&task).await;
    let status = setup
        .driver()
        .recover_task(RecoverTaskRequest {
            task_id: String::new(),
            handle: Some(handle),
        })
        .await
        .expect_err("RecoverTask of a known task");
    assert_eq!(status.message(), "task already exists");
}

#[tokio::test]
async fn rejects_empty_signal_fails_a_stop_without_signal() {
    let mut setup = Setup::new(&["--fault", "rejects-empty-signal"]).await;
    let id = running(&mut setup).await;
    let stop = |signal: &str| StopTaskRequest {
        task_id: id.clone(),
        timeout: Some(duration(5.0)),
        signal: signal.to_string(),
    };
    let status = setup
        .driver()
        .stop_task(stop(""))
        .await
        .expect_err("StopTask without a signal");
    assert_eq!(status.message(), "invalid signal \"\"");
    setup
        .driver()
        .stop_task(stop("SIGTERM"))
        .await
        .expect("StopTask with SIGTERM");
    assert_eq!(setup.clients.wait(&id, 5).await.signal, 15);
}
