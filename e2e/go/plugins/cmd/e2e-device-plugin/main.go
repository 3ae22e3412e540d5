// Command e2e-device-plugin advertises GPUs to the e2e node's real kubelet through the device-plugin API
// (deviceplugin/v1beta1), so the scheduler, the kubelet and its PodResources API handle nvidia.com/gpu as
// on a GPU node. There is no GPU: Allocate only hands the container its device IDs in FAKE_DEVICES. With
// -ids, the IDs can be an NVML fixture's UUIDs, so accelscore joins PodResources to its fake NVML.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pb "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"accelscore.local/e2e/plugins/internal/devices"
)

type plugin struct {
	pb.UnimplementedDevicePluginServer
	devices []*pb.Device
	known   map[string]bool
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pb.Empty) (*pb.DevicePluginOptions, error) {
	return &pb.DevicePluginOptions{}, nil
}

// ListAndWatch sends the fixed device list once; the devices never change while the plugin runs.
func (p *plugin) ListAndWatch(_ *pb.Empty, s grpc.ServerStreamingServer[pb.ListAndWatchResponse]) error {
	if err := s.Send(&pb.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// Allocate sets FAKE_DEVICES to the IDs given to each container, refusing IDs it never advertised.
func (p *plugin) Allocate(_ context.Context, req *pb.AllocateRequest) (*pb.AllocateResponse, error) {
	resp := &pb.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		for _, id := range c.DevicesIds {
			if !p.known[id] {
				return nil, fmt.Errorf("unknown device %q", id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pb.ContainerAllocateResponse{
			Envs: map[string]string{"FAKE_DEVICES": strings.Join(c.DevicesIds, ",")},
		})
	}
	return resp, nil
}

func main() {
	resource := flag.String("resource", "nvidia.com/gpu", "extended resource name to advertise")
	ids := flag.String("ids", "", "comma-separated device IDs (e.g. an NVML fixture's GPU UUIDs)")
	count := flag.Int("count", 0, "advertise N devices fake-gpu-0..N-1 instead of -ids")
	dir := flag.String("plugin-dir", pb.DevicePluginPath, "the kubelet's device-plugin directory")
	flag.Parse()
	list, err := devices.IDs(*ids, *count, "fake-gpu-%d")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e-device-plugin: %v\n", err)
		os.Exit(2)
	}
	p := &plugin{known: map[string]bool{}}
	for _, id := range list {
		p.devices = append(p.devices, &pb.Device{ID: id, Health: pb.Healthy})
		p.known[id] = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sock := filepath.Join(*dir, "e2e-device-plugin.sock")
	for ctx.Err() == nil {
		if err := serveOnce(ctx, p, sock, filepath.Join(*dir, "kubelet.sock"), *resource); err != nil {
			log.Printf("%v; retrying", err)
			sleep(ctx, time.Second)
		}
	}
}

// serveOnce serves the plugin socket, registers with the kubelet and returns when the kubelet restarts
// (it removes plugin sockets and makes a new kubelet.sock), so the caller serves and registers again.
func serveOnce(ctx context.Context, p *plugin, sock, kubeletSock, resource string) error {
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	pb.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	kubelet, err := inode(kubeletSock)
	if err != nil {
		return fmt.Errorf("no kubelet socket: %w", err)
	}
	if err := register(ctx, kubeletSock, filepath.Base(sock), resource); err != nil {
		return err
	}
	log.Printf("registered %s with %d devices", resource, len(p.devices))
	for sleep(ctx, time.Second) {
		now, err := inode(kubeletSock)
		if _, mine := os.Stat(sock); err != nil || now != kubelet || mine != nil {
			log.Printf("kubelet restarted; registering again")
			return nil
		}
	}
	return nil
}

func register(ctx context.Context, kubeletSock, endpoint, resource string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pb.NewRegistrationClient(conn).Register(ctx, &pb.RegisterRequest{
		Version: pb.Version, Endpoint: endpoint, ResourceName: resource, Options: &pb.DevicePluginOptions{},
	})
	return err
}

func inode(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Sys().(*syscall.Stat_t).Ino, nil
}

// sleep waits d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
