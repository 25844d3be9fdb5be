//! Server streams (Fingerprint, TaskEvents, TaskStats, and the responses of
//! ExecTaskStreaming): a background task collects every message with its arrival time into a
//! bounded buffer the steps read while they go on, until the plugin ends the stream or the
//! harness stops it (which cancels the call, as Nomad cancels its context). Nomad opens one
//! Fingerprint and one TaskEvents stream per driver instance and expects the first
//! fingerprint at once (C.2); how long to wait for a first message is the caller's deadline.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nomad_conform_reports::model::{OpEvent, Request, Response};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::Status;

use super::call::StatusDetails;
use super::launch_spec::LaunchSpec;
use super::protocol::Service;
use super::protojson;
use super::reproduce::reproduce_script;
use crate::plugins::grpc::code_name;

/// How a stream stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum StreamEnd {
    /// Still open.
    Open,
    /// The plugin ended it with OK.
    Ok,
    /// The plugin (or the connection) ended it with a status; or the call was refused.
    Status {
        code: String,
        message: String,
        details: Option<StatusDetails>,
    },
    /// The harness stopped it while it was open.
    StoppedByHarness,
}

/// A message and when it arrived, since the stream was opened.
#[derive(Clone, Debug, PartialEq)]
pub struct Arrived<M> {
    pub at: Duration,
    pub message: M,
}

#[derive(Debug)]
struct State<M> {
    head: Vec<Arrived<M>>,
    tail: VecDeque<Arrived<M>>,
    half: usize,
    received: u64,
    end: StreamEnd,
    ended_after: Option<Duration>,
    answered_after: Option<Duration>,
}

impl<M> State<M> {
    fn push(&mut self, a: Arrived<M>) {
        self.received += 1;
        if self.head.len() < self.half {
            self.head.push(a);
        } else {
            if self.tail.len() == self.half {
                self.tail.pop_front();
            }
            self.tail.push_back(a);
        }
    }
}

/// A stream being collected. Dropping it stops the stream.
#[derive(Debug)]
pub struct StreamHandle<M> {
    pub service: Service,
    pub method: String,
    /// The request, record form.
    pub request: Value,
    pub opened: Instant,
    /// How long [`StreamHandle::wait_first`] was given, for the record.
    first_within: Mutex<Option<Duration>>,
    state: Arc<Mutex<State<M>>>,
    changed: watch::Receiver<u64>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl<M: Send + 'static> StreamHandle<M> {
    /// Start collecting the stream `call` opens; keep at most `limit` messages (the first
    /// half and the most recent half).
    pub fn spawn<Fut>(
        service: Service,
        method: &str,
        request: Value,
        limit: usize,
        call: Fut,
    ) -> StreamHandle<M>
    where
        Fut: Future<Output = Result<tonic::Response<tonic::Streaming<M>>, Status>> + Send + 'static,
    {
        let opened = Instant::now();
        let state = Arc::new(Mutex::new(State {
            head: Vec::new(),
            tail: VecDeque::new(),
            half: (limit / 2).max(1),
            received: 0,
            end: StreamEnd::Open,
            ended_after: None,
            answered_after: None,
        }));
        let (tx, changed) = watch::channel(0u64);
        let st = state.clone();
        let task = tokio::spawn(async move {
            let update = |f: &mut dyn FnMut(&mut State<M>)| {
                f(&mut st.lock().unwrap_or_else(|p| p.into_inner()));
                tx.send_modify(|n| *n += 1);
            };
            let ended = |s: &mut State<M>, end: StreamEnd| {
                s.end = end;
                s.ended_after = Some(opened.elapsed());
            };
            let mut stream = match call.await {
                Ok(r) => r.into_inner(),
                Err(status) => {
                    update(&mut |s| ended(s, status_end(&status)));
                    return;
                }
            };
            update(&mut |s| s.answered_after = Some(opened.elapsed()));
            loop {
                match stream.message().await {
                    Ok(Some(m)) => {
                        let mut m = Some(m);
                        update(&mut |s| {
                            if let Some(message) = m.take() {
                                s.push(Arrived {
                                    at: opened.elapsed(),
                                    message,
                                })
                            }
                        });
                    }
                    Ok(None) => return update(&mut |s| ended(s, StreamEnd::Ok)),
                    Err(status) => return update(&mut |s| ended(s, status_end(&status))),
                }
            }
        });
        StreamHandle {
            service,
            method: method.to_owned(),
            request,
            opened,
            first_within: Mutex::new(None),
            state,
            changed,
            task: Mutex::new(Some(task)),
        }
    }
}

fn status_end(status: &Status) -> StreamEnd {
    StreamEnd::Status {
        code: code_name(status.code()).into(),
        message: status.message().into(),
        details: StatusDetails::decode(status.details()),
    }
}

impl<M> StreamHandle<M> {
    fn state(&self) -> std::sync::MutexGuard<'_, State<M>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait until `pred` holds for (messages received, end), at most `within`.
    async fn wait_until(&self, within: Duration, pred: impl Fn(u64, &StreamEnd) -> bool) -> bool {
        let mut rx = self.changed.clone();
        let check = || {
            let s = self.state();
            pred(s.received, &s.end)
        };
        let _ = tokio::time::timeout(within, async {
            while !check() {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        check()
    }

    /// Wait at most `within` for the first message; whether one came. (A stream that ends
    /// without a message ends the wait too.)
    pub async fn wait_first(&self, within: Duration) -> bool {
        *self.first_within.lock().unwrap_or_else(|p| p.into_inner()) = Some(within);
        self.wait_until(within, |n, end| n >= 1 || *end != StreamEnd::Open)
            .await;
        self.received() >= 1
    }

    /// Wait at most `within` until `n` messages in all have arrived; whether they did.
    pub async fn wait_for_count(&self, n: u64, within: Duration) -> bool {
        self.wait_until(within, |got, end| got >= n || *end != StreamEnd::Open)
            .await;
        self.received() >= n
    }

    /// Wait at most `within` for the stream to end; how it stands then.
    pub async fn wait_end(&self, within: Duration) -> StreamEnd {
        self.wait_until(within, |_, end| *end != StreamEnd::Open)
            .await;
        self.end()
    }

    /// Messages received in all (kept or not).
    pub fn received(&self) -> u64 {
        self.state().received
    }

    pub fn end(&self) -> StreamEnd {
        self.state().end.clone()
    }

    /// When the plugin answered the call (response headers), since it was opened.
    pub fn answered_after(&self) -> Option<Duration> {
        self.state().answered_after
    }

    /// When the first message arrived, since the stream was opened.
    pub fn first_message_after(&self) -> Option<Duration> {
        self.state().head.first().map(|a| a.at)
    }

    /// Stop collecting and cancel the call (a no-op once the stream ended).
    pub fn stop(&self) {
        if let Some(t) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            t.abort();
        }
        let mut s = self.state();
        if s.end == StreamEnd::Open {
            s.end = StreamEnd::StoppedByHarness;
            s.ended_after = Some(self.opened.elapsed());
        }
    }
}

impl<M: Clone> StreamHandle<M> {
    /// The kept messages in order.
    pub fn messages(&self) -> Vec<Arrived<M>> {
        let s = self.state();
        s.head.iter().chain(s.tail.iter()).cloned().collect()
    }

    /// The most recent message.
    pub fn latest(&self) -> Option<Arrived<M>> {
        let s = self.state();
        s.tail.back().or(s.head.last()).cloned()
    }
}

impl<M: Serialize> StreamHandle<M> {
    /// The stream's record: the messages (at most `max`, first and last halves), counts,
    /// timings and how it ended.
    pub fn record(&self, max: usize) -> Value {
        let s = self.state();
        let kept: Vec<&Arrived<M>> = s.head.iter().chain(s.tail.iter()).collect();
        let half = (max / 2).max(1);
        let shown: Vec<Value> = kept
            .iter()
            .enumerate()
            .filter(|(i, _)| kept.len() <= max || *i < half || *i >= kept.len() - half)
            .map(|(_, a)| json!({"at_ms": a.at.as_millis() as u64, "message": protojson::record(&a.message)}))
            .collect();
        json!({
            "messages": shown,
            "received": s.received,
            "shown": shown.len(),
            "answered_after_ms": s.answered_after.map(|d| d.as_millis() as u64),
            "end": s.end,
        })
    }

    /// The stream as one [`OpEvent`]: its response lists the messages (at most `max`) and how
    /// it stands. The code is `OPEN` while the stream is open, `CANCELLED` once the harness
    /// stopped it, else the status that ended it.
    pub fn event(&self, offset_ms: u64, launch: Option<&LaunchSpec>, max: usize) -> OpEvent {
        let (code, message, duration) = {
            let s = self.state();
            let (code, message) = match &s.end {
                StreamEnd::Open => ("OPEN".to_owned(), "still open when recorded".to_owned()),
                StreamEnd::Ok => ("OK".to_owned(), String::new()),
                StreamEnd::StoppedByHarness => (
                    "CANCELLED".to_owned(),
                    "stopped by the harness while open".to_owned(),
                ),
                StreamEnd::Status { code, message, .. } => (code.clone(), message.clone()),
            };
            (
                code,
                message,
                s.ended_after.unwrap_or(self.opened.elapsed()),
            )
        };
        let first_within = *self.first_within.lock().unwrap_or_else(|p| p.into_inner());
        let mut notes = Vec::new();
        if let Some(w) = first_within
            && self.first_message_after().is_none_or(|a| a > w)
        {
            notes.push(format!(
                "no message within the first {}",
                crate::fmt_duration(w)
            ));
        }
        OpEvent {
            operation: self.method.clone(),
            started_ms: offset_ms,
            duration_ms: duration.as_secs_f64() * 1000.0,
            deadline_ms: first_within.map(|d| d.as_millis() as u64),
            request: Request::Grpc {
                method: self.service.path(&self.method),
                request: self.request.clone(),
            },
            response: Response::Grpc {
                code,
                message,
                response: Some(self.record(max)),
            },
            reproduce: launch.map(|l| {
                let req = protojson::protobuf_json(&self.request).to_string();
                reproduce_script(l, self.service, &self.method, &req)
            }),
            notes,
        }
    }
}

impl<M> Drop for StreamHandle<M> {
    fn drop(&mut self) {
        if let Some(t) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            t.abort();
        }
    }
}

pub(crate) async fn wait_first<M>(h: StreamHandle<M>, within: Duration) -> StreamHandle<M> {
    if !within.is_zero() {
        h.wait_first(within).await;
    }
    h
}
