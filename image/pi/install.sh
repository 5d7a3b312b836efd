#!/bin/sh
# install.sh ROOT: adds Node.js and pi to the root file system at ROOT
# (debootstrap.sh's HOOK for image/pi.sh). Node is the official binary from
# npm package node-linux-ARCH; pi is installed with `npm ci` from this
# folder's package-lock.json into ROOT/opt/pi.
set -eu
ROOT=$1
here=$(cd "$(dirname "$0")" && pwd)
NODE_VERSION=${NODE_VERSION:-20.20.2}
case $(uname -m) in
x86_64) arch=x64 ;;
aarch64) arch=arm64 ;;
*) echo "install.sh: no Node.js package for $(uname -m)" >&2; exit 1 ;;
esac

work=$(mktemp -d "${TMPDIR:-/var/tmp}/astrabox-pi.XXXXXX")
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "node-linux-$arch@$NODE_VERSION" >/dev/null)
tar -xzf "$work"/node-linux-*.tgz -C "$work" package/bin/node
install -m 0755 "$work/package/bin/node" "$ROOT/usr/local/bin/node"

mkdir -p "$ROOT/opt/pi"
cp "$here/package.json" "$here/package-lock.json" "$ROOT/opt/pi/"
(cd "$ROOT/opt/pi" && npm ci --omit=dev --no-audit --no-fund --loglevel=error)
ln -sf /opt/pi/node_modules/.bin/pi "$ROOT/usr/local/bin/pi"
# pi looks for fd by its upstream name; Debian ships it as fdfind.
ln -sf /usr/bin/fdfind "$ROOT/usr/local/bin/fd"
rm -rf "$ROOT/root/.npm"

echo "pi $(chroot "$ROOT" /usr/local/bin/pi --version 2>&1) on node $(chroot "$ROOT" /usr/local/bin/node --version)" >&2
