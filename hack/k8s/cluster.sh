#!/usr/bin/env bash
# A single-node Kubernetes cluster built offline, for the kubernetes
# backend's tests (provider/kubernetes) and benchmarks.
#
#   hack/k8s/cluster.sh build   build etcd and the Kubernetes binaries into the cache
#   hack/k8s/cluster.sh up      build if needed, then start etcd, kube-apiserver,
#                               kube-controller-manager, kube-scheduler, containerd
#                               and the kubelet; write $STATE/kubeconfig
#   hack/k8s/cluster.sh down    stop them and leave the host as it was
#   hack/k8s/cluster.sh import ARCHIVE...   import image archives into the node
#   hack/k8s/cluster.sh env     print the variables the tests read
#   hack/k8s/cluster.sh rootfs_image REF TARBALL   import a rootfs tarball as image REF
#
# Everything comes from the Go module proxy and Debian: Kubernetes and etcd
# build from their published modules (a scratch module per program, since
# `go install` refuses their replace directives), the node is Debian's
# containerd, runc and containernetworking-plugins, and images are imported
# with ctr (no registry). Built binaries are kept in $ASTRABOX_K8S_CACHE
# (default /var/cache/astrabox-k8s) under their pinned versions, so only the
# first run on a machine pays the build (about 9 minutes on 2 cores).
#
# The cluster's state lives in $ASTRABOX_K8S_STATE (default
# /var/lib/astrabox-k8s): etcd's data, certificates, logs, the kubeconfig.
# `down` kills what `up` started (by the pids it recorded), removes the pod
# network's bridge, the iptables rules CNI and the kubelet added (chains
# compared against a snapshot taken by `up`), and unmounts what the kubelet
# and containerd mounted under their directories.
set -euo pipefail

K8S_VERSION=v1.37.2
STAGING_VERSION=v0.37.2 # k8s.io/<staging> modules published with K8S_VERSION
ETCD_VERSION=v3.7.3

CACHE=${ASTRABOX_K8S_CACHE:-/var/cache/astrabox-k8s}
STATE=${ASTRABOX_K8S_STATE:-/var/lib/astrabox-k8s}
BIN=$CACHE/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION
HERE=$(cd "$(dirname "$0")" && pwd)
export PATH="/usr/local/go/bin:$PATH"

# The pod network: a bridge of its own and ranges unlikely to clash.
BRIDGE=abk8s0
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.245.0.0/24
PAUSE_IMAGE=astrabox.local/pause:1

log() { echo "cluster: $*" >&2; }

# ---- build ------------------------------------------------------------

staging_modules() {
  local modfile
  modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$modfile"
}

# scratch_module DIR MODULE VERSION REPLACES... writes a module that
# requires MODULE and pins each replaced module to a published version.
scratch_module() {
  local dir=$1 mod=$2 ver=$3
  shift 3
  mkdir -p "$dir"
  {
    echo "module astrabox.local/k8s-build"
    echo "go 1.26"
    echo "require $mod $ver"
    for r in "$@"; do echo "replace $r"; done
  } >"$dir/go.mod"
}

build() {
  if [ -x "$BIN/kubelet" ] && [ -x "$BIN/etcd" ]; then
    log "binaries cached in $BIN"
    return
  fi
  local start src
  start=$(date +%s)
  src=$(mktemp -d "$CACHE/src.XXXXXX" 2>/dev/null || { mkdir -p "$CACHE" && mktemp -d "$CACHE/src.XXXXXX"; })
  mkdir -p "$BIN.tmp"
  export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

  log "building etcd $ETCD_VERSION"
  local r=()
  for m in api/v3 client/pkg/v3 client/v3 pkg/v3; do r+=("go.etcd.io/etcd/$m => go.etcd.io/etcd/$m $ETCD_VERSION"); done
  scratch_module "$src/etcd" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "${r[@]}"
  (cd "$src/etcd" && printf '//go:build tools\npackage tools\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go &&
    go mod tidy >/dev/null && go build -trimpath -ldflags=-s -o "$BIN.tmp/etcd" go.etcd.io/etcd/server/v3)

  log "building Kubernetes $K8S_VERSION (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl)"
  r=()
  for m in $(staging_modules); do r+=("$m => $m $STAGING_VERSION"); done
  scratch_module "$src/k8s" k8s.io/kubernetes "$K8S_VERSION" "${r[@]}"
  local cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
  (cd "$src/k8s" && {
    printf '//go:build tools\npackage tools\nimport (\n'
    for c in "${cmds[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'
  } >tools.go && go mod tidy >/dev/null &&
    for c in "${cmds[@]}"; do
      log "  $c"
      go build -trimpath -ldflags="-s -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)" \
        -o "$BIN.tmp/$c" "k8s.io/kubernetes/cmd/$c"
    done)
  rm -rf "$src" "$BIN"
  mv "$BIN.tmp" "$BIN"
  log "built in $(($(date +%s) - start)) s into $BIN"
}

# shellcheck source=hack/k8s/images.sh
. "$HERE/images.sh"
# shellcheck source=hack/k8s/node.sh
. "$HERE/node.sh"

case "${1:-}" in
build) build ;;
*)
  if declare -F "cmd_${1:-}" >/dev/null; then
    "cmd_$1" "${@:2}"
  else
    sed -n '2,13s/^# \{0,1\}//p' "$0" >&2
    exit 2
  fi
  ;;
esac
