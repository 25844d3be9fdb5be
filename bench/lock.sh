#!/bin/sh
# The lock client suite against the reference client lock-sidecar: on the fast profile, median
# wall time of 3 runs against a 30 s target and their peak RSS against 64 MB; the probe-interval
# resolution the singleton checker works with (p95 error of a recorded end against a 10 ms
# target); on the default profile (Nomad's numbers, a client TTL of 10 s), the wall time of one
# run against a 120 s target; and the ignores-conflict fixture (the Go LockLeaser's renew-409
# handling) on seeds 1 to 5, with whether LOCK-SINGLETON caught it on each ("5/5 seeds caught").
# Takes about 8 minutes. Prints ratios; asserts nothing.
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p lock-sidecar
exec cargo bench -p nomad-conform --bench lock
