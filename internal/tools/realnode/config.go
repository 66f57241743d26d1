package realnode

import (
	"fmt"
	"os"
)

// writeConfigs writes containerd's, kubelet's, kube-proxy's and the CNI
// configuration under Dir. Every address in them is loopback or the node's
// own (the bridge's gateway), in the cluster's network namespace.
func (n *Node) writeConfigs(t Tools) error {
	files := map[string]string{
		n.path("config", "containerd.toml"):          n.containerdConfig(t),
		n.path("config", "kubelet.yaml"):             n.kubeletConfig(),
		n.path("config", "kube-proxy.yaml"):          n.kubeProxyConfig(),
		n.path("config", "resolv.conf"):              "# The local cluster's real node has no DNS: its pods reach the API server by its Service's address.\noptions ndots:1\n",
		n.path("cni", "net.d", "10-virtop.conflist"): n.cniConfig(),
	}
	for p, content := range files {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) containerdConfig(t Tools) string {
	return fmt.Sprintf(`# The local cluster's real node: written by virtop up.
version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  address = ""

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[5]q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[6]q
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    disable_apparmor = true
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          BinaryName = %[7]q
          Root = %[10]q
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[8]q
      conf_dir = %[9]q
      max_conf_num = 1
`, n.path("containerd", "root"), n.path("containerd", "state"), n.ContainerdSocket(), n.ContainerdSocket()+".ttrpc",
		n.path("containerd", "opt"), SandboxImage, t.Runc, t.CNIBinDir, n.path("cni", "net.d"), n.path("containerd", "runc"))
}

func (n *Node) kubeletConfig() string {
	return fmt.Sprintf(`# The local cluster's real node: written by virtop up.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[2]s
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://%[3]s
cgroupDriver: cgroupfs
cgroupRoot: %[4]s
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
failCgroupV1: false
failSwapOn: false
resolvConf: %[5]s
# The containers' logs stay with the node (not /var/log/pods).
podLogsDir: %[6]s
clusterDomain: cluster.local
# Images come only from what virtop up imported: nothing may collect them
# (no registry is reachable to pull them again).
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imageMinimumGCAge: 87600h
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
serializeImagePulls: false
maxPods: 110
staticPodPath: ""
registerNode: true
`, n.Gateway(), n.ClientCA, n.ContainerdSocket(), n.CgroupRoot(), n.path("config", "resolv.conf"), n.path("logs", "pods"))
}

func (n *Node) kubeProxyConfig() string {
	return fmt.Sprintf(`# The local cluster's real node: written by virtop up.
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]s
hostnameOverride: %[2]s
bindAddress: %[3]s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
mode: iptables
clusterCIDR: %[4]s
# Pod to Service to pod on one bridge: the answer must come back through
# the gateway, so every Service connection is masqueraded.
iptables:
  masqueradeAll: true
# conntrack's table size is the machine's, not the namespace's: left alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, n.Kubeconfig, n.Name, n.Gateway(), n.PodCIDR)
}

func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "virtop",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %[1]q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %[2]q, "gateway": %[3]q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %[4]q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, Bridge, n.PodCIDR, n.Gateway(), n.path("cni", "ipam"))
}
