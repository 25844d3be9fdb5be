#!/bin/sh
# Performance targets of the DHV suite, printed as ratios (<= 1 means within target):
# the suite against reference mkdir in under 3 s, and at most 2 ms of harness overhead per
# plugin call above a bare fork/exec. Release build; nothing waits out a deadline here.
set -eu
cd "$(dirname "$0")/.."
exec cargo bench -p nomad-conform --bench dhv
