#!/bin/sh
# The CSI suite against the reference plugin on a node that takes 3 volumes: median wall time,
# the five slowest clauses, time spent waiting for the node's attachment budget, and the ratio
# against csi-sanity's time on the same plugin (set CSI_SANITY=/path/to/csi-sanity) or against
# 1.0 s. Target: at most 1.0x csi-sanity; goal 0.5x. Needs root (bind mounts).
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p csi-hostpath
exec cargo bench -p nomad-conform --bench csi
