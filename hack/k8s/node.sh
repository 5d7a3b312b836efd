# Sourced by cluster.sh: bringing the single-node cluster up and down.

NODE=astrabox-node
ETCD_PORT=23790
API_PORT=26443
NODE_IP=${POD_CIDR%.0/*}.1

# certs makes a CA and the leaf certificates of the API server, the admin
# (system:masters) and the kubelet (system:node:NODE), and the service
# account key pair.
certs() {
  local c=$STATE/pki
  mkdir -p "$c"
  (
    cd "$c"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 -subj /CN=astrabox-k8s-ca 2>/dev/null
    leaf() { # name CN O SAN
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "/CN=$2${3:+/O=$3}" 2>/dev/null
      { echo "extendedKeyUsage=serverAuth,clientAuth"; [ -n "$4" ] && echo "subjectAltName=$4"; } >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 30 -extfile "$1.ext" 2>/dev/null
    }
    leaf apiserver kube-apiserver "" "IP:127.0.0.1,IP:${SERVICE_CIDR%.0/24}.1,DNS:localhost,DNS:kubernetes.default.svc"
    leaf admin astrabox-admin system:masters ""
    leaf kubelet "system:node:$NODE" system:nodes ""
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}

kubeconfig() { # out user
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: astrabox-k8s
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $STATE/pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $STATE/pki/$2.crt
    client-key: $STATE/pki/$2.key
contexts:
- name: astrabox-k8s
  context: {cluster: astrabox-k8s, user: $2}
current-context: astrabox-k8s
EOF
}

# start NAME CMD... runs CMD in its own session, its output in
# $STATE/log/NAME.log and its pid in $STATE/pid/NAME (what down stops).
start() {
  local name=$1
  shift
  mkdir -p "$STATE/log" "$STATE/pid"
  setsid "$@" >"$STATE/log/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/pid/$name"
}

# wait_for WHAT SECONDS CMD... polls CMD until it succeeds.
wait_for() {
  local what=$1 secs=$2
  shift 2
  for _ in $(seq $((secs * 4))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.25
  done
  log "timed out waiting for $what; logs in $STATE/log"
  tail -n 20 "$STATE"/log/*.log >&2 || true
  return 1
}

kubectl_() { "$BIN/kubectl" --kubeconfig "$STATE/kubeconfig" "$@"; }

node_ready() {
  kubectl_ get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' | grep -q True
}

deps() {
  local need=0
  for c in containerd runc ctr openssl iptables-save python3; do command -v "$c" >/dev/null || need=1; done
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || need=1
  if [ $need = 1 ]; then
    log "installing containerd, runc and containernetworking-plugins from Debian"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      containerd runc containernetworking-plugins openssl iptables python3 >/dev/null
  fi
}

containerd_config() {
  cat >"$STATE/containerd/config.toml" <<EOF
version = 2
root = "$STATE/containerd/root"
state = "$STATE/containerd/state"
[grpc]
  address = "$STATE/containerd/containerd.sock"
[ttrpc]
  address = "$STATE/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root here may lack CAP_SYS_RESOURCE: without this runc fails with
  # "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # runc, masking /proc/kallsyms too (hack/k8s/runc-masked).
        BinaryName = "$STATE/bin/runc-masked"
EOF
  mkdir -p "$STATE/bin"
  install -m 0755 "$HERE/runc-masked" "$STATE/bin/runc-masked"
  # A bridge of the cluster's own, no masquerading (no iptables rules).
  cat >"$STATE/cni/net.d/10-astrabox.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "astrabox-k8s", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": "$STATE/cni/ipam", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}}
]}
EOF
}

kubelet_config() {
  cat >"$STATE/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $STATE/pki/ca.crt}}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /astrabox-k8s
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$STATE/containerd/containerd.sock
imageServiceEndpoint: unix://$STATE/containerd/containerd.sock
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 250
EOF
}

cmd_up() {
  if [ -f "$STATE/pid/kubelet" ] && kill -0 "$(cat "$STATE/pid/kubelet")" 2>/dev/null; then
    log "already up ($STATE/kubeconfig)"
    return
  fi
  # The remains of a cluster whose processes were killed: clear them.
  [ -d "$STATE" ] && cmd_down
  deps
  build
  local t0
  t0=$(date +%s)
  mkdir -p "$STATE/containerd" "$STATE/cni/net.d" "$STATE/kubelet"
  # What down compares against, to leave the host as it was.
  iptables-save 2>/dev/null | grep -o '^:KUBE-[^ ]*' | sort -u >"$STATE/iptables-before" || true
  certs
  kubeconfig "$STATE/kubeconfig" admin
  kubeconfig "$STATE/kubelet.kubeconfig" kubelet

  local peer=$((ETCD_PORT + 10))
  start etcd "$BIN/etcd" --data-dir "$STATE/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" --initial-cluster "default=http://127.0.0.1:$peer" \
    --listen-metrics-urls "" --unsafe-no-fsync
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --endpoint-reconciler-type=none --service-cluster-ip-range "$SERVICE_CIDR" \
    --tls-cert-file "$STATE/pki/apiserver.crt" --tls-private-key-file "$STATE/pki/apiserver.key" \
    --client-ca-file "$STATE/pki/ca.crt" --authorization-mode Node,RBAC \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$STATE/pki/sa.pub" \
    --service-account-signing-key-file "$STATE/pki/sa.key" \
    --kubelet-client-certificate "$STATE/pki/admin.crt" --kubelet-client-key "$STATE/pki/admin.key" \
    --kubelet-preferred-address-types InternalIP
  wait_for kube-apiserver 120 kubectl_ get --raw /readyz
  # The Node authorizer's graph lags behind new Pods on a busy machine,
  # and the kubelet's status updates then wait for its next sync (up to
  # 10 s): RBAC's system:node role for the node, as a fallback.
  wait_for "RBAC bootstrap" 30 kubectl_ get clusterrole system:node
  kubectl_ create clusterrolebinding astrabox-nodes --clusterrole system:node --group system:nodes >/dev/null
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$STATE/kubeconfig" \
    --leader-elect=false --secure-port 0 --service-account-private-key-file "$STATE/pki/sa.key" \
    --root-ca-file "$STATE/pki/ca.crt"
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$STATE/kubeconfig" --leader-elect=false --secure-port 0

  containerd_config
  start containerd containerd --config "$STATE/containerd/config.toml"
  wait_for containerd 30 ctr --address "$STATE/containerd/containerd.sock" version
  pause_image

  # The node's address is the pod bridge's gateway (a node IP cannot be
  # loopback): made here, before the kubelet and CNI, and removed by down.
  ip link add "$BRIDGE" type bridge 2>/dev/null || true
  ip addr replace "$NODE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  kubelet_config
  # The kubelet wants its cgroupRoot in every hierarchy.
  for c in /sys/fs/cgroup/*/; do
    [ -e "$c/cgroup.procs" ] && mkdir -p "$c/astrabox-k8s"
  done
  # The backend's recommended Localhost seccomp profile (containerd 1.6's
  # RuntimeDefault still allows io_uring), as "astrabox.json".
  mkdir -p "$STATE/kubelet/root/seccomp"
  (cd "$HERE/../.." && go run ./hack/k8s/seccomp) >"$STATE/kubelet/root/seccomp/astrabox.json"
  start kubelet "$BIN/kubelet" --config "$STATE/kubelet/config.yaml" --kubeconfig "$STATE/kubelet.kubeconfig" \
    --root-dir "$STATE/kubelet/root" --hostname-override "$NODE" --node-ip "$NODE_IP" --cert-dir "$STATE/kubelet/pki"
  wait_for "node $NODE to be Ready" 120 node_ready
  wait_for "the default service account" 60 kubectl_ -n default get serviceaccount default
  log "up in $(($(date +%s) - t0)) s; kubeconfig: $STATE/kubeconfig"
}

stop_pid() {
  local f=$STATE/pid/$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# unkube_iptables removes the KUBE-* chains (and the jumps to them) that
# were not there before up: the kubelet's.
unkube_iptables() {
  local table rule chain
  for table in filter nat mangle; do
    { iptables-save -t "$table" 2>/dev/null | grep '^-A' | grep -- '-j KUBE-' || true; } | while read -r rule; do
      chain=$(echo "$rule" | grep -o -- '-j KUBE-[^ ]*' | cut -c4-)
      grep -qx ":$chain" "$STATE/iptables-before" 2>/dev/null && continue
      # shellcheck disable=SC2086 # the rule's words, as iptables-save wrote them
      eval "iptables -w -t $table -D ${rule#-A }" 2>/dev/null || true
    done
    for op in -F -X; do
      for chain in $(iptables-save -t "$table" 2>/dev/null | grep -o '^:KUBE-[^ ]*' | cut -c2- || true); do
        grep -qx ":$chain" "$STATE/iptables-before" 2>/dev/null && continue
        iptables -w -t "$table" "$op" "$chain" 2>/dev/null || true
      done
    done
  done
}

cmd_down() {
  [ -d "$STATE" ] || { log "not up"; return 0; }
  stop_pid kubelet
  # The pods' containers run under containerd's shims: kill and delete
  # them through containerd before it stops.
  local sock=$STATE/containerd/containerd.sock c p
  if [ -S "$sock" ]; then
    for c in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
    done
    for c in $(ctr --address "$sock" -n k8s.io containers ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true
    done
  fi
  stop_pid containerd
  # Shims that outlived containerd: only those of this state dir.
  for p in $(pgrep -f "containerd-shim.* -address $STATE/" || true); do kill -9 "$p" 2>/dev/null || true; done
  for c in kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_pid "$c"; done
  # The pods' network namespaces and the pod bridge.
  for c in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cni-' || true); do
    ip netns pids "$c" 2>/dev/null | grep -q . || ip netns delete "$c" 2>/dev/null || true
  done
  ip link delete "$BRIDGE" 2>/dev/null || true
  unkube_iptables
  # Mounts under the state dir (pod volumes, snapshots, shm), deepest first.
  { grep -F " $STATE/" /proc/self/mountinfo || true; } | awk '{print $5}' | sort -r | while read -r c; do
    umount "$c" 2>/dev/null || umount -l "$c" 2>/dev/null || true
  done
  # The pods' cgroups, under cgroupRoot /astrabox-k8s in every hierarchy.
  for c in /sys/fs/cgroup/*/astrabox-k8s /sys/fs/cgroup/astrabox-k8s; do
    [ -d "$c" ] && { find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true; }
  done
  rm -rf "$STATE"
  log "down"
}

# cmd_env prints what the kubernetes backend's tests read.
cmd_env() {
  echo "export ASTRABOX_TEST_KUBECONFIG=$STATE/kubeconfig"
  echo "export ASTRABOX_TEST_K8S_SECCOMP=astrabox.json"
  echo "export ASTRABOX_TEST_K8S_IMPORT='ctr --address $STATE/containerd/containerd.sock -n k8s.io images import'"
  echo "export ASTRABOX_TEST_KUBECTL=$BIN/kubectl"
}

# cmd_kubectl ARGS... runs the cluster's kubectl on its kubeconfig.
cmd_kubectl() { kubectl_ "$@"; }
