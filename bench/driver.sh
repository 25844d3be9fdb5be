#!/bin/sh
# The task driver suite against the reference driver driver-exec: its wall time under the fast
# profile (median of 3, target 10 s) and under nomad-1.10 (target 40 s) on 2 cores, each with its
# five slowest clauses and the wait each is made of, and its peak RSS (target 64 MB); and the go-plugin host's overhead per unary
# RPC against a bare tonic call over the same socket (target 0.2 ms). Prints ratios; asserts
# nothing.
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p driver-exec
exec cargo bench -p nomad-conform --bench driver
