#!/bin/sh
# The lock client suite against the reference client lock-sidecar on the fast profile: median
# wall time of 3 runs against a 30 s target, and the probe-interval resolution the singleton
# checker works with (p95 error of a recorded end against a 10 ms target). Prints ratios;
# asserts nothing.
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p lock-sidecar
exec cargo bench -p nomad-conform --bench lock
