#!/bin/sh
# pi.sh: build the image of engine kind "pi": a Debian root file system
# (debootstrap.sh) with git, ripgrep, fd-find and python3 with matplotlib
# (what a coding agent's scripts reach for) from Debian, Node.js from
# npm (the official binary, package node-linux-ARCH) and the pi coding
# agent pinned by image/pi/package-lock.json. Everything comes through apt
# and npm, so it builds where only their mirrors are reachable.
#
# matplotlib is installed by image/pi/install.sh with apt rather than by
# debootstrap, whose resolver takes the first of a dependency's
# alternatives: python3-fonttools' "python3-scipy | python3-munkres"
# would bring scipy and, through it, a C++ toolchain and Boost's headers
# (about 500 MiB of the image).
#
# Usage (as root):
#
#   image/pi.sh [NAME [TARBALL]] [-- IMPORT-FLAGS...]
#
#   NAME defaults to "pi"; the other arguments and the environment are
#   debootstrap.sh's (NO_IMPORT=1 only writes TARBALL). NODE_VERSION picks
#   Node (default 20.20.2; pi 0.73 needs 20.6 or later).
#
# `make image-pi` runs it and imports the image for the native backend and,
# when a Docker Engine answers, for the docker backend.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
command -v npm >/dev/null 2>&1 || { echo "pi.sh: npm is needed on the host (apt-get install -y npm, or Node.js from nodejs.org)" >&2; exit 1; }
[ $# -gt 0 ] && [ "$1" != "--" ] || set -- pi "$@"
PACKAGES=${PACKAGES:-python3,ca-certificates,git,ripgrep,fd-find} HOOK="$here/pi/install.sh" exec "$here/debootstrap.sh" "$@"
