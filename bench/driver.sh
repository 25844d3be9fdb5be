#!/bin/sh
# The task driver suite against the reference driver driver-exec: the median wall time of the
# whole suite against a 15 s target on 2 cores (its five slowest clauses, marked where the time
# is a wait the contract sets), and the go-plugin host's overhead per unary RPC against a bare
# tonic call over the same socket (target 0.2 ms). Prints ratios; asserts nothing.
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p driver-exec
exec cargo bench -p nomad-conform --bench driver
