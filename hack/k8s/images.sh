# Sourced by cluster.sh: image archives built without a registry or an
# engine, and their import into the node's containerd.

# docker_archive OUT REF LAYER_TAR [ENTRYPOINT...] writes a docker-archive
# (the format `docker save` writes and `ctr images import` takes) of one
# uncompressed layer.
docker_archive() {
  local out=$1 ref=$2 layer=$3
  shift 3
  local d diff cfg ep
  d=$(mktemp -d)
  diff=$(sha256sum "$layer" | cut -d' ' -f1)
  mkdir "$d/$diff"
  cp "$layer" "$d/$diff/layer.tar"
  ep=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$@")
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":%s,"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$ep" "$diff" >"$d/config.json"
  cfg=$(sha256sum "$d/config.json" | cut -d' ' -f1)
  mv "$d/config.json" "$d/$cfg.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$cfg" "$ref" "$diff" >"$d/manifest.json"
  tar -C "$d" -cf "$out" manifest.json "$cfg.json" "$diff"
  rm -rf "$d"
}

# binary_image OUT REF BINARY NAME writes the archive of an image holding
# only BINARY as /NAME, its entrypoint.
binary_image() {
  local out=$1 ref=$2 bin=$3 name=$4 d
  d=$(mktemp -d)
  install -m 0755 "$bin" "$d/$name"
  tar -C "$d" --owner=0 --group=0 --mtime=@0 -cf "$d/layer.tar" "$name"
  docker_archive "$out" "$ref" "$d/layer.tar" "/$name"
  rm -rf "$d"
}

# pause_image builds and imports the pod sandbox image, a static binary
# that sleeps and reaps (hack/k8s/pause): registry.k8s.io is not reachable.
pause_image() {
  local d
  d=$(mktemp -d)
  (cd "$HERE/../.." && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$d/pause" ./hack/k8s/pause)
  binary_image "$d/pause.tar" "$PAUSE_IMAGE" "$d/pause" pause
  cmd_import "$d/pause.tar"
  rm -rf "$d"
}

# cmd_import ARCHIVE... imports image archives (docker-archive or OCI)
# into the node's containerd, where the kubelet finds them without a pull.
cmd_import() {
  for a in "$@"; do
    ctr --address "$STATE/containerd/containerd.sock" -n k8s.io images import "$a" >/dev/null
  done
}

# cmd_rootfs_image REF ROOTFS_TARBALL imports a root file system tarball
# (optionally gzipped), such as the tests' Debian rootfs, as image REF.
cmd_rootfs_image() {
  local ref=$1 tarball=$2 d
  d=$(mktemp -d)
  case "$tarball" in
  *.gz) gzip -dc "$tarball" >"$d/layer.tar" ;;
  *) cp "$tarball" "$d/layer.tar" ;;
  esac
  docker_archive "$d/image.tar" "$ref" "$d/layer.tar" /bin/sh
  cmd_import "$d/image.tar"
  rm -rf "$d"
}

# cmd_binary_image OUT REF BINARY writes the archive of the execd image:
# only the static astrabox binary, as /astrabox (what `make image-execd`
# builds for `ctr images import` or a registry push).
cmd_binary_image() { binary_image "$1" "$2" "$3" astrabox; }
