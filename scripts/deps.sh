# Sourced by the scripts in this directory: make sure the operating-system tools the suites and
# tests use are present, installing the Debian packages that provide them when they are not.
# Usage: ensure_tools command:package ...
ensure_tools() {
    missing=""
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || missing="$missing ${pair#*:}"
    done
    [ -z "$missing" ] && return 0
    if command -v apt-get >/dev/null 2>&1; then
        if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
        echo "installing:$missing" >&2
        $sudo apt-get update -qq >/dev/null
        # shellcheck disable=SC2086 # one word per package
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
    else
        echo "missing tools; install the packages:$missing" >&2
        exit 2
    fi
}

# What the main job (scripts/run-reference) needs: ext4 tools and loop mounts for the
# ext4-image DHV plugin, mountpoint for the CSI reference plugin's bind mounts. Nothing else:
# a browser and its driver are for the tests only (scripts/test asks for them).
ensure_tools mkfs.ext4:e2fsprogs mountpoint:util-linux losetup:mount
