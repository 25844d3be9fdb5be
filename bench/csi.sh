#!/bin/sh
# The CSI suite against the reference plugin: median wall time over several runs, compared with
# csi-sanity's ~1 s against the hostpath plugin (ratio <= 1 means at least as fast), and the
# share of time spent inside the plugin versus in the harness. Needs root (bind mounts).
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p csi-hostpath
exec cargo bench -p nomad-conform --bench csi
