// csi-mock serves upstream's CSI mock driver (k8s.io/kubernetes
// test/e2e/storage/drivers/csi-test) as a process: controller, node and identity on
// one unix socket, as upstream's CSI mock e2e runs it. berth's end-to-end tests use it
// as the driver behind csi-provisioner, csi-attacher and the kubelet under test.
//
// Every gRPC call is logged as upstream's mock e2e logs it, one klog line
// `gRPCCall: {"Method":...,"Request":...,"Response":...,"Error":...,"FullError":...}`:
// that is the call log the tests read.
//
// Two additions for the tests, neither of which changes what the mock answers:
//   - --state-file: the mock keeps its volumes in memory, so a restarted driver would
//     answer NotFound for every volume it provisioned. Successful state-changing calls
//     are appended to this file and replayed (not logged, no directories touched) when
//     the driver starts again, as a real driver's on-disk state would survive.
//   - --faults: a JSON file, read on every call, that delays calls or fails them with
//     a gRPC code ({"NodePublishVolume": {"delay": "30s", "code": "Unavailable"}}),
//     as upstream's mock e2e injects errors through its interceptor hooks.
//   - --block-dir: block volumes get real devices, loop devices over files in that
//     directory (blockdev.go); upstream's mock publishes a directory even for block.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
	mockdriver "k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/driver"
	mockservice "k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

func main() {
	klog.InitFlags(nil)
	endpoint := flag.String("endpoint", "", "unix socket to serve on (a stale socket there is removed)")
	driverName := flag.String("driver-name", mockservice.Name, "the CSI driver name (GetPluginInfo)")
	nodeID := flag.String("node-id", "", "the node ID NodeGetInfo reports and ControllerPublishVolume expects (default: the driver name, as upstream's mock)")
	attach := flag.Bool("attach-required", true, "advertise PUBLISH_UNPUBLISH_VOLUME (false: the mock's DisableAttach)")
	attachLimit := flag.Int64("attach-limit", 0, "max_volumes_per_node in NodeGetInfo and the controller's attach limit (0: none)")
	nodeExpansion := flag.Bool("node-expansion", false, "advertise the node EXPAND_VOLUME capability")
	disableControllerExpansion := flag.Bool("disable-controller-expansion", false, "do not advertise the controller EXPAND_VOLUME capability")
	disableOnlineExpansion := flag.Bool("disable-online-expansion", false, "advertise OFFLINE instead of ONLINE volume expansion")
	permissiveTargetPath := flag.Bool("permissive-target-path", false, "the mock's PermissiveTargetPath")
	enableTopology := flag.Bool("enable-topology", false, "advertise VOLUME_ACCESSIBILITY_CONSTRAINTS and report the mock's topology segment")
	volumeCondition := flag.Bool("node-volume-condition", false, "advertise the node GET_VOLUME_HEALTH capability")
	volumeMountGroup := flag.Bool("volume-mount-group", false, "advertise the node VOLUME_MOUNT_GROUP capability")
	stateFile := flag.String("state-file", "", "where successful state-changing calls are kept and replayed from at start (default: none, volumes are forgotten on restart)")
	faultsFile := flag.String("faults", "", "JSON file of per-method delays and errors, read on every call (default: none)")
	blockDir := flag.String("block-dir", "", "where block volumes' backing files live; block publishes get a loop device (default: none, block targets are directories as in upstream's mock)")
	blockSize := flag.Int64("block-size", 16<<20, "size in bytes of a block volume's backing file")
	// The call log is klog at V(3) in upstream's driver package; log it by default.
	_ = flag.Set("v", "3")
	flag.Parse()
	if *endpoint == "" {
		fmt.Fprintln(os.Stderr, "csi-mock: --endpoint is required")
		os.Exit(2)
	}

	io := &replayDirIO{}
	svc := mockservice.New(mockservice.Config{
		DisableAttach:               !*attach,
		DriverName:                  *driverName,
		AttachLimit:                 *attachLimit,
		NodeExpansionRequired:       *nodeExpansion,
		NodeVolumeConditionRequired: *volumeCondition,
		VolumeMountGroupRequired:    *volumeMountGroup,
		DisableControllerExpansion:  *disableControllerExpansion,
		DisableOnlineExpansion:      *disableOnlineExpansion,
		PermissiveTargetPath:        *permissiveTargetPath,
		EnableTopology:              *enableTopology,
		IO:                          io,
	})
	var wrapped mockservice.Service = svc
	if *nodeID != "" && *nodeID != *driverName {
		// The mock's node ID is its driver name; translate at the edge only.
		wrapped = &nodeIDService{Service: svc, nodeID: *nodeID, mockID: *driverName}
	}
	if *blockDir != "" {
		wrapped = &blockService{Service: wrapped, dir: *blockDir, sizeBytes: *blockSize, replaying: &io.replaying}
	}
	servers := &mockdriver.CSIDriverServers{Controller: wrapped, Identity: wrapped, Node: wrapped}

	calls := &callHandler{faultsFile: *faultsFile}
	if *stateFile != "" {
		io.replaying.Store(true)
		n, err := replay(context.Background(), *stateFile, servers)
		io.replaying.Store(false)
		if err != nil {
			klog.Fatalf("csi-mock: cannot replay %s: %v", *stateFile, err)
		}
		klog.Infof("csi-mock: replayed %d calls from %s", n, *stateFile)
		if calls.state, err = os.OpenFile(*stateFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
			klog.Fatalf("csi-mock: cannot open %s: %v", *stateFile, err)
		}
	}

	if err := os.Remove(*endpoint); err != nil && !os.IsNotExist(err) {
		klog.Fatalf("csi-mock: cannot remove the stale socket %s: %v", *endpoint, err)
	}
	l, err := net.Listen("unix", *endpoint)
	if err != nil {
		klog.Fatalf("csi-mock: cannot listen on %s: %v", *endpoint, err)
	}
	drv := mockdriver.NewCSIDriver(servers)
	if err := drv.Start(l, calls.intercept); err != nil {
		klog.Fatalf("csi-mock: cannot start: %v", err)
	}
	klog.Infof("csi-mock: driver %s (node ID %s, attach required %t) serving on %s", *driverName, nodeIDOr(*nodeID, *driverName), *attach, *endpoint)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	s := <-sig
	klog.Infof("csi-mock: %v, stopping", s)
	// Stop closes the listener, which removes the socket file.
	drv.Stop()
	klog.Flush()
}

func nodeIDOr(id, fallback string) string {
	if id == "" {
		return fallback
	}
	return id
}
