//! RecoverTask: tasks outlive a plugin killed with SIGKILL, and a new plugin process finds
//! them again from their handles, whether they still run or exited meanwhile.

mod support;

use std::time::{Duration, SystemTime};

use nomad_conform_proto::nomad::drivers::{
    DestroyTaskRequest, InspectTaskRequest, RecoverTaskRequest, StopTaskRequest, TaskHandle,
    TaskState, TaskStatus,
};
use support::*;
use tonic::Code;

async fn recover(clients: &mut Clients, handle: &TaskHandle) -> Result<(), tonic::Status> {
    // Nomad leaves task_id empty: the handle's config carries the id.
    clients
        .driver
        .recover_task(RecoverTaskRequest {
            task_id: String::new(),
            handle: Some(handle.clone()),
        })
        .await
        .map(|_| ())
}

async fn inspect(clients: &mut Clients, id: &str) -> Result<TaskStatus, tonic::Status> {
    clients
        .driver
        .inspect_task(InspectTaskRequest {
            task_id: id.to_string(),
        })
        .await
        .map(|r| r.into_inner().task.expect("a status"))
}

fn driver_state_field(handle: &TaskHandle, name: &str) -> rmpv::Value {
    let state = rmpv::decode::read_value(&mut handle.driver_state.as_slice()).unwrap();
    state
        .as_map()
        .unwrap()
        .iter()
        .find(|(k, _)| k.as_str() == Some(name))
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("driver_state has no {name}"))
}

#[tokio::test]
async fn tasks_survive_a_killed_plugin_and_a_new_plugin_recovers_them() {
    let scratch = Scratch::new();
    let mut first = PluginProcess::launch(&scratch, &[]);
    let mut clients = first.connect().await;
    let quick = scratch.task("quick", &["/bin/sh", "-c", "sleep 0.3; exit 5"]);
    let slow = scratch.task("slow", &["/bin/sh", "-c", "echo ready; sleep 2; exit 7"]);
    let quick_handle = clients.start(&quick).await;
    let slow_handle = clients.start(&slow).await;
    assert_eq!(slow.stdout.line(10), "ready\n");
    let slow_started = inspect(&mut clients, &slow.id()).await.unwrap().started_at;

    first.kill_group();
    let slow_pid = driver_state_field(&slow_handle, "task_pid")
        .as_i64()
        .unwrap() as i32;
    assert!(is_alive(slow_pid), "the task died with the plugin");
    // The quick task exits while no plugin runs.
    let quick_status = driver_state_field(&quick_handle, "status_file");
    let quick_status = std::path::PathBuf::from(quick_status.as_str().unwrap());
    assert!(
        eventually(5, || quick_status.exists()),
        "no exit recorded at {}",
        quick_status.display()
    );

    let second = PluginProcess::launch(&scratch, &[]);
    let mut clients = second.connect().await;
    let unknown = inspect(&mut clients, &slow.id())
        .await
        .expect_err("not yet recovered");
    assert_eq!(unknown.code(), Code::Unknown);

    recover(&mut clients, &quick_handle)
        .await
        .expect("RecoverTask of the exited task");
    recover(&mut clients, &slow_handle)
        .await
        .expect("RecoverTask of the running task");
    recover(&mut clients, &slow_handle)
        .await
        .expect("RecoverTask again");

    let quick_status = inspect(&mut clients, &quick.id()).await.unwrap();
    assert_eq!(quick_status.state, TaskState::Exited as i32);
    assert_eq!(quick_status.result.unwrap().exit_code, 5);
    assert_eq!(clients.wait(&quick.id(), 2).await.exit_code, 5);

    let slow_status = inspect(&mut clients, &slow.id()).await.unwrap();
    assert_eq!(slow_status.state, TaskState::Running as i32);
    assert_eq!(slow_status.started_at, slow_started, "started_at changed");
    assert_eq!(slow_status.completed_at.unwrap().seconds, GO_ZERO_SECONDS);
    assert_eq!(clients.wait(&slow.id(), 10).await.exit_code, 7);
    let completed = inspect(&mut clients, &slow.id())
        .await
        .unwrap()
        .completed_at
        .unwrap();
    assert!(SystemTime::try_from(completed).unwrap() > SystemTime::now() - Duration::from_secs(5));
    assert_eq!(
        slow.stdout.all(5),
        "ready\n",
        "the FIFO closes when the task ends"
    );

    for id in [quick.id(), slow.id()] {
        clients
            .driver
            .destroy_task(DestroyTaskRequest {
                task_id: id,
                force: true,
            })
            .await
            .expect("DestroyTask of a recovered task");
    }
}

#[tokio::test]
async fn a_recovered_task_can_be_stopped() {
    let scratch = Scratch::new();
    let mut first = PluginProcess::launch(&scratch, &[]);
    let mut clients = first.connect().await;
    let task = scratch.task("sleeper", &["sleep", "30"]);
    let handle = clients.start(&task).await;
    first.kill_group();

    let second = PluginProcess::launch(&scratch, &[]);
    let mut clients = second.connect().await;
    recover(&mut clients, &handle).await.expect("RecoverTask");
    within(
        10,
        "StopTask",
        clients.driver.stop_task(StopTaskRequest {
            task_id: task.id(),
            timeout: Some(duration(2.0)),
            signal: "SIGTERM".into(),
        }),
    )
    .await
    .expect("StopTask of a recovered task");
    let result = clients.wait(&task.id(), 5).await;
    assert_eq!(result.signal, 15);
}

#[tokio::test]
async fn a_handle_whose_task_is_gone_without_a_trace_cannot_be_recovered() {
    let mut setup = Setup::new(&[]).await;
    let task = setup.scratch.task("ghost", &["/bin/true"]);
    let mut handle = setup.clients.start(&task).await;
    setup.clients.wait(&task.id(), 10).await;
    // A handle for a task whose status file is gone and whose supervisor does not run.
    let status_file = driver_state_field(&handle, "status_file");
    std::fs::remove_file(status_file.as_str().unwrap()).unwrap();
    let config = handle.config.as_mut().unwrap();
    config.id.push_str("-copy");
    let status = recover(&mut setup.clients, &handle)
        .await
        .expect_err("nothing to recover");
    assert_eq!(status.code(), Code::Unknown);
    let bad_state = TaskHandle {
        driver_state: b"not msgpack".to_vec(),
        ..handle
    };
    recover(&mut setup.clients, &bad_state)
        .await
        .expect_err("driver_state that is not ours");
}
