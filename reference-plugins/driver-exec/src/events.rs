//! TaskEvents: driver-side happenings that Nomad shows among a task's events.
//!
//! Nomad opens one TaskEvents stream per driver instance and routes each event by
//! (`alloc_id`, `task_name`); an event without them is dropped with a warning. Events are
//! broadcast to every open stream; one that was not open when an event happened misses it.

use std::collections::HashMap;
use std::pin::Pin;

use nomad_conform_proto::nomad::drivers::{DriverTaskEvent, TaskConfig};
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::{Stream, StreamExt as _};
use tonic::Status;

use crate::faults::{Fault, Faults};
use crate::log;

/// Events kept for a stream that reads slowly; older ones are dropped for it.
const BACKLOG: usize = 256;

pub type EventStream = Pin<Box<dyn Stream<Item = Result<DriverTaskEvent, Status>> + Send>>;

#[derive(Clone)]
pub struct Events {
    sender: broadcast::Sender<DriverTaskEvent>,
    without_alloc_id: bool,
}

impl Events {
    pub fn new(faults: &Faults) -> Events {
        Events {
            sender: broadcast::channel(BACKLOG).0,
            without_alloc_id: faults.has(Fault::EventsNoAllocId),
        }
    }

    /// Publishes one event about `task`.
    pub fn emit(
        &self,
        task: &TaskConfig,
        message: impl Into<String>,
        annotations: &[(&str, String)],
    ) {
        let message = message.into();
        log::debug(
            "task event",
            &[("task_id", task.id.clone()), ("message", message.clone())],
        );
        let alloc_id = if self.without_alloc_id {
            String::new()
        } else {
            task.alloc_id.clone()
        };
        let event = DriverTaskEvent {
            task_id: task.id.clone(),
            alloc_id,
            task_name: task.name.clone(),
            timestamp: Some(prost_types::Timestamp::from(std::time::SystemTime::now())),
            message,
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<HashMap<_, _>>(),
        };
        // No open stream is no error.
        let _ = self.sender.send(event);
    }

    /// A TaskEvents stream: every event from now on, until the client goes away.
    pub fn subscribe(&self) -> EventStream {
        let events = BroadcastStream::new(self.sender.subscribe())
            // A stream that fell behind skips what it missed.
            .filter_map(|event| event.ok())
            .map(Ok);
        Box::pin(events)
    }
}
