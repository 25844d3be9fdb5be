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

# ember-csi 0.9.1, the field plugin the tests run (harness/tests/field_ember.rs): PyPI's
# ember-csi with protobuf 3.20.3 and fixtures, in a Python 3.8 virtual environment under
# target/field (or $NOMAD_CONFORM_FIELD_DIR), made once. Python 3.8 comes from python3.8 on the
# PATH or from pyenv. Without it the test fails, saying why.
ensure_ember() {
    venv="${NOMAD_CONFORM_FIELD_DIR:-target/field}/ember-venv"
    [ -x "$venv/bin/ember-csi" ] && return 0
    py=""
    # (A pyenv shim for python3.8 is on the PATH even where pyenv would refuse to run it: each
    # candidate must run and be 3.8.)
    for candidate in python3.8 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.8*/bin/python3.8; do
        if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 8)' >/dev/null 2>&1; then
            py="$candidate"
            break
        fi
    done
    if [ -z "$py" ]; then
        echo "ember-csi: no Python 3.8 (python3.8, or pyenv's 3.8.x): not installed" >&2
        return 0
    fi
    echo "installing ember-csi 0.9.1 into $venv" >&2
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    log="$venv-install.log"
    if "$py" -m venv "$venv" >"$log" 2>&1 &&
        "$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir \
            ember-csi==0.9.1 protobuf==3.20.3 fixtures >>"$log" 2>&1; then
        rm -f "$log"
    else
        echo "ember-csi: the install into $venv failed; the end of $log:" >&2
        tail -n 20 "$log" >&2
        rm -rf "$venv"
    fi
    return 0
}
