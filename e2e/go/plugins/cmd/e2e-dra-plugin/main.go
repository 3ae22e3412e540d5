// Command e2e-dra-plugin is a DRA kubelet plugin for the e2e node: it publishes one ResourceSlice of
// GPUs shaped like NVIDIA's DRA driver's (driver gpu.nvidia.com, devices gpu-<index> with attributes
// type, uuid, index, minor, productName, brand, architecture and capacity memory, as in
// NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go GpuInfo.GetDevice), so the real
// scheduler allocates ResourceClaims, the real kubelet prepares them and its PodResources API reports
// them. There is no GPU: preparing a claim hands the kubelet no CDI device.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"accelscore.local/e2e/plugins/internal/devices"
)

type driver struct{ name string }

// PrepareResourceClaims returns, per claim, the devices this driver was allocated in it.
func (d *driver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		var r kubeletplugin.PrepareResult
		if c.Status.Allocation == nil {
			r.Err = fmt.Errorf("claim %s/%s is not allocated", c.Namespace, c.Name)
		} else {
			for _, a := range c.Status.Allocation.Devices.Results {
				if a.Driver == d.name {
					r.Devices = append(r.Devices, kubeletplugin.Device{Requests: []string{a.Request}, PoolName: a.Pool, DeviceName: a.Device})
				}
			}
		}
		out[c.UID] = r
	}
	return out, nil
}

// UnprepareResourceClaims has nothing to undo: preparing changed nothing on the node.
func (d *driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, c := range claims {
		out[c.UID] = nil
	}
	return out, nil
}

func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
}

// gpus shapes the devices like NVIDIA's driver: a full GPU is gpu-<index>, its uuid an attribute.
func gpus(uuids []string, product string, memory resource.Quantity) []resourceapi.Device {
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
	var out []resourceapi.Device
	for i, uuid := range uuids {
		n := int64(i)
		out = append(out, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type": str("gpu"), "uuid": str(uuid), "productName": str(product),
				"brand": str("Nvidia"), "architecture": str("Hopper"),
				"index": {IntValue: &n}, "minor": {IntValue: &n},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: memory}},
		})
	}
	return out
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the node's apiserver (required)")
	node := flag.String("node-name", "", "the Node this plugin runs on (required)")
	root := flag.String("kubelet-root-dir", "/var/lib/kubelet", "the kubelet's --root-dir")
	name := flag.String("driver", "gpu.nvidia.com", "DRA driver name")
	ids := flag.String("ids", "", "comma-separated GPU UUIDs (e.g. an NVML fixture's)")
	count := flag.Int("count", 0, "publish N GPUs with made-up UUIDs instead of -ids")
	product := flag.String("product-name", "NVIDIA H100 80GB HBM3", "productName attribute")
	memory := flag.String("memory", "80Gi", "memory capacity of each GPU")
	flag.Parse()
	if err := run(*kubeconfig, *node, *root, *name, *ids, *count, *product, *memory); err != nil {
		fmt.Fprintf(os.Stderr, "e2e-dra-plugin: %v\n", err)
		os.Exit(2)
	}
}

func run(kubeconfig, node, root, name, ids string, count int, product, memory string) error {
	if kubeconfig == "" || node == "" {
		return fmt.Errorf("-kubeconfig and -node-name are required")
	}
	uuids, err := devices.IDs(ids, count, "GPU-e2e00000-0000-0000-0000-%012d")
	if err != nil {
		return err
	}
	mem, err := resource.ParseQuantity(memory)
	if err != nil {
		return fmt.Errorf("-memory: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// the kubelet makes plugins_registry, not the driver's own directory (a driver's DaemonSet gets it from a
	// hostPath of type DirectoryOrCreate)
	dataDir := filepath.Join(root, "plugins", name)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	helper, err := kubeletplugin.Start(ctx, &driver{name: name},
		kubeletplugin.DriverName(name), kubeletplugin.NodeName(node), kubeletplugin.KubeClient(client),
		kubeletplugin.PluginDataDirectoryPath(dataDir),
		kubeletplugin.RegistrarDirectoryPath(filepath.Join(root, "plugins_registry")))
	if err != nil {
		return err
	}
	defer helper.Stop()
	pool := resourceslice.Pool{Slices: []resourceslice.Slice{{Devices: gpus(uuids, product, mem)}}}
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{node: pool}}); err != nil {
		return err
	}
	klog.Infof("published %d %s devices on node %s", len(uuids), name, node)
	<-ctx.Done()
	return nil
}
