//! The go-plugin host (`plugins::driver`) against a fake driver plugin: this test binary
//! re-executed as a plugin (see `fake.rs`), launched through `sh` so that its handshake goes
//! to the launcher's stdout while libtest's own output goes to /dev/null.

mod fake;

use std::time::{Duration, Instant};

use nomad_conform::plugins::driver::{
    self, HostTimings, LaunchError, LaunchSpec, Level, SideStream, StreamEnd, drivers,
};
use nomad_conform::process::group_members;
use nomad_conform_reports::model::{ExitStatus, Request, Response};

/// The re-executed binary's entry: runs the fake plugin when asked to, else does nothing.
#[test]
fn fake_plugin_entry() {
    if let Ok(mode) = std::env::var(fake::MODE_VAR) {
        fake::run(&mode);
    }
}

fn spec(mode: &str, dir: &std::path::Path) -> LaunchSpec {
    let exe = std::env::current_exe().expect("the test binary");
    let mut spec = LaunchSpec::new(
        "/bin/sh",
        vec![
            "-c".into(),
            r#"exec "$0" fake_plugin_entry --exact --nocapture --test-threads=1 -q 3>&1 1>/dev/null"#.into(),
            exe.display().to_string(),
        ],
    );
    spec.extra_env = vec![
        (fake::MODE_VAR.into(), mode.into()),
        (fake::DIR_VAR.into(), dir.display().to_string()),
    ];
    spec.start_timeout = Duration::from_secs(5);
    spec
}

fn timings() -> HostTimings {
    HostTimings {
        connect: Duration::from_secs(2),
        rpc: Duration::from_secs(2),
        task_call: Duration::from_secs(5),
        driver_shutdown: Duration::from_secs(2),
        kill_grace: Duration::from_secs(2),
    }
}

#[tokio::test]
async fn launch_connect_call_stream_reattach_and_shut_down() {
    let dir = tempfile::tempdir().unwrap();
    let process = driver::launch(&spec("serve", dir.path()))
        .await
        .expect("launches");
    let pid = process.pid();
    assert!(pid > 0 && process.is_alive());
    let hs = &process.handshake;
    assert!(hs.acceptable(), "{hs:?}");
    assert_eq!(hs.fields.len(), 6);
    assert_eq!(hs.server_cert.as_deref(), Some(""));
    assert!(process.handshake_after() < Duration::from_secs(5));

    // stderr as the host parses it (and the env the plugin saw, which it logged).
    tokio::time::sleep(Duration::from_millis(50)).await;
    let logs = process.logs();
    let json = logs.iter().find(|l| l.json).expect("a JSON line");
    assert_eq!(
        (json.level, json.message.as_str()),
        (Level::Debug, "fake starting")
    );
    assert_eq!(json.fields["versions"], "2");
    assert_eq!(json.fields["ports"], "10000-25000");
    assert!(logs.iter().any(|l| !l.json && l.level == Level::Info));

    let client = driver::connect(hs, Duration::from_secs(2))
        .await
        .expect("connects");
    let (broker, stdio) = client.wait_side_streams(Duration::from_secs(2)).await;
    assert_eq!(broker.code(), Some("UNIMPLEMENTED"), "{broker:?}");
    assert_eq!(stdio.code(), Some("UNIMPLEMENTED"), "{stdio:?}");
    assert!(stdio.tolerated_for_stdio());
    assert_eq!(client.facts().authority, "unused");

    let (rpc, info) = client.plugin_info(Duration::from_secs(2)).await;
    assert!(rpc.ok(), "{}", rpc.summary());
    assert_eq!(info.unwrap().name, "fake");
    let ev = rpc.event(7, Some(process.spec()));
    assert_eq!(ev.started_ms, 7);
    assert!(matches!(&ev.request, Request::Grpc { method, .. }
        if method == "/hashicorp.nomad.plugins.base.proto.BasePlugin/PluginInfo"));
    assert!(
        matches!(&ev.response, Response::Grpc { code, response: Some(r), .. }
        if code == "OK" && r["name"] == "fake")
    );
    assert!(ev.reproduce.unwrap().contains("NOMAD_PLUGIN_MAGIC_COOKIE="));

    let (init, _) = client.init(Duration::from_secs(2)).await;
    assert_eq!(init.code_name(), "UNIMPLEMENTED");
    let (health, resp) = client.health_check(Duration::from_secs(2)).await;
    assert!(health.ok() && resp.unwrap().status == 1);

    // StartTask: a recoverable failure, then a success; WaitTask.
    let task = |id: &str| drivers::TaskConfig {
        id: id.into(),
        msgpack_driver_config: vec![0x80],
        ..Default::default()
    };
    let (failed, _) = client
        .start_task(task("a/t/fail"), Duration::from_secs(2))
        .await;
    assert_eq!(failed.code_name(), "FAILED_PRECONDITION");
    assert_eq!(failed.recoverable(), Some(true));
    // A msgpack payload is shown decoded, beside its base64.
    assert_eq!(
        failed.request["task"]["msgpack_driver_config"],
        serde_json::json!({"msgpack": {}, "base64": "gA=="})
    );
    let (started, resp) = client
        .start_task(task("a/t/ok"), Duration::from_secs(2))
        .await;
    assert!(started.ok(), "{}", started.summary());
    let handle = resp.unwrap().handle.unwrap();
    assert_eq!(handle.config.unwrap().id, "a/t/ok");
    let state = &started.response.as_ref().unwrap()["handle"]["driver_state"];
    assert!(
        state.get("msgpack").is_some() || state.get("hex").is_some(),
        "{state}"
    );
    let (waited, resp) = client.wait_task("a/t/ok", Duration::from_secs(2)).await;
    assert!(waited.ok() && waited.duration >= Duration::from_millis(90));
    assert_eq!(resp.unwrap().result.unwrap().exit_code, 3);
    let (short, _) = client.wait_task("a/t/ok", Duration::from_millis(20)).await;
    assert!(short.timed_out && short.code_name() == "DEADLINE_EXCEEDED");

    // Fingerprint: two messages in order, the stream stays open until stopped.
    let fp = client.fingerprint(Duration::from_secs(2), 16).await;
    assert!(fp.first_message_after().is_some());
    assert!(fp.wait_for_count(2, Duration::from_secs(2)).await);
    let health: Vec<i32> = fp.messages().iter().map(|a| a.message.health).collect();
    assert_eq!(health, [1, 2]);
    assert!(fp.messages()[1].at >= Duration::from_millis(90));
    assert_eq!(fp.end(), StreamEnd::Open);
    fp.stop();
    assert_eq!(fp.end(), StreamEnd::StoppedByHarness);
    let ev = fp.event(0, None, 8);
    assert!(
        matches!(&ev.response, Response::Grpc { code, response: Some(r), .. }
        if code == "CANCELLED" && r["received"] == 2)
    );

    // Streams the fake lacks end at once with their status; the exec session records what
    // it sent (setup first).
    let events = client.task_events(Duration::from_secs(1), 8).await;
    assert!(matches!(events.end(), StreamEnd::Status { code, .. } if code == "UNIMPLEMENTED"));
    let exec = client
        .exec_streaming(
            drivers::exec_task_streaming_request::Setup {
                task_id: "a/t/ok".into(),
                command: vec!["/bin/true".into()],
                tty: false,
            },
            Duration::from_secs(1),
            8,
        )
        .await;
    let end = exec.stream.wait_end(Duration::from_secs(1)).await;
    assert!(
        matches!(&end, StreamEnd::Status { code, .. } if code == "UNIMPLEMENTED"),
        "{end:?}"
    );
    assert_eq!(exec.sent()[0].1["setup"]["command"][0], "/bin/true");
    assert_eq!(exec.output().exited, None);

    // Reattach: the old connection dies with the "agent", the plugin lives on.
    client.close();
    let (dead, _) = client.plugin_info(Duration::from_secs(1)).await;
    assert!(!dead.ok(), "a closed client still answers");
    assert!(process.is_alive());
    let re = driver::reattach(hs, &timings()).await.expect("reattaches");
    assert!(re.plugin_info.ok());
    assert_eq!(re.api.unwrap().chosen.as_deref(), Some("0.1.0"));

    // Shutdown as Nomad does it: the plugin exits on its own, its child is killed with the group.
    let report = driver::shutdown_like_nomad(&re.client, &process, &timings()).await;
    assert!(report.driver_shutdown.as_ref().unwrap().ok());
    assert!(report.driver_shutdown_accepted());
    assert!(report.kill.controller_shutdown.as_ref().unwrap().ok());
    assert!(
        report.kill.exited_on_its_own && !report.kill.sigkill_sent,
        "{}",
        report.kill
    );
    assert_eq!(report.kill.status, Some(ExitStatus::Exited { code: 0 }));
    assert!(
        report
            .kill
            .outlived_plugin
            .iter()
            .any(|p| p.cmdline.contains("sleep")),
        "{:?}",
        report.kill.outlived_plugin
    );
    assert!(report.kill.survivors.is_empty());
    assert!(!process.is_alive() && group_members(pid).is_empty());
}

#[tokio::test]
async fn the_load_sequence_helpers() {
    let dir = tempfile::tempdir().unwrap();
    let fp = driver::fingerprint_launch(&spec("serve", dir.path()), &timings())
        .await
        .expect("fingerprint launch");
    let a = fp.assessment.as_ref().unwrap();
    assert_eq!(
        (a.stop.as_deref(), a.api.chosen.as_deref()),
        (None, Some("0.1.0"))
    );
    assert!(fp.config_schema.as_ref().unwrap().ok());
    assert_eq!(fp.records().len(), 3);
    assert!(fp.kill.exited_on_its_own && !fp.process.is_alive());

    let dir = tempfile::tempdir().unwrap();
    let v = driver::validation_launch(&spec("serve", dir.path()), vec![0x80], "v0.1.0", &timings())
        .await
        .expect("validation launch");
    // The first SetConfig fails, so the loader's Dispense fails and there is no second.
    assert_eq!(v.set_configs.len(), 1);
    assert_eq!(
        v.set_configs[0].code_name(),
        "UNKNOWN",
        "the fake wants the echoed 0.1.0"
    );
    assert!(v.set_configs[0].request.get("nomad_config").is_none());

    let dir = tempfile::tempdir().unwrap();
    let inst = driver::instance_launch(
        &spec("serve", dir.path()),
        vec![0x80],
        "0.1.0",
        driver::nomad_config(),
        &timings(),
    )
    .await
    .expect("instance launch");
    assert!(inst.running(), "{:?}", inst.failure);
    assert_eq!(
        inst.set_config.request["nomad_config"]["driver"]["client_min_port"],
        14000
    );
    assert_eq!(inst.init.as_ref().unwrap().code_name(), "UNIMPLEMENTED");
    let report = driver::shutdown_like_nomad(&inst.client, &inst.process, &timings()).await;
    assert!(report.kill.survivors.is_empty() && !inst.process.is_alive());
}

#[tokio::test]
async fn a_plugin_that_does_not_exit_gets_sigkill_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let process = driver::launch(&spec("stubborn", dir.path())).await.unwrap();
    let client = driver::connect(&process.handshake, Duration::from_secs(2))
        .await
        .unwrap();
    let t = Instant::now();
    let kill = driver::kill_like_go_plugin(
        &client,
        &process,
        Duration::from_secs(2),
        Duration::from_millis(300),
    )
    .await;
    assert!(kill.controller_shutdown.unwrap().ok());
    assert!(kill.sigkill_sent && !kill.exited_on_its_own);
    assert_eq!(kill.status, Some(ExitStatus::Signaled { signal: 9 }));
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert!(process.killed_by_harness() && group_members(process.pid()).is_empty());
}

#[tokio::test]
async fn a_plugin_without_the_cookie_exits_before_the_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("serve", dir.path());
    s.send_magic_cookie = false;
    let err = driver::launch(&s).await.expect_err("no cookie, no plugin");
    let LaunchError::ExitedBeforeHandshake { status, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(*status, ExitStatus::Exited { code: 1 });
    let f = err.failure();
    assert!(f.stderr_tail.contains("This binary is a plugin"), "{err}");
    assert!(
        f.command.contains("env -u NOMAD_PLUGIN_MAGIC_COOKIE"),
        "{}",
        f.command
    );
    assert!(
        err.to_string()
            .starts_with("failed to launch the plugin: it exited")
    );
    assert!(group_members(f.pid).is_empty());
}

#[tokio::test]
async fn a_silent_plugin_times_out_and_its_group_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("silent", dir.path());
    s.start_timeout = Duration::from_millis(500);
    let t = Instant::now();
    let err = driver::launch(&s).await.expect_err("never prints");
    assert!(t.elapsed() < Duration::from_secs(3));
    let LaunchError::NoHandshake { survivors, .. } = &err else {
        panic!("{err}");
    };
    assert!(survivors.is_empty());
    let f = err.failure();
    assert!(f.pid > 0 && group_members(f.pid).is_empty());
    assert!(
        f.logs.iter().any(|l| l.message == "[INFO] a plain line"),
        "{err}"
    );
}

#[tokio::test]
async fn a_first_line_that_is_no_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let err = driver::launch(&spec("garbage", dir.path()))
        .await
        .expect_err("garbage");
    let LaunchError::Unrecognized {
        line, handshake, ..
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!(line, "hello from a plugin");
    assert_eq!(handshake.violations[0].rule(), "too_few_fields");
    assert!(group_members(err.failure().pid).is_empty());
}

#[tokio::test]
async fn dropping_a_plugin_process_kills_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let process = driver::launch(&spec("serve", dir.path())).await.unwrap();
    let pid = process.pid();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(group_members(pid).len() >= 2, "the plugin and its child");
    drop(process);
    let until = Instant::now() + Duration::from_secs(2);
    while !group_members(pid).is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(group_members(pid).is_empty());
}

#[test]
fn side_stream_states() {
    assert!(!SideStream::Pending.answered());
    let unavailable = SideStream::Failed {
        code: "UNAVAILABLE".into(),
        message: String::new(),
    };
    assert!(unavailable.tolerated_for_stdio());
    let internal = SideStream::Failed {
        code: "INTERNAL".into(),
        message: String::new(),
    };
    assert!(!internal.tolerated_for_stdio());
}
