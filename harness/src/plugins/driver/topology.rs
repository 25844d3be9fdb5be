//! The node's CPU topology as the Nomad client fingerprints it and hands it to drivers in
//! `SetConfig` (`nomad_config.driver.topology`, client/config NomadPluginConfig), and the
//! usable compute a task's `PercentTicks` is a share of (task_runner.go, buildTaskConfig:
//! cpu shares / UsableCompute).
//!
//! Read from /sys/devices/system/cpu (online CPUs, their package and NUMA node, their
//! frequencies) with /proc/cpuinfo's `cpu MHz` where the kernel reports no frequency, as the
//! client's numalib does; one NUMA node when none is reported.

use std::path::Path;

use nomad_conform_proto::nomad::base;

const CPU_SYS: &str = "/sys/devices/system/cpu";

/// CPU IDs in a kernel list such as `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(n) = part.trim().parse() {
                    out.push(n);
                }
            }
        }
    }
    out
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `cpu MHz` of /proc/cpuinfo (the first one), as a fallback speed.
fn cpuinfo_mhz() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("cpu MHz"))
        .and_then(|v| v.split(':').nth(1))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

/// The NUMA node of a CPU (its `nodeN` entry), 0 when none.
fn node_of(cpu_dir: &Path) -> u32 {
    std::fs::read_dir(cpu_dir)
        .ok()
        .and_then(|entries| {
            entries.flatten().find_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_prefix("node")?
                    .parse::<u32>()
                    .ok()
            })
        })
        .unwrap_or(0)
}

/// The node's topology as the client sends it to drivers.
pub fn client_topology() -> base::ClientTopology {
    let online = std::fs::read_to_string(Path::new(CPU_SYS).join("online"))
        .map(|s| parse_cpu_list(&s))
        .unwrap_or_default();
    let fallback = cpuinfo_mhz().unwrap_or(1000);
    let mut cores = Vec::new();
    let mut nodes: Vec<u32> = Vec::new();
    for id in online {
        let dir = Path::new(CPU_SYS).join(format!("cpu{id}"));
        let khz = |f: &str| read_u64(&dir.join("cpufreq").join(f)).map(|k| k / 1000);
        let node = node_of(&dir);
        if !nodes.contains(&node) {
            nodes.push(node);
        }
        let base_speed = khz("base_frequency").unwrap_or(0);
        let max_speed = khz("cpuinfo_max_freq").unwrap_or(0);
        cores.push(base::ClientTopologyCore {
            socket_id: read_u64(&dir.join("topology/physical_package_id")).unwrap_or(0) as u32,
            node_id: node,
            core_id: id,
            core_grade: base::CoreGrade::Performance as i32,
            disable: false,
            base_speed,
            max_speed,
            guess_speed: if base_speed == 0 && max_speed == 0 {
                fallback
            } else {
                0
            },
        });
    }
    nodes.sort_unstable();
    let n = nodes.len().max(1) as u32;
    // The kernel's defaults: 10 to itself, 20 to every other node.
    let values = (0..n * n)
        .map(|i| if i / n == i % n { 10 } else { 20 })
        .collect();
    base::ClientTopology {
        node_ids: if nodes.is_empty() { vec![0] } else { nodes },
        distances: Some(base::ClientTopologySlit {
            dimension: n,
            values,
        }),
        cores,
        override_total_compute: 0,
        override_withold_compute: 0,
    }
}

/// The compute tasks may use, in MHz: every enabled core's speed (base, else max, else the
/// guess), as the client's UsableCompute sums it.
pub fn usable_compute(t: &base::ClientTopology) -> u64 {
    let total: u64 = t
        .cores
        .iter()
        .filter(|c| !c.disable)
        .map(|c| {
            [c.base_speed, c.max_speed, c.guess_speed]
                .into_iter()
                .find(|s| *s > 0)
                .unwrap_or(0)
        })
        .sum();
    let total = if t.override_total_compute > 0 {
        t.override_total_compute
    } else {
        total
    };
    total.saturating_sub(t.override_withold_compute).max(1)
}

/// [`usable_compute`] of this node.
pub fn usable_compute_mhz() -> u64 {
    usable_compute(&client_topology())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpu_list("0"), vec![0]);
        assert!(parse_cpu_list("").is_empty());
    }

    #[test]
    fn this_node_has_cores_and_compute() {
        let t = client_topology();
        assert!(!t.cores.is_empty());
        assert_eq!(t.distances.as_ref().unwrap().values.len() as u32, {
            let d = t.distances.as_ref().unwrap().dimension;
            d * d
        });
        assert!(usable_compute(&t) >= 1);
    }

    #[test]
    fn usable_compute_sums_enabled_cores() {
        let core = |speed, disable| base::ClientTopologyCore {
            base_speed: speed,
            disable,
            ..Default::default()
        };
        let t = base::ClientTopology {
            cores: vec![core(2000, false), core(2000, false), core(2000, true)],
            override_withold_compute: 500,
            ..Default::default()
        };
        assert_eq!(usable_compute(&t), 3500);
    }
}
