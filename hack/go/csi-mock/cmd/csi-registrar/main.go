// csi-registrar stands in for node-driver-registrar (which the Go module proxy does not
// serve) in berth's end-to-end tests: it serves the kubelet's plugin registration
// service (k8s.io/kubelet pluginregistration/v1) for one CSI driver on
// <kubelet root>/plugins_registry/<driver>-reg.sock, where the kubelet's plugin watcher
// finds it, and logs what the kubelet asks and tells it.
//
// As node-driver-registrar: GetInfo answers type CSIPlugin, the driver name, the
// driver's socket path and the supported versions; SIGTERM removes the socket (the
// kubelet then deregisters the driver). Unlike it, a failed registration is only
// logged, not a reason to exit: the tests read the log.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type registrar struct {
	registerapi.UnimplementedRegistrationServer
	info *registerapi.PluginInfo
}

func (r *registrar) GetInfo(ctx context.Context, req *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	klog.Infof("csi-registrar: GetInfo: answering type=%s name=%s endpoint=%s versions=%v",
		r.info.Type, r.info.Name, r.info.Endpoint, r.info.SupportedVersions)
	return r.info, nil
}

func (r *registrar) NotifyRegistrationStatus(ctx context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		klog.Infof("csi-registrar: NotifyRegistrationStatus: registered=true")
	} else {
		klog.Errorf("csi-registrar: NotifyRegistrationStatus: registered=false error=%q", s.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

func main() {
	klog.InitFlags(nil)
	driverName := flag.String("driver-name", "", "the CSI driver name (GetInfo's name)")
	endpoint := flag.String("csi-address", "", "the driver's socket as the kubelet reaches it (GetInfo's endpoint)")
	socket := flag.String("socket", "", "where to serve registration (default <kubelet-root>/plugins_registry/<driver>-reg.sock)")
	kubeletRoot := flag.String("kubelet-root", "/var/lib/kubelet", "the kubelet's root directory (for the default --socket)")
	versions := flag.String("versions", "1.0.0", "comma-separated supported_versions")
	flag.Parse()
	if *driverName == "" || *endpoint == "" {
		fmt.Fprintln(os.Stderr, "csi-registrar: --driver-name and --csi-address are required")
		os.Exit(2)
	}
	if *socket == "" {
		*socket = filepath.Join(*kubeletRoot, "plugins_registry", *driverName+"-reg.sock")
	}

	if err := os.MkdirAll(filepath.Dir(*socket), 0o750); err != nil {
		klog.Fatalf("csi-registrar: %v", err)
	}
	if err := os.Remove(*socket); err != nil && !os.IsNotExist(err) {
		klog.Fatalf("csi-registrar: cannot remove the stale socket %s: %v", *socket, err)
	}
	l, err := net.Listen("unix", *socket)
	if err != nil {
		klog.Fatalf("csi-registrar: cannot listen on %s: %v", *socket, err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, &registrar{info: &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              *driverName,
		Endpoint:          *endpoint,
		SupportedVersions: strings.Split(*versions, ","),
	}})
	klog.Infof("csi-registrar: driver %s (endpoint %s) registering through %s", *driverName, *endpoint, *socket)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sig
		klog.Infof("csi-registrar: %v, removing %s", s, *socket)
		// Stop closes the listener, which removes the socket: the kubelet deregisters.
		srv.Stop()
	}()
	if err := srv.Serve(l); err != nil {
		klog.Errorf("csi-registrar: %v", err)
	}
	_ = os.Remove(*socket)
	klog.Flush()
}
