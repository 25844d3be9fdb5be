//! TaskStats: resource usage of a task's processes, every `collection_interval`, from `/proc`.
//!
//! This driver has no cgroup of its own, so it reports what `/proc/<pid>/stat` says about the
//! processes of the task's process group, summed (`agg_resource_usage`) and per process
//! (`resource_usage_by_pid`):
//! - cpu `total_ticks`: CPU time used so far (user + system), in clock ticks;
//! - cpu `user_mode`, `system_mode`, `percent`: the share of one CPU used since the previous
//!   sample, in percent (0 in the first sample);
//! - memory `rss`: resident set size in bytes.
//!
//! The stream sends its first sample at once and ends when the task exits.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use nomad_conform_proto::nomad::drivers::{
    CpuUsage, MemoryUsage, TaskResourceUsage, TaskStats, TaskStatsRequest, TaskStatsResponse,
    cpu_usage, memory_usage,
};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use crate::faults::Fault;
use crate::plugin::Plugin;
use crate::process::ProcStat;
use crate::rpc;
use crate::tasks::Task;

pub type StatsStream = Pin<Box<dyn Stream<Item = Result<TaskStatsResponse, Status>> + Send>>;

pub fn stream(plugin: &Plugin, request: TaskStatsRequest) -> Result<StatsStream, Status> {
    let task = plugin.task(&request.task_id)?;
    let interval = request
        .collection_interval
        .and_then(|d| Duration::try_from(d).ok())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| rpc::bad_request("TaskStats needs a positive collection_interval"))?;
    let once = plugin.faults.has(Fault::StatsOnce);
    let per_stream = plugin
        .variants
        .has(crate::variants::Variant::StatsPerStream);
    let never_ends = plugin.faults.has(Fault::StatsNeverEnds);

    let (sender, receiver) = mpsc::channel(4);
    tokio::spawn(async move {
        let mut sampler = Sampler::new();
        loop {
            if task.exit().is_some() && !never_ends {
                break; // Dropping the sender ends the stream.
            }
            let stats = sampler.sample(&task);
            if sender
                .send(Ok(TaskStatsResponse { stats: Some(stats) }))
                .await
                .is_err()
            {
                break; // The client went away.
            }
            if once {
                sender.closed().await;
                break;
            }
            if per_stream {
                break; // One message, then the stream ends.
            }
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = task.wait(), if !never_ends => {}
                _ = sender.closed() => break,
            }
        }
    });
    Ok(Box::pin(ReceiverStream::new(receiver)))
}

/// Turns successive `/proc` readings into usage, remembering the previous one.
struct Sampler {
    ticks_per_second: f64,
    page_size: u64,
    previous: Option<Reading>,
}

/// When the previous sample was taken, and each process's (user, system) ticks then.
struct Reading {
    at: Instant,
    ticks: HashMap<i32, (u64, u64)>,
}

impl Sampler {
    fn new() -> Sampler {
        let sysconf = |var| nix::unistd::sysconf(var).ok().flatten().unwrap_or(0);
        Sampler {
            ticks_per_second: match sysconf(nix::unistd::SysconfVar::CLK_TCK) {
                n if n > 0 => n as f64,
                _ => 100.0,
            },
            page_size: match sysconf(nix::unistd::SysconfVar::PAGE_SIZE) {
                n if n > 0 => n as u64,
                _ => 4096,
            },
            previous: None,
        }
    }

    fn sample(&mut self, task: &Arc<Task>) -> TaskStats {
        let now = Instant::now();
        let members = task.processes.members();
        let elapsed = self
            .previous
            .as_ref()
            .map(|previous| now.duration_since(previous.at).as_secs_f64());
        let before = self.previous.as_ref().map(|previous| &previous.ticks);

        let mut by_pid = HashMap::new();
        let mut total = Usage::default();
        for process in &members {
            let (user_before, system_before) = before
                .and_then(|b| b.get(&process.pid).copied())
                .unwrap_or((process.user_ticks, process.system_ticks));
            let usage = Usage {
                ticks: (process.user_ticks + process.system_ticks) as f64,
                user_percent: self.percent(process.user_ticks.saturating_sub(user_before), elapsed),
                system_percent: self
                    .percent(process.system_ticks.saturating_sub(system_before), elapsed),
                rss: process.rss_pages * self.page_size,
            };
            total.add(&usage);
            by_pid.insert(process.pid.to_string(), usage.to_proto());
        }
        self.previous = Some(Reading {
            at: now,
            ticks: ticks_by_pid(&members),
        });

        TaskStats {
            id: task.config.id.clone(),
            timestamp: Some(prost_types::Timestamp::from(SystemTime::now())),
            agg_resource_usage: Some(total.to_proto()),
            resource_usage_by_pid: by_pid,
        }
    }

    /// `ticks` of CPU time over `elapsed` seconds, as a percentage of one CPU.
    fn percent(&self, ticks: u64, elapsed: Option<f64>) -> f64 {
        match elapsed {
            Some(seconds) if seconds > 0.0 => {
                ticks as f64 / self.ticks_per_second / seconds * 100.0
            }
            _ => 0.0,
        }
    }
}

fn ticks_by_pid(members: &[ProcStat]) -> HashMap<i32, (u64, u64)> {
    members
        .iter()
        .map(|p| (p.pid, (p.user_ticks, p.system_ticks)))
        .collect()
}

#[derive(Default)]
struct Usage {
    ticks: f64,
    user_percent: f64,
    system_percent: f64,
    rss: u64,
}

impl Usage {
    fn add(&mut self, other: &Usage) {
        self.ticks += other.ticks;
        self.user_percent += other.user_percent;
        self.system_percent += other.system_percent;
        self.rss += other.rss;
    }

    fn to_proto(&self) -> TaskResourceUsage {
        TaskResourceUsage {
            cpu: Some(CpuUsage {
                system_mode: self.system_percent,
                user_mode: self.user_percent,
                total_ticks: self.ticks,
                percent: self.user_percent + self.system_percent,
                measured_fields: vec![
                    cpu_usage::Fields::SystemMode as i32,
                    cpu_usage::Fields::UserMode as i32,
                    cpu_usage::Fields::TotalTicks as i32,
                    cpu_usage::Fields::Percent as i32,
                ],
                ..Default::default()
            }),
            memory: Some(MemoryUsage {
                rss: self.rss,
                measured_fields: vec![memory_usage::Fields::Rss as i32],
                ..Default::default()
            }),
        }
    }
}
