#!/bin/sh
# The CSI suite against a plugin on a node that takes 3 volumes (the reference csi-hostpath, or
# CSI_PLUGIN's command line with {endpoint} and {state_dir}), interleaved with csi-sanity on the
# same plugin when CSI_SANITY names a csi-sanity binary (given the mutable parameters the plugin
# accepts; its exit status is reported): medians and their ratio (target at most 1.0, goal 0.5),
# each tool's calls and mounts counted from the plugin's own log, the plugin's share of a serial
# run and our overhead (target at most 10%), and the ratio's floor on a plugin that answers one
# call at a time (its own time for our calls against csi-sanity's whole run). Needs root (mounts).
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p csi-hostpath
exec cargo bench -p nomad-conform --bench csi
