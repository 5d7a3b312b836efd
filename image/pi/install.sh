#!/bin/sh
# install.sh ROOT: adds python3-matplotlib, Node.js and pi to the root file
# system at ROOT (debootstrap.sh's HOOK for image/pi.sh). matplotlib comes
# from Debian through apt in a chroot, python3-munkres first, so that
# python3-fonttools' "python3-scipy | python3-munkres" is met without
# scipy (see pi.sh); APT_PACKAGES overrides the list, installed one
# apt-get run each, in order. Node is the official binary from npm package
# node-linux-ARCH; pi is installed with `npm ci` from this folder's
# package-lock.json into ROOT/opt/pi.
set -eu
ROOT=$1
here=$(cd "$(dirname "$0")" && pwd)
NODE_VERSION=${NODE_VERSION:-20.20.2}
APT_PACKAGES=${APT_PACKAGES:-python3-munkres python3-matplotlib}
case $(uname -m) in
x86_64) arch=x64 ;;
aarch64) arch=arm64 ;;
*) echo "install.sh: no Node.js package for $(uname -m)" >&2; exit 1 ;;
esac

work=$(mktemp -d "${TMPDIR:-/var/tmp}/astrabox-pi.XXXXXX")
# The chroot resolves the mirror with the host's resolver while apt runs;
# the image keeps the resolv.conf it had (debootstrap copies the host's).
had_resolv=0
[ ! -e "$ROOT/etc/resolv.conf" ] || { had_resolv=1; cp -a "$ROOT/etc/resolv.conf" "$work/resolv.conf"; }
restore() {
	if [ "$had_resolv" = 1 ]; then cp -a "$work/resolv.conf" "$ROOT/etc/resolv.conf"; else rm -f "$ROOT/etc/resolv.conf"; fi
	rm -rf "$work"
}
trap restore EXIT

if [ -n "$APT_PACKAGES" ]; then
	cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
	chroot "$ROOT" apt-get update -qq
	for pkg in $APT_PACKAGES; do
		DEBIAN_FRONTEND=noninteractive chroot "$ROOT" apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
	done
	chroot "$ROOT" apt-get clean
	rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/apt "$ROOT"/var/log/dpkg.log
	case " $APT_PACKAGES " in
	*" python3-matplotlib "*) chroot "$ROOT" python3 -c "import matplotlib" || { echo "install.sh: matplotlib does not import in the image" >&2; exit 1; } ;;
	esac
fi
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
