#!/bin/sh
# Build the game host with the flags the installed zsharp_py prints:
#   sh build.sh [output]          (default: game, beside this file)
#
# PYTHON names the interpreter whose zsharp_py (and libpython) the host
# uses (default python3; a venv's python works: its base installation's
# python3.X-config gives the embedding flags). The host starts Python as
# that interpreter when ZS_HOST_PYTHON names it (a venv's site-packages).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
CC=${CC:-cc}
out=${1:-$here/game}
config=$("$PYTHON" -c 'import os, sysconfig as s
c = os.path.join(s.get_config_var("BINDIR"), "python" + s.get_config_var("VERSION") + "-config")
print(c if os.path.exists(c) else "python3-config")')
# -export-dynamic: extension modules loaded by the host (zsharp_py's) take
# libpython's symbols from the executable when libpython is linked statically.
# shellcheck disable=SC2046  # the flags are meant to split into words
"$CC" -std=c11 -O2 -Wall -Wextra -Werror -o "$out" "$here/game.c" \
    $("$PYTHON" -m zsharp_py config --cflags --libs) \
    $("$config" --includes) $("$config" --embed --ldflags) -Xlinker -export-dynamic
