#!/bin/sh
# Performance targets of the DHV suite, printed as ratios (<= 1 means within target):
# the suite against reference mkdir in under 3 s, and at most 2 ms of harness overhead per
# plugin call above a bare fork/exec; peak RSS (issue 15) under 64 MB for a normal run (reference
# mkdir, --profile fast, JSON, HTML and JUnit reports) and under 200 MB for a plugin printing
# 50 MB within --capture-limit 64MiB (as an excerpt in the reports, and quoted whole in a
# failure, on one clause; and 50 MB on stdout and 50 MB on stderr from every create on eight
# clauses at the default --jobs). Release build; nothing waits out a deadline here.
set -eu
cd "$(dirname "$0")/.."
exec cargo bench -p nomad-conform --bench dhv
