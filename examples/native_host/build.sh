#!/bin/sh
# Build the native host: sh build.sh [output]      (default: host, beside this file)
#
# PYTHON picks the interpreter to embed (default python3); the host runs in
# its environment (a venv, with zsharp_py installed there). Flags come from
# that interpreter's own python3.X-config (a venv has none: it is found in
# the base installation), else python3-config on PATH.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
CC=${CC:-$(command -v cc || command -v gcc)}
out=${1:-$here/host}
config=$("$PYTHON" -c 'import os, sysconfig as s
c = os.path.join(s.get_config_var("BINDIR"), "python" + s.get_config_var("VERSION") + "-config")
print(c if os.path.exists(c) else "python3-config")')
host_python=$("$PYTHON" -c 'import sys; print(sys.executable)')
include=$("$PYTHON" -c 'from zsharp_py.lowlevel import include_dir; print(include_dir())')  # zsharp.h
# -export-dynamic: extension modules loaded by the host (zsharp_py's) take
# libpython's symbols from the executable when libpython is linked statically.
# shellcheck disable=SC2046  # the -config flags are meant to split into words
"$CC" -std=c11 -O2 -g -Wall -Wextra -Werror -I"$include" \
    $("$config" --includes) \
    -DHOST_PYTHON="\"$host_python\"" -DSCRIPT_DIR="\"$here\"" \
    -o "$out" "$here/host.c" -Xlinker -export-dynamic $("$config" --embed --ldflags)
