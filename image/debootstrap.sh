#!/bin/sh
# debootstrap.sh: build a minimal Debian root file system with python3 and
# import it into AstraBox's image store.
#
# Usage (as root, with debootstrap installed: apt-get install -y debootstrap):
#
#   image/debootstrap.sh [NAME [TARBALL]] [-- IMPORT-FLAGS...]
#
#   NAME      image name (default: debian)
#   TARBALL   where to keep the packed root file system (default: a temporary
#             file, deleted afterwards)
#   IMPORT-FLAGS are passed to `astrabox image import`, e.g.
#             -- --replace --data-dir /srv/astrabox
#
# Environment (all optional):
#   ASTRABOX  the astrabox binary (default: astrabox on PATH, else bin/astrabox
#             of this repository)
#   SUITE     Debian suite (default: bookworm)
#   MIRROR    Debian mirror URL (default: the first non-security Debian source
#             configured for apt in /etc/apt/sources.list.d/*.sources or
#             /etc/apt/sources.list)
#   PACKAGES  extra packages, comma-separated (default: python3,ca-certificates)
#   NO_IMPORT set to 1 to only write TARBALL (which is then required), e.g. to
#             import it later or into another backend's engine
#   HOOK      a program run as `HOOK ROOT` after debootstrap, before packing,
#             to add to the tree (image/pi.sh uses it); it must not leave
#             anything mounted under ROOT
#
# It runs `debootstrap --variant=minbase`, drops apt's caches, packs the tree
# with numeric owners into a gzip tarball and runs
# `astrabox image import NAME TARBALL`. Takes about a minute or two on a
# fast mirror; the image is about 100-150 MiB.
set -eu

die() { echo "debootstrap.sh: $*" >&2; exit 1; }

NAME=debian
OUT=
if [ $# -gt 0 ] && [ "$1" != "--" ]; then NAME=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" != "--" ]; then OUT=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then shift; fi

SUITE=${SUITE:-bookworm}
PACKAGES=${PACKAGES:-python3,ca-certificates}

NO_IMPORT=${NO_IMPORT:-0}
[ "$NO_IMPORT" != 1 ] || [ -n "$OUT" ] || die "NO_IMPORT=1 needs a TARBALL to write"
[ "$(id -u)" -eq 0 ] || die "run as root"
command -v debootstrap >/dev/null 2>&1 || die "debootstrap is not installed (apt-get install -y debootstrap)"

if [ -z "${ASTRABOX:-}" ]; then
	if command -v astrabox >/dev/null 2>&1; then
		ASTRABOX=astrabox
	else
		ASTRABOX=$(cd "$(dirname "$0")/.." && pwd)/bin/astrabox
	fi
fi
[ "$NO_IMPORT" = 1 ] || [ -x "$ASTRABOX" ] || command -v "$ASTRABOX" >/dev/null 2>&1 || die "no astrabox binary at $ASTRABOX (make build, or set ASTRABOX)"

# find_mirror prints the first Debian (non-security) mirror configured for apt.
find_mirror() {
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		# deb822: stanzas separated by blank lines; want Types: deb, a URI not
		# of the security archive.
		awk '
			/^[ \t]*#/ { next }
			/^[ \t]*$/ { if (deb && uri != "") { print uri; exit } deb = 0; uri = ""; next }
			tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
			tolower($1) == "uris:" { for (i = 2; i <= NF; i++) if ($i !~ /security/) { uri = $i; break } }
			END { if (deb && uri != "") print uri }
		' "$f" | head -n 1
	done | head -n 1
	if [ -r /etc/apt/sources.list ]; then
		awk '$1 == "deb" { for (i = 2; i <= NF; i++) { if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; continue } if ($i !~ /security/) { print $i } break } }' \
			/etc/apt/sources.list | head -n 1
	fi
}

if [ -z "${MIRROR:-}" ]; then
	MIRROR=$(find_mirror | head -n 1)
fi
[ -n "$MIRROR" ] || die "no apt mirror found in /etc/apt; set MIRROR"

WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/astrabox-debootstrap.XXXXXX")
ROOT=$WORK/rootfs
cleanup() {
	# debootstrap mounts proc and sys in the target while it runs; never
	# delete through a mount.
	for m in dev/pts dev proc sys; do
		if mountpoint -q "$ROOT/$m" 2>/dev/null; then umount -l "$ROOT/$m" || true; fi
	done
	rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ -n "$OUT" ] || OUT=$WORK/rootfs.tar.gz

echo "debootstrap $SUITE from $MIRROR into $ROOT (packages: $PACKAGES)" >&2
start=$(date +%s)
debootstrap --variant=minbase --include="$PACKAGES" --components=main "$SUITE" "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
	{ tail -n 30 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
echo "debootstrap took $(($(date +%s) - start)) s" >&2

# No package caches or lists in the image; a fresh machine-id at first boot.
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/cache/apt/*.bin "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/*.log
: >"$ROOT/etc/machine-id"
chroot "$ROOT" python3 --version >/dev/null || die "python3 does not run in the root file system"
if [ -n "${HOOK:-}" ]; then
	echo "running $HOOK" >&2
	"$HOOK" "$ROOT" || die "$HOOK failed"
fi

tar --numeric-owner -C "$ROOT" -czf "$OUT" .
echo "packed $(du -h "$OUT" | cut -f1) into $OUT" >&2

if [ "$NO_IMPORT" = 1 ]; then
	echo "done in $(($(date +%s) - start)) s (not imported)" >&2
	exit 0
fi
"$ASTRABOX" image import "$@" "$NAME" "$OUT"
echo "done in $(($(date +%s) - start)) s" >&2
