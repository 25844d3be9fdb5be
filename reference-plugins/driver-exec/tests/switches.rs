//! A handful of `--fault` switches (each must break its rule where a client can see it) and
//! every `--variant` (each must still work as the contract allows).

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use nomad_conform_proto::goplugin::ConnInfo;
use nomad_conform_proto::nomad::base::{
    ConfigSchemaRequest, PluginInfoRequest, PluginType, SetConfigRequest,
};
use nomad_conform_proto::nomad::drivers::driver_capabilities::FsIsolation;
use nomad_conform_proto::nomad::drivers::fingerprint_response::HealthState;
use nomad_conform_proto::nomad::drivers::{
    CapabilitiesRequest, DestroyTaskRequest, ExecTaskRequest, FingerprintRequest, InitRequest,
    InspectTaskRequest, RecoverTaskRequest, ShutdownRequest, SignalTaskRequest, StopTaskRequest,
    TaskState, WaitTaskRequest,
};
use rmpv::Value;
use support::*;
use tonic::Code;

// ---- faults ----

#[tokio::test]
async fn handshake_garbled_cuts_the_line_short() {
    let scratch = Scratch::new();
    let plugin = PluginProcess::launch(&scratch, &["--fault", "handshake-garbled"]);
    assert_eq!(plugin.handshake, "1|2|unix");
}

#[tokio::test]
async fn handshake_bad_address_announces_a_socket_nobody_listens_on() {
    let scratch = Scratch::new();
    let plugin = PluginProcess::launch(&scratch, &["--fault", "handshake-bad-address"]);
    assert_eq!(plugin.fields()[2], "unix");
    let dialled = dial_unix(plugin.address().into()).await;
    assert!(
        dialled.is_err(),
        "something listens at {}",
        plugin.address()
    );
}

#[test]
fn ignores_cookie_starts_without_it() {
    let scratch = Scratch::new();
    let mut options = LaunchOptions::new(&["--fault", "ignores-cookie"]);
    options.cookie = false;
    let plugin = PluginProcess::launch_with(&scratch, options);
    assert!(
        plugin.handshake.starts_with("1|2|unix|"),
        "{}",
        plugin.handshake
    );
}

#[tokio::test]
async fn dies_on_sigint_ends_the_plugin() {
    let scratch = Scratch::new();
    let mut plugin = PluginProcess::launch(&scratch, &["--fault", "dies-on-sigint"]);
    kill(Pid::from_raw(plugin.pid()), Signal::SIGINT).unwrap();
    assert!(plugin.wait_exit(5).is_some(), "the plugin survived SIGINT");
}

#[tokio::test]
async fn plain_stderr_is_not_json() {
    let setup = Setup::new(&["--fault", "plain-stderr"]).await;
    assert!(eventually(2, || !setup.plugin.stderr_lines().is_empty()));
    for line in setup.plugin.stderr_lines() {
        assert!(
            serde_json::from_str::<serde_json::Value>(&line).is_err(),
            "{line}"
        );
    }
}

#[tokio::test]
async fn wrong_plugin_type_says_device() {
    let mut setup = Setup::new(&["--fault", "wrong-plugin-type"]).await;
    let info = setup
        .clients
        .base
        .plugin_info(PluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.r#type, PluginType::Device as i32);
}

#[tokio::test]
async fn cty_only_refuses_a_plain_map() {
    let mut setup = Setup::new(&["--fault", "cty-only"]).await;
    let request = SetConfigRequest {
        msgpack_config: msgpack_map(&[("enabled", true.into())]),
        ..Default::default()
    };
    setup
        .clients
        .base
        .set_config(request)
        .await
        .expect_err("a plain map");
}

#[tokio::test]
async fn fingerprint_closes_ends_the_stream() {
    let mut setup = Setup::new(&["--fault", "fingerprint-closes"]).await;
    let mut stream = setup
        .driver()
        .fingerprint(FingerprintRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(stream.message().await.unwrap().is_some());
    let next = within(2, "the stream's end", stream.message())
        .await
        .unwrap();
    assert!(next.is_none(), "a second message");
}

#[tokio::test]
async fn wait_wrong_code_reports_zero() {
    let mut setup = Setup::new(&["--fault", "wait-wrong-code"]).await;
    let task = setup.scratch.task("t", &["/bin/sh", "-c", "exit 3"]);
    setup.clients.start(&task).await;
    assert_eq!(setup.clients.wait(&task.id(), 10).await.exit_code, 0);
}

#[tokio::test]
async fn stop_no_escalation_leaves_the_task_alive() {
    let mut setup = Setup::new(&["--fault", "stop-no-escalation"]).await;
    let task = setup.scratch.task(
        "stubborn",
        &["/bin/sh", "-c", "trap '' TERM; echo ready; sleep 30"],
    );
    let handle = setup.clients.start(&task).await;
    assert_eq!(task.stdout.line(10), "ready\n");
    within(
        5,
        "StopTask",
        setup.driver().stop_task(StopTaskRequest {
            task_id: task.id(),
            timeout: Some(duration(0.3)),
            signal: "SIGTERM".into(),
        }),
    )
    .await
    .expect("StopTask");
    let state = rmpv::decode::read_value(&mut handle.driver_state.as_slice()).unwrap();
    let pid = state
        .as_map()
        .unwrap()
        .iter()
        .find(|(k, _)| k.as_str() == Some("task_pid"));
    let pid = pid.and_then(|(_, v)| v.as_i64()).unwrap() as i32;
    assert!(is_alive(pid), "the task was killed");
}

#[tokio::test]
async fn inspect_no_completed_at_omits_it() {
    let mut setup = Setup::new(&["--fault", "inspect-no-completed-at"]).await;
    let task = setup.scratch.task("t", &["sleep", "30"]);
    setup.clients.start(&task).await;
    let status = setup
        .driver()
        .inspect_task(InspectTaskRequest { task_id: task.id() })
        .await
        .unwrap()
        .into_inner()
        .task
        .unwrap();
    assert!(status.started_at.is_some());
    assert_eq!(status.completed_at, None);
}

#[tokio::test]
async fn tasks_die_with_plugin_puts_tasks_in_the_plugins_group() {
    let mut setup = Setup::new(&["--fault", "tasks-die-with-plugin"]).await;
    let task = setup.scratch.task("t", &["sleep", "30"]);
    let handle = setup.clients.start(&task).await;
    let state = rmpv::decode::read_value(&mut handle.driver_state.as_slice()).unwrap();
    let pid = state
        .as_map()
        .unwrap()
        .iter()
        .find(|(k, _)| k.as_str() == Some("task_pid"));
    let pid = pid.and_then(|(_, v)| v.as_i64()).unwrap() as i32;
    assert!(is_alive(pid));
    setup.plugin.kill_group();
    assert!(
        eventually(5, || !is_alive(pid)),
        "the task outlived the plugin"
    );
}

#[tokio::test]
async fn recover_loses_exit_code_reports_zero_for_a_task_that_exited_meanwhile() {
    let scratch = Scratch::new();
    let args = ["--fault", "recover-loses-exit-code"];
    let mut first = PluginProcess::launch(&scratch, &args);
    let mut clients = first.connect().await;
    let task = scratch.task("t", &["/bin/sh", "-c", "exit 9"]);
    let handle = clients.start(&task).await;
    assert_eq!(task.stdout.all(10), "");
    first.kill_group();
    std::thread::sleep(Duration::from_millis(200));
    let second = PluginProcess::launch(&scratch, &args);
    let mut clients = second.connect().await;
    clients
        .driver
        .recover_task(RecoverTaskRequest {
            task_id: String::new(),
            handle: Some(handle),
        })
        .await
        .expect("RecoverTask");
    assert_eq!(clients.wait(&task.id(), 5).await.exit_code, 0);
}

#[tokio::test]
async fn crashes_on_empty_args_kills_the_plugin() {
    let mut setup = Setup::new(&["--fault", "crashes-on-empty-args"]).await;
    let config = cty_config(&[
        ("args", Value::Array(vec![])),
        ("command", "/bin/true".into()),
    ]);
    let task = setup.scratch.task_with_config("boom", config);
    setup
        .driver()
        .start_task(task.start_request())
        .await
        .expect_err("the plugin died");
    let status = setup.plugin.wait_exit(5).expect("the plugin exited");
    assert_eq!(status.code(), Some(2), "a Go panic exits with status 2");
    // The exit can be seen before the reader thread has taken the last lines.
    let stderr = setup.plugin.stderr_to_end(5);
    assert!(
        stderr.iter().any(|l| l.starts_with("panic: ")),
        "{stderr:?}"
    );
}

#[tokio::test]
async fn exit_on_disconnect_ends_the_plugin_with_the_connection() {
    let scratch = Scratch::new();
    let mut plugin = PluginProcess::launch(&scratch, &["--fault", "exit-on-disconnect"]);
    {
        let mut clients = plugin.connect().await;
        clients
            .base
            .plugin_info(PluginInfoRequest {})
            .await
            .unwrap();
    }
    // Let the client's connection tasks run and close the connection.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(plugin.wait_exit(5).is_some(), "the plugin kept running");
}

#[tokio::test]
async fn exec_no_output_returns_nothing() {
    let mut setup = Setup::new(&["--fault", "exec-no-output"]).await;
    let task = setup.scratch.task("t", &["sleep", "30"]);
    setup.clients.start(&task).await;
    let response = setup
        .driver()
        .exec_task(ExecTaskRequest {
            task_id: task.id(),
            command: vec!["echo".into(), "hi".into()],
            timeout: Some(duration(5.0)),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(response.stdout.is_empty());
    assert_eq!(response.result.unwrap().exit_code, 0);
}

#[tokio::test]
async fn wait_once_hangs_after_the_exit() {
    let mut setup = Setup::new(&["--fault", "wait-once"]).await;
    // Long enough for the first WaitTask to be made while the task runs.
    let task = setup.scratch.task("t", &["/bin/sh", "-c", "sleep 0.5"]);
    setup.clients.start(&task).await;
    assert_eq!(setup.clients.wait(&task.id(), 10).await.exit_code, 0);
    let late = tokio::time::timeout(
        Duration::from_millis(500),
        setup
            .driver()
            .wait_task(WaitTaskRequest { task_id: task.id() }),
    )
    .await;
    assert!(late.is_err(), "a WaitTask after the exit returned");
}

#[tokio::test]
async fn wait_single_waiter_answers_only_the_first() {
    let mut setup = Setup::new(&["--fault", "wait-single-waiter"]).await;
    let task = setup.scratch.task("t", &["/bin/sh", "-c", "sleep 0.5"]);
    setup.clients.start(&task).await;
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let mut driver = setup.clients.driver.clone();
            let id = task.id();
            tokio::spawn(async move {
                let wait = driver.wait_task(WaitTaskRequest { task_id: id });
                tokio::time::timeout(Duration::from_secs(3), wait)
                    .await
                    .is_ok()
            })
        })
        .collect();
    let mut returned = 0;
    for waiter in waiters {
        returned += usize::from(waiter.await.unwrap());
    }
    assert_eq!(returned, 1);
}

#[tokio::test]
async fn logs_dropped_never_opens_the_fifos() {
    let mut setup = Setup::new(&["--fault", "logs-dropped"]).await;
    let task = setup.scratch.task("t", &["echo", "hello"]);
    setup.clients.start(&task).await;
    assert_eq!(setup.clients.wait(&task.id(), 10).await.exit_code, 0);
    assert_eq!(task.stdout.try_line(1), None, "the output reached the FIFO");
}

#[tokio::test]
async fn env_faults_change_what_the_task_sees() {
    let script = "echo \"[$NOMAD_TASK_NAME]\"; echo \"$NOMAD_TASK_DIR\"";
    let mut setup = Setup::new(&["--fault", "env-dropped"]).await;
    let task = setup.scratch.task("t", &["/bin/sh", "-c", script]);
    setup.clients.start(&task).await;
    assert_eq!(task.stdout.all(10), "[]\n\n");

    let mut setup = Setup::new(&["--fault", "task-dir-env-wrong"]).await;
    let task = setup.scratch.task("t", &["/bin/sh", "-c", script]);
    setup.clients.start(&task).await;
    assert_eq!(
        task.stdout.all(10),
        format!("[t]\n{}\n", task.config.alloc_dir)
    );
}

#[tokio::test]
async fn bad_config_leaves_process_leaves_one_running() {
    let mut setup = Setup::new(&["--fault", "bad-config-leaves-process"]).await;
    let config = cty_config(&[("args", Value::Nil), ("command", Value::Nil)]);
    let task = setup.scratch.task_with_config("bad", config);
    setup
        .driver()
        .start_task(task.start_request())
        .await
        .expect_err("no command");
    let (dir, marker) = (setup.scratch.path(), setup.scratch.marker());
    assert!(
        eventually(2, || !processes_of(dir, &marker).is_empty()),
        "nothing was left running"
    );
}

#[tokio::test]
async fn destroy_leaves_children_running() {
    let mut setup = Setup::new(&["--fault", "destroy-leaves-children"]).await;
    let task = setup
        .scratch
        .task("t", &["/bin/sh", "-c", "sleep 300 & echo ready; sleep 300"]);
    let handle = setup.clients.start(&task).await;
    assert_eq!(task.stdout.line(10), "ready\n");
    let state = rmpv::decode::read_value(&mut handle.driver_state.as_slice()).unwrap();
    let pid = state
        .as_map()
        .unwrap()
        .iter()
        .find(|(k, _)| k.as_str() == Some("task_pid"));
    let pid = pid.and_then(|(_, v)| v.as_i64()).unwrap() as i32;
    setup
        .driver()
        .destroy_task(DestroyTaskRequest {
            task_id: task.id(),
            force: true,
        })
        .await
        .expect("DestroyTask");
    let group: Vec<i32> = live_pids()
        .into_iter()
        .filter(|p| stat_field(*p, 5).is_some_and(|g| g == pid.to_string()))
        .collect();
    assert!(!group.is_empty(), "the background sleep is gone too");
}

#[tokio::test]
async fn stop_kills_all_stops_the_other_tasks_too() {
    let mut setup = Setup::new(&["--fault", "stop-kills-all"]).await;
    let one = setup.scratch.task("one", &["sleep", "30"]);
    let two = setup.scratch.task("two", &["sleep", "30"]);
    setup.clients.start(&one).await;
    setup.clients.start(&two).await;
    within(
        10,
        "StopTask",
        setup.driver().stop_task(StopTaskRequest {
            task_id: one.id(),
            timeout: Some(duration(2.0)),
            signal: String::new(),
        }),
    )
    .await
    .expect("StopTask");
    // An empty signal is SIGINT.
    assert_eq!(setup.clients.wait(&two.id(), 2).await.signal, 2);
}

#[tokio::test]
async fn exec_stream_no_pty_uses_pipes_for_a_tty_session() {
    use nomad_conform_proto::nomad::drivers::ExecTaskStreamingRequest;
    use nomad_conform_proto::nomad::drivers::exec_task_streaming_request::Setup as ExecSetup;
    let mut setup = Setup::new(&["--fault", "exec-stream-no-pty"]).await;
    let task = setup.scratch.task("t", &["sleep", "30"]);
    setup.clients.start(&task).await;
    let first = ExecTaskStreamingRequest {
        setup: Some(ExecSetup {
            task_id: task.id(),
            command: vec!["/bin/sh".into(), "-c".into(), "echo hi".into()],
            tty: true,
        }),
        ..Default::default()
    };
    let mut responses = setup
        .driver()
        .exec_task_streaming(tokio_stream::iter(vec![first]))
        .await
        .unwrap()
        .into_inner();
    let mut stdout = Vec::new();
    while let Some(message) = within(5, "exec", responses.message()).await.unwrap() {
        if let Some(out) = message.stdout {
            stdout.extend(out.data);
        }
    }
    assert_eq!(stdout, b"hi\n", "a terminal would have written \\r\\n");
}

#[tokio::test]
async fn stats_once_and_fingerprint_once_fall_silent() {
    use nomad_conform_proto::nomad::drivers::TaskStatsRequest;
    let mut setup = Setup::new(&["--fault", "stats-once", "--fault", "fingerprint-once"]).await;
    let config = msgpack_map(&[("fingerprint_period", "200ms".into())]);
    setup
        .clients
        .base
        .set_config(SetConfigRequest {
            msgpack_config: config,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut prints = setup
        .driver()
        .fingerprint(FingerprintRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(prints.message().await.unwrap().is_some());
    let task = setup.scratch.task("t", &["sleep", "30"]);
    setup.clients.start(&task).await;
    let mut stats = setup
        .driver()
        .task_stats(TaskStatsRequest {
            task_id: task.id(),
            collection_interval: Some(duration(0.2)),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(stats.message().await.unwrap().is_some());
    let silence = Duration::from_millis(700);
    assert!(
        tokio::time::timeout(silence, stats.message())
            .await
            .is_err()
    );
    assert!(
        tokio::time::timeout(silence, prints.message())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn signal_ignored_delivers_nothing() {
    use nomad_conform_proto::nomad::drivers::SignalTaskRequest;
    let mut setup = Setup::new(&["--fault", "signal-ignored"]).await;
    let task = setup.scratch.task(
        "t",
        &[
            "/bin/sh",
            "-c",
            "trap 'exit 0' HUP; echo ready; while :; do sleep 0.05; done",
        ],
    );
    setup.clients.start(&task).await;
    assert_eq!(task.stdout.line(10), "ready\n");
    setup
        .driver()
        .signal_task(SignalTaskRequest {
            task_id: task.id(),
            signal: "SIGHUP".into(),
        })
        .await
        .expect("SignalTask answers OK");
    let wait = setup
        .driver()
        .wait_task(WaitTaskRequest { task_id: task.id() });
    assert!(
        tokio::time::timeout(Duration::from_millis(500), wait)
            .await
            .is_err(),
        "the task got the signal"
    );
}

// ---- variants ----

#[tokio::test]
async fn tcp_variant_listens_on_loopback_within_the_port_range() {
    let mut setup = Setup::new(&["--variant", "tcp"]).await;
    let fields = setup.plugin.fields();
    assert_eq!(fields[2], "tcp");
    let addr: std::net::SocketAddr = fields[3].parse().expect("host:port");
    assert!(addr.ip().is_loopback());
    assert!((10000..=25000).contains(&addr.port()), "{addr}");
    setup
        .clients
        .base
        .plugin_info(PluginInfoRequest {})
        .await
        .expect("PluginInfo over tcp");
}

#[tokio::test]
async fn no_stdio_broker_variant_answers_unimplemented() {
    let mut setup = Setup::new(&["--variant", "no-stdio-broker"]).await;
    let stdio = setup
        .clients
        .stdio
        .stream_stdio(())
        .await
        .expect_err("stdio");
    assert_eq!(stdio.code(), Code::Unimplemented);
    let (_keep, outgoing) = tokio::sync::mpsc::channel::<ConnInfo>(1);
    let broker = setup
        .clients
        .broker
        .start_stream(tokio_stream::wrappers::ReceiverStream::new(outgoing))
        .await
        .expect_err("broker");
    assert_eq!(broker.code(), Code::Unimplemented);
    setup
        .clients
        .base
        .plugin_info(PluginInfoRequest {})
        .await
        .expect("the plugin's own services still answer");
}

#[tokio::test]
async fn not_found_variant_answers_not_found_for_unknown_tasks() {
    let mut setup = Setup::new(&["--variant", "not-found"]).await;
    let status = setup
        .driver()
        .wait_task(WaitTaskRequest {
            task_id: "no/such/task".into(),
        })
        .await
        .expect_err("an unknown task");
    assert_eq!(status.code(), Code::NotFound);
}

#[tokio::test]
async fn no_init_shutdown_variant_answers_unimplemented() {
    let mut setup = Setup::new(&["--variant", "no-init-shutdown"]).await;
    let init = setup.driver().init(InitRequest {}).await.expect_err("Init");
    assert_eq!(init.code(), Code::Unimplemented);
    let shutdown = setup
        .driver()
        .shutdown(ShutdownRequest {})
        .await
        .expect_err("Shutdown");
    assert_eq!(shutdown.code(), Code::Unimplemented);
}

#[tokio::test]
async fn no_exec_variant_says_so_and_refuses_exec() {
    let mut setup = Setup::new(&["--variant", "no-exec"]).await;
    let capabilities = setup
        .driver()
        .capabilities(CapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities
        .unwrap();
    assert!(!capabilities.exec);
    assert!(capabilities.send_signals);
    let task = setup.scratch.task("t", &["sleep", "30"]);
    setup.clients.start(&task).await;
    let started = Instant::now();
    let status = setup
        .driver()
        .exec_task(ExecTaskRequest {
            task_id: task.id(),
            command: vec!["true".into()],
            timeout: Some(duration(5.0)),
        })
        .await
        .expect_err("ExecTask");
    assert_eq!(status.code(), Code::Unimplemented);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn no_config_schema_variant_has_no_spec_and_takes_only_empty_bytes() {
    let mut setup = Setup::new(&["--variant", "no-config-schema"]).await;
    let schema = setup
        .clients
        .base
        .config_schema(ConfigSchemaRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(schema.spec, None);
    for bytes in [vec![0x80], msgpack_map(&[("enabled", true.into())])] {
        let refused = setup
            .clients
            .base
            .set_config(SetConfigRequest {
                msgpack_config: bytes,
                ..Default::default()
            })
            .await
            .expect_err("config bytes");
        assert!(
            refused
                .message()
                .contains("this driver takes no configuration"),
            "{}",
            refused.message()
        );
    }
    setup
        .clients
        .base
        .set_config(SetConfigRequest::default())
        .await
        .expect("SetConfig without bytes");
    // The defaults: healthy, and tasks run.
    let mut prints = setup
        .driver()
        .fingerprint(FingerprintRequest {})
        .await
        .unwrap()
        .into_inner();
    let print = prints.message().await.unwrap().unwrap();
    assert_eq!(print.health, HealthState::Healthy as i32);
    let task = setup.scratch.task("t", &["/bin/sh", "-c", "exit 4"]);
    setup.clients.start(&task).await;
    assert_eq!(setup.clients.wait(&task.id(), 10).await.exit_code, 4);
}

#[tokio::test]
async fn empty_health_description_variant_is_healthy_without_words() {
    let mut setup = Setup::new(&["--variant", "empty-health-description"]).await;
    let mut prints = setup
        .driver()
        .fingerprint(FingerprintRequest {})
        .await
        .unwrap()
        .into_inner();
    let print = prints.message().await.unwrap().unwrap();
    assert_eq!(print.health, HealthState::Healthy as i32);
    assert_eq!(print.health_description, "");
    assert!(!print.attributes.is_empty());
}

#[tokio::test]
async fn handle_state_unset_variant_leaves_the_handle_state_unknown() {
    let mut setup = Setup::new(&["--variant", "handle-state-unset"]).await;
    let task = setup.scratch.task("t", &["/bin/sh", "-c", "exit 3"]);
    let handle = setup.clients.start(&task).await;
    assert_eq!(handle.state, TaskState::Unknown as i32);
    assert_eq!(handle.config.unwrap().id, task.id());
    assert_eq!(setup.clients.wait(&task.id(), 10).await.exit_code, 3);
}

#[tokio::test]
async fn plain_start_errors_variant_drops_the_detail() {
    let mut setup = Setup::new(&["--variant", "plain-start-errors"]).await;
    let config = cty_config(&[("args", Value::Nil), ("command", Value::Nil)]);
    let task = setup.scratch.task_with_config("bad", config);
    let status = setup
        .driver()
        .start_task(task.start_request())
        .await
        .expect_err("no command");
    assert_eq!(status.code(), Code::Unknown);
    assert!(status.message().contains("command"), "{}", status.message());
    assert!(status.details().is_empty());
}

#[tokio::test]
async fn wait_poll_variant_answers_two_poll_periods_after_the_exit() {
    let mut setup = Setup::new(&["--variant", "wait-poll"]).await;
    let task = setup
        .scratch
        .task("t", &["/bin/sh", "-c", "sleep 0.2; exit 6"]);
    setup.clients.start(&task).await;
    let started = Instant::now();
    assert_eq!(setup.clients.wait(&task.id(), 8).await.exit_code, 6);
    let took = started.elapsed();
    assert!(
        // The exit (at 0.2 s) is seen on the monitor's tick at 2 s, reported on the next.
        took >= Duration::from_millis(3500) && took < Duration::from_millis(5000),
        "a WaitTask made while the task ran returned after {took:?}"
    );
    let started = Instant::now();
    assert_eq!(setup.clients.wait(&task.id(), 5).await.exit_code, 6);
    assert!(started.elapsed() < Duration::from_millis(500));
}

#[tokio::test]
async fn no_send_signals_variant_refuses_signals_and_stops_with_sigkill() {
    let mut setup = Setup::new(&["--variant", "no-send-signals"]).await;
    let capabilities = setup
        .driver()
        .capabilities(CapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities
        .unwrap();
    assert!(!capabilities.send_signals);
    let task = setup.scratch.task(
        "stubborn",
        &["/bin/sh", "-c", "trap '' TERM INT; echo ready; sleep 30"],
    );
    setup.clients.start(&task).await;
    assert_eq!(task.stdout.line(10), "ready\n");
    let status = setup
        .driver()
        .signal_task(SignalTaskRequest {
            task_id: task.id(),
            signal: "SIGHUP".into(),
        })
        .await
        .expect_err("SignalTask");
    assert!(
        matches!(status.code(), Code::FailedPrecondition | Code::Unknown),
        "{status:?}"
    );
    assert!(
        status.message().contains("cannot send signals"),
        "{status:?}"
    );
    let started = Instant::now();
    within(
        5,
        "StopTask",
        setup.driver().stop_task(StopTaskRequest {
            task_id: task.id(),
            timeout: Some(duration(10.0)),
            signal: "SIGTERM".into(),
        }),
    )
    .await
    .expect("StopTask");
    assert!(started.elapsed() < Duration::from_secs(3));
    let result = setup.clients.wait(&task.id(), 5).await;
    assert_eq!((result.signal, result.exit_code), (9, 137));
}

#[tokio::test]
async fn invisible_tasks_variant_hides_the_env_from_proc_but_not_from_the_script() {
    let scratch = Scratch::new();
    let args = ["--variant", "invisible-tasks"];
    let mut first = PluginProcess::launch(&scratch, &args);
    let mut clients = first.connect().await;
    let script = "echo \"[$NOMAD_TASK_NAME] [$DRIVER_EXEC_TEST]\"; \
                  /bin/sh -c 'echo \"[${NOMAD_TASK_NAME-unset}]\"'; \
                  echo \"[$0 $1]\"; echo ready; sleep 30";
    let task = scratch.task("t", &["/bin/sh", "-c", script, "zero", "one"]);
    let handle = clients.start(&task).await;
    assert_eq!(
        task.stdout.line(10),
        format!("[t] [{}]\n", scratch.marker())
    );
    assert_eq!(
        task.stdout.line(5),
        "[unset]\n",
        "a child inherited the env"
    );
    assert_eq!(task.stdout.line(5), "[zero one]\n");
    assert_eq!(task.stdout.line(5), "ready\n");

    assert_eq!(
        processes_with_env(MARKER_VAR, &scratch.marker()),
        Vec::<i32>::new(),
        "a process carries the task's env"
    );
    let status = clients
        .driver
        .inspect_task(InspectTaskRequest { task_id: task.id() })
        .await
        .unwrap()
        .into_inner();
    let supervisor: i32 = status.driver.unwrap().attributes["supervisor_pid"]
        .parse()
        .unwrap();
    for pid in [task_pid(&handle), supervisor] {
        let env = environ(pid);
        assert!(
            env.len() == 1 && env[0].starts_with("PATH="),
            "pid {pid}: {env:?}"
        );
    }
    let env_files: Vec<_> = std::fs::read_dir(scratch.state_dir())
        .unwrap()
        .flatten()
        .map(|dir| dir.path().join("task-env.sh"))
        .filter(|file| file.exists())
        .collect();
    assert_eq!(env_files.len(), 1);
    let mode = std::fs::metadata(&env_files[0]).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );

    // A restarted plugin recovers the task, and stops and destroys it as usual.
    first.kill_group();
    let second = PluginProcess::launch(&scratch, &args);
    let mut clients = second.connect().await;
    clients
        .driver
        .recover_task(RecoverTaskRequest {
            task_id: String::new(),
            handle: Some(handle),
        })
        .await
        .expect("RecoverTask");
    within(
        10,
        "StopTask",
        clients.driver.stop_task(StopTaskRequest {
            task_id: task.id(),
            timeout: Some(duration(5.0)),
            signal: "SIGTERM".into(),
        }),
    )
    .await
    .expect("StopTask");
    assert_eq!(clients.wait(&task.id(), 5).await.signal, 15);
    clients
        .driver
        .destroy_task(DestroyTaskRequest {
            task_id: task.id(),
            force: true,
        })
        .await
        .expect("DestroyTask");
    assert!(!env_files[0].exists(), "the env file outlived the task");

    // Other commands run with PATH only; exit codes come through.
    let task = scratch.task("env", &["env"]);
    clients.start(&task).await;
    let output = task.stdout.all(10);
    assert!(
        output.lines().count() == 1 && output.starts_with("PATH="),
        "{output:?}"
    );
    let task = scratch.task("code", &["/bin/sh", "-c", "exit 7"]);
    clients.start(&task).await;
    assert_eq!(clients.wait(&task.id(), 10).await.exit_code, 7);
}

/// The driver's Capabilities.
async fn capabilities(
    clients: &mut Clients,
) -> nomad_conform_proto::nomad::drivers::DriverCapabilities {
    clients
        .driver
        .capabilities(CapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities
        .unwrap()
}

/// StopTask (SIGTERM, then SIGKILL after 5 s) and DestroyTask, checking the signal.
async fn stop_and_destroy(clients: &mut Clients, task_id: &str) {
    within(
        10,
        "StopTask",
        clients.driver.stop_task(StopTaskRequest {
            task_id: task_id.to_string(),
            timeout: Some(duration(5.0)),
            signal: "SIGTERM".into(),
        }),
    )
    .await
    .expect("StopTask");
    assert_eq!(clients.wait(task_id, 5).await.signal, 15);
    clients
        .driver
        .destroy_task(DestroyTaskRequest {
            task_id: task_id.to_string(),
            force: true,
        })
        .await
        .expect("DestroyTask");
}

#[tokio::test]
async fn claims_chroot_fault_claims_chroot_but_tasks_see_the_host() {
    let mut setup = Setup::new(&["--fault", "claims-chroot"]).await;
    assert_eq!(
        capabilities(&mut setup.clients).await.fs_isolation,
        FsIsolation::Chroot as i32
    );
    let task = setup.scratch.task("t", &["/bin/sh", "-c", "pwd"]);
    setup.clients.start(&task).await;
    assert_eq!(
        task.stdout.all(10),
        format!("{}\n", task.task_dir.display())
    );
}

#[tokio::test]
async fn chroot_variant_runs_tasks_and_execs_in_the_task_directory() {
    let mut setup = Setup::new(&["--variant", "chroot"]).await;
    let caps = capabilities(&mut setup.clients).await;
    assert_eq!(caps.fs_isolation, FsIsolation::Chroot as i32);
    assert!(!caps.dynamic_workload_users);

    let host = setup.scratch.marker();
    let script = format!(
        "pwd; echo \"[$NOMAD_TASK_DIR]\"; echo /*; \
         test -c /dev/null && echo dev; test -r /proc/self/stat && echo proc; \
         test -e {host} || echo sealed; echo made > /local/from-task; echo ready; \
         exec sleep 30"
    );
    let mut task = setup.scratch.task("t", &["/bin/sh", "-c", &script]);
    // What the client gives a chroot task.
    task.config
        .env
        .insert("NOMAD_TASK_DIR".into(), "/local".into());
    minimal_chroot(&task.task_dir, &["sh", "sleep"]);
    setup.clients.start(&task).await;
    let lines: Vec<String> = (0..7).map(|_| task.stdout.line(10)).collect();
    assert_eq!(lines[0], "/\n");
    assert_eq!(lines[1], "[/local]\n");
    let root: Vec<&str> = lines[2].split_whitespace().collect();
    for entry in [
        "/bin", "/dev", "/local", "/proc", "/secrets", "/tmp", "/usr",
    ] {
        assert!(root.contains(&entry), "{entry} missing from / {root:?}");
    }
    assert_eq!(lines[3..], ["dev\n", "proc\n", "sealed\n", "ready\n"]);
    assert_eq!(
        std::fs::read_to_string(task.task_dir.join("local/from-task")).unwrap(),
        "made\n"
    );
    // The driver's mounts stay in the task's namespace.
    assert_eq!(mounts_under(setup.scratch.path()), Vec::<String>::new());

    let check = format!("pwd; read x < /local/from-task; echo $x; test -e {host} || echo sealed");
    let (stdout, stderr, code) = exec_script(&mut setup.clients, &task.id(), &check).await;
    assert_eq!(
        (stdout.as_str(), code),
        ("/\nmade\nsealed\n", 0),
        "{stderr}"
    );
    let (stdout, code) =
        exec_stream_script(&mut setup.clients, &task.id(), "pwd; echo /*", true).await;
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("/\r\n") && stdout.contains("/local"),
        "{stdout:?}"
    );
    let (stdout, code) = exec_stream_script(
        &mut setup.clients,
        &task.id(),
        "test -e /proc/1 && pwd",
        false,
    )
    .await;
    assert_eq!((stdout.as_str(), code), ("/\n", 0));

    stop_and_destroy(&mut setup.clients, &task.id()).await;
    assert_eq!(mounts_under(setup.scratch.path()), Vec::<String>::new());
    // A task whose root lacks its command fails to start, as argv[0] is looked up inside.
    let task = setup.scratch.task("bare", &["/bin/sh", "-c", "true"]);
    let status = setup
        .driver()
        .start_task(task.start_request())
        .await
        .expect_err("no /bin/sh in the task directory");
    assert!(status.message().contains("/bin/sh"), "{status:?}");
}

#[tokio::test]
async fn image_variant_builds_the_root_and_survives_a_plugin_restart() {
    let scratch = Scratch::new();
    let args = ["--variant", "image"];
    let mut first = PluginProcess::launch(&scratch, &args);
    let mut clients = first.connect().await;
    assert_eq!(
        capabilities(&mut clients).await.fs_isolation,
        FsIsolation::Image as i32
    );

    let host_tmp_file = format!("/tmp/driver-exec-image-{}", std::process::id());
    let script = format!(
        "pwd; echo /*; echo \"$PATH\"; (: > /usr/.driver-exec-test) 2>/dev/null || echo ro; (: >> /etc/hosts) 2>/dev/null || echo ro; \
         echo made > /local/from-task; echo tmp > {host_tmp_file}; test -d /alloc/logs && echo alloc; \
         test -c /dev/null && echo dev; test -r /proc/self/stat && echo proc; echo ready; \
         exec sleep 30"
    );
    let mut task = scratch.task("t", &["/bin/sh", "-c", &script]);
    // Nomad gives image drivers no agent environment, so no PATH.
    task.config.env.remove("PATH");
    let handle = clients.start(&task).await;
    let mut expected: Vec<&str> = ["bin", "etc", "lib", "lib64", "sbin", "usr"]
        .into_iter()
        .filter(|name| std::fs::symlink_metadata(Path::new("/").join(name)).is_ok())
        .collect();
    expected.extend(["alloc", "dev", "local", "proc", "secrets", "tmp"]);
    expected.sort();
    let expected: Vec<String> = expected.iter().map(|name| format!("/{name}")).collect();
    assert_eq!(task.stdout.line(10), "/\n");
    assert_eq!(task.stdout.line(5), format!("{}\n", expected.join(" ")));
    assert!(task.stdout.line(5).contains("/usr/bin"), "PATH");
    for line in ["ro\n", "ro\n", "alloc\n", "dev\n", "proc\n", "ready\n"] {
        assert_eq!(task.stdout.line(5), line);
    }
    assert_eq!(
        std::fs::read_to_string(task.task_dir.join("local/from-task")).unwrap(),
        "made\n"
    );
    assert!(!Path::new(&host_tmp_file).exists(), "/tmp is the host's");
    assert_eq!(mounts_under(scratch.path()), Vec::<String>::new());
    let rootfs: Vec<PathBuf> = std::fs::read_dir(scratch.state_dir())
        .unwrap()
        .flatten()
        .map(|dir| dir.path().join("rootfs"))
        .filter(|dir| dir.is_dir())
        .collect();
    assert_eq!(rootfs.len(), 1);
    assert_eq!(
        std::fs::read_dir(&rootfs[0]).unwrap().count(),
        0,
        "rootfs on the host"
    );

    // A restarted plugin recovers the task; execs still enter its root.
    first.kill_group();
    let second = PluginProcess::launch(&scratch, &args);
    let mut clients = second.connect().await;
    clients
        .driver
        .recover_task(RecoverTaskRequest {
            task_id: String::new(),
            handle: Some(handle),
        })
        .await
        .expect("RecoverTask");
    let check = format!("pwd; cat /local/from-task; cat {host_tmp_file}; id -u");
    let (stdout, stderr, code) = exec_script(&mut clients, &task.id(), &check).await;
    assert_eq!(
        (stdout.as_str(), code),
        ("/\nmade\ntmp\n0\n", 0),
        "{stderr}"
    );
    let (stdout, code) = exec_stream_script(&mut clients, &task.id(), "echo /*", true).await;
    assert_eq!(
        (stdout.as_str(), code),
        (format!("{}\r\n", expected.join(" ")).as_str(), 0)
    );
    stop_and_destroy(&mut clients, &task.id()).await;
    assert!(!rootfs[0].exists(), "rootfs outlived the task");
    assert_eq!(mounts_under(scratch.path()), Vec::<String>::new());

    // Exit codes come through.
    let task = scratch.task("code", &["/bin/sh", "-c", "exit 7"]);
    clients.start(&task).await;
    assert_eq!(clients.wait(&task.id(), 10).await.exit_code, 7);
}

#[tokio::test]
async fn dynamic_users_variant_refuses_tasks_without_user_or_cgroup() {
    let cgroup = TestCgroup::new();
    let mut setup = Setup::new(&["--variant", "dynamic-users"]).await;
    assert!(
        capabilities(&mut setup.clients)
            .await
            .dynamic_workload_users
    );
    let cgroup_path = cgroup.path.display().to_string();
    let missing = setup.scratch.path().join("no-cgroup").display().to_string();
    for (user, path, error) in [
        (
            "",
            cgroup_path.as_str(),
            "user must be set: this driver runs every task as a dynamic workload user",
        ),
        (
            "alice",
            cgroup_path.as_str(),
            "is not a dynamic workload user",
        ),
        ("nomad-80123", "", "cgroup path \"\" does not exist"),
        ("nomad-80123", missing.as_str(), "does not exist"),
    ] {
        let mut task = setup.scratch.task("t", &["/bin/true"]);
        set_user(&mut task, user, path);
        let status = setup
            .driver()
            .start_task(task.start_request())
            .await
            .expect_err("refused");
        assert_eq!(status.code(), Code::Unknown, "{status:?}");
        assert!(
            status.message().contains(error),
            "{user:?} {path:?}: {status:?}"
        );
        assert!(status.details().is_empty(), "a plain error");
    }
}

fn set_user(task: &mut TaskFixture, user: &str, cgroup: &str) {
    use nomad_conform_proto::nomad::drivers::{LinuxResources, Resources};
    task.config.user = user.to_string();
    task.config.resources = Some(Resources {
        linux_resources: Some(LinuxResources {
            cpuset_cgroup: cgroup.to_string(),
            ..Default::default()
        }),
        ..Default::default()
    });
}

#[tokio::test]
async fn dynamic_users_variant_runs_tasks_and_execs_as_the_user_in_the_cgroup() {
    let cgroup = TestCgroup::new();
    let mut setup = Setup::new(&["--variant", "dynamic-users"]).await;
    let mut task = setup.scratch.task(
        "t",
        &[
            "/bin/sh",
            "-c",
            "id -u; id -g; id -G; echo ready; exec sleep 30",
        ],
    );
    set_user(&mut task, "nomad-80123", &cgroup.path.display().to_string());
    let handle = setup.clients.start(&task).await;
    for line in ["80123\n", "80123\n", "80123\n", "ready\n"] {
        assert_eq!(task.stdout.line(10), line);
    }
    let pid = task_pid(&handle);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["Uid:", "80123", "80123", "80123", "80123"]),
        "{status}"
    );
    if let Some(member) = cgroup.holds(pid) {
        assert!(member, "the task is not in its cgroup");
    } else {
        let written = std::fs::read_to_string(cgroup.path.join("cgroup.procs")).unwrap();
        assert_eq!(written, pid.to_string());
    }

    let (stdout, _, code) = exec_script(
        &mut setup.clients,
        &task.id(),
        "id -u; id -g; echo $$; sleep 0.2",
    )
    .await;
    assert_eq!(code, 0);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[..2], ["80123", "80123"], "{stdout:?}");
    let (stdout, code) = exec_stream_script(&mut setup.clients, &task.id(), "id -u", true).await;
    assert_eq!((stdout.as_str(), code), ("80123\r\n", 0));
    if cgroup.relative.is_some() {
        let (stdout, _, _) =
            exec_script(&mut setup.clients, &task.id(), "cat /proc/self/cgroup").await;
        let relative = cgroup.relative.clone().unwrap();
        assert!(
            stdout.lines().any(|l| l.ends_with(&format!(":{relative}"))),
            "the exec is not in the task's cgroup: {stdout}"
        );
    }
    stop_and_destroy(&mut setup.clients, &task.id()).await;
}

#[tokio::test]
async fn slow_start_variant_takes_its_time_but_refuses_bad_configs_at_once() {
    let mut setup = Setup::new(&["--variant", "slow-start"]).await;
    let config = cty_config(&[("args", Value::Nil), ("command", Value::Nil)]);
    let bad = setup.scratch.task_with_config("bad", config);
    let started = Instant::now();
    setup
        .driver()
        .start_task(bad.start_request())
        .await
        .expect_err("no command");
    assert!(started.elapsed() < Duration::from_secs(2));
    let task = setup.scratch.task("t", &["/bin/sh", "-c", "echo started"]);
    let start = setup.driver().start_task(task.start_request());
    assert!(
        tokio::time::timeout(Duration::from_millis(1500), start)
            .await
            .is_err(),
        "StartTask answered before its 35 s"
    );
    assert_eq!(task.stdout.try_line(0), None, "the task started early");
}

#[test]
fn isolation_variants_exclude_each_other_on_the_command_line() {
    let scratch = Scratch::new();
    for pair in [["chroot", "image"], ["invisible-tasks", "dynamic-users"]] {
        let options = LaunchOptions::new(&["--variant", pair[0], "--variant", pair[1]]);
        let child = PluginProcess::spawn(&scratch, options);
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{pair:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("exclude each other"), "{stderr}");
        assert!(output.stdout.is_empty(), "a handshake: {:?}", output.stdout);
    }
}

#[tokio::test]
async fn image_and_dynamic_users_variants_combine() {
    let cgroup = TestCgroup::new();
    let mut setup = Setup::new(&["--variant", "image", "--variant", "dynamic-users"]).await;
    let caps = capabilities(&mut setup.clients).await;
    assert_eq!(caps.fs_isolation, FsIsolation::Image as i32);
    assert!(caps.dynamic_workload_users);
    let script = "pwd; id -u; test -d /local && echo local; echo ready; exec sleep 30";
    let mut task = setup.scratch.task("t", &["/bin/sh", "-c", script]);
    set_user(&mut task, "nomad-80124", &cgroup.path.display().to_string());
    let handle = setup.clients.start(&task).await;
    for line in ["/\n", "80124\n", "local\n", "ready\n"] {
        assert_eq!(task.stdout.line(10), line);
    }
    assert_ne!(cgroup.holds(task_pid(&handle)), Some(false));
    let (stdout, stderr, code) =
        exec_script(&mut setup.clients, &task.id(), "pwd; id -u; id -G").await;
    assert_eq!(
        (stdout.as_str(), code),
        ("/\n80124\n80124\n", 0),
        "{stderr}"
    );
    stop_and_destroy(&mut setup.clients, &task.id()).await;
}
