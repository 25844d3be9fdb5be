#!/bin/sh
# The CSI suite against a plugin on a node that takes 3 volumes (the reference csi-hostpath, or
# CSI_PLUGIN's command line with {endpoint} and {state_dir}), interleaved with csi-sanity on the
# same plugin when CSI_SANITY names a csi-sanity binary (given the mutable parameters the plugin
# accepts; its exit status is reported): medians and their ratio (target at most 1.0, goal 0.5),
# each tool's calls and mounts counted from the plugin's own log, the plugin's share of a serial
# run and our overhead (target at most 10%), the floor on a plugin that answers one call at a
# time (its own time for our calls, against csi-sanity's whole run) and how far our median is
# above it (target at most 10%), and our peak RSS (target 64 MB). Needs root (mounts).
# kubernetes-csi's hostpath driver v1.18.0:
#   CSI_SANITY=/path/to/csi-sanity CSI_PLUGIN='/path/to/hostpathplugin --endpoint {endpoint}
#   --nodeid bench-node --statedir {state_dir} --attach-limit 3 -v 3' bench/csi.sh
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p csi-hostpath
exec cargo bench -p nomad-conform --bench csi
