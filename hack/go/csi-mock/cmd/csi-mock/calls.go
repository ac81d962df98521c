package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"
	mockdriver "k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/driver"
	mockservice "k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

// The calls whose success changes the mock's state: replaying them in order rebuilds
// the same volumes with the same IDs (the mock numbers volumes from a counter).
var stateful = map[string]bool{
	"CreateVolume": true, "DeleteVolume": true,
	"ControllerPublishVolume": true, "ControllerUnpublishVolume": true, "ControllerExpandVolume": true,
	"NodeStageVolume": true, "NodeUnstageVolume": true,
	"NodePublishVolume": true, "NodeUnpublishVolume": true, "NodeExpandVolume": true,
}

type fault struct {
	// Delay before the call runs (a Go duration); the caller's deadline still applies.
	Delay string `json:"delay"`
	// A gRPC code name (NotFound, Unavailable, ...): the call fails with it, unhandled.
	Code    string `json:"code"`
	Message string `json:"message"`
}

type callHandler struct {
	faultsFile string
	mu         sync.Mutex
	state      *os.File
}

// intercept is what upstream's mock e2e does in its interceptor (faults from hooks,
// then the handler, then the call logged whatever happened), plus the state file.
func (h *callHandler) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() { logGRPC(info.FullMethod, req, resp, err) }()
	method := path.Base(info.FullMethod)
	f, err := h.fault(method)
	if err != nil {
		return nil, grpcstatus.Errorf(codes.Internal, "csi-mock: faults file: %v", err)
	}
	if f != nil {
		if f.Delay != "" {
			d, perr := time.ParseDuration(f.Delay)
			if perr != nil {
				return nil, grpcstatus.Errorf(codes.Internal, "csi-mock: faults file: %s: bad delay %q", method, f.Delay)
			}
			klog.Infof("csi-mock: delaying %s by %s (faults file)", method, d)
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, grpcstatus.FromContextError(ctx.Err()).Err()
			}
		}
		if f.Code != "" {
			var c codes.Code
			if cerr := c.UnmarshalJSON([]byte(`"` + strings.ToUpper(toSnake(f.Code)) + `"`)); cerr != nil {
				return nil, grpcstatus.Errorf(codes.Internal, "csi-mock: faults file: %s: unknown code %q", method, f.Code)
			}
			msg := f.Message
			if msg == "" {
				msg = "injected by the faults file"
			}
			return nil, grpcstatus.Error(c, msg)
		}
	}
	resp, err = callRecovering(ctx, req, info, handler)
	if err == nil && stateful[method] && h.state != nil {
		h.record(info.FullMethod, req)
	}
	return resp, err
}

func (h *callHandler) fault(method string) (*fault, error) {
	if h.faultsFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(h.faultsFile)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	faults := map[string]fault{}
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := json.Unmarshal(data, &faults); err != nil {
			return nil, err
		}
	}
	if f, ok := faults[method]; ok {
		return &f, nil
	}
	return nil, nil
}

// toSnake turns a Go-style code name (DeadlineExceeded) into the JSON form (DEADLINE_EXCEEDED).
func toSnake(s string) string {
	if strings.Contains(s, "_") || strings.ToUpper(s) == s {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

type stateEntry struct {
	Method  string          `json:"method"`
	Request json.RawMessage `json:"request"`
}

func (h *callHandler) record(fullMethod string, req any) {
	msg, ok := req.(proto.Message)
	if !ok {
		return
	}
	body, err := protojson.Marshal(msg)
	if err != nil {
		klog.Errorf("csi-mock: cannot record %s: %v", fullMethod, err)
		return
	}
	line, _ := json.Marshal(stateEntry{Method: fullMethod, Request: body})
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.state.Write(append(line, '\n')); err != nil {
		klog.Errorf("csi-mock: cannot record %s: %v", fullMethod, err)
	}
}

// replay runs the recorded calls through the services' own gRPC method handlers
// (no interceptor, so nothing is logged as a call).
func replay(ctx context.Context, file string, servers *mockdriver.CSIDriverServers) (int, error) {
	fh, err := os.Open(file)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	type target struct {
		srv any
		h   grpc.MethodHandler
	}
	methods := map[string]target{}
	for _, d := range []struct {
		desc *grpc.ServiceDesc
		srv  any
	}{{&csi.Controller_ServiceDesc, servers.Controller}, {&csi.Node_ServiceDesc, servers.Node}} {
		for _, m := range d.desc.Methods {
			methods["/"+d.desc.ServiceName+"/"+m.MethodName] = target{d.srv, m.Handler}
		}
	}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	n := 0
	for sc.Scan() {
		var e stateEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// A line cut short by a kill: everything before it was replayed.
			klog.Warningf("csi-mock: %s: skipping an unreadable line: %v", file, err)
			continue
		}
		t, ok := methods[e.Method]
		if !ok {
			return n, fmt.Errorf("unknown method %s", e.Method)
		}
		dec := func(v any) error { return protojson.Unmarshal(e.Request, v.(proto.Message)) }
		if _, err := t.h(t.srv, ctx, dec, nil); err != nil {
			klog.Warningf("csi-mock: replaying %s failed: %v", e.Method, err)
		}
		n++
	}
	return n, sc.Err()
}

// replayDirIO is the mock's directory access, inert while the state file is replayed:
// the directories a replayed NodePublishVolume made are the kubelet's business now.
type replayDirIO struct {
	replaying atomic.Bool
	os        mockservice.OSDirIO
}

func (r *replayDirIO) DirExists(p string) (bool, error) {
	if r.replaying.Load() {
		return true, nil
	}
	return r.os.DirExists(p)
}

func (r *replayDirIO) Mkdir(p string) error {
	if r.replaying.Load() {
		return nil
	}
	return r.os.Mkdir(p)
}

func (r *replayDirIO) RemoveAll(p string) error {
	if r.replaying.Load() {
		return nil
	}
	return r.os.RemoveAll(p)
}

func (r *replayDirIO) Rename(oldPath, newPath string) error {
	if r.replaying.Load() {
		return nil
	}
	return r.os.Rename(oldPath, newPath)
}

// logGRPC writes the line upstream's mock e2e writes for each call
// (test/e2e/storage/drivers/csi.go, MockCSICalls.LogGRPC): tests parse it.
func logGRPC(method string, request, reply any, err error) {
	logMessage := struct {
		Method    string
		Request   any
		Response  any
		Error     string
		FullError *spb.Status
	}{Method: method, Request: request, Response: reply}
	if err != nil {
		logMessage.Error = err.Error()
		logMessage.FullError = grpcstatus.Convert(err).Proto()
	}
	msg, _ := json.Marshal(logMessage)
	klog.Infof("gRPCCall: %s", msg)
}

// callRecovering runs the mock's handler and turns a panic into an Internal error: the
// mock dereferences a nil volume when it publishes an inline ephemeral volume
// (mock/service/node.go, NodePublishVolume), and one such call must not take the whole
// driver - and every other test's volumes - down with it.
func callRecovering(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			klog.Errorf("csi-mock: %s panicked: %v", info.FullMethod, r)
			resp, err = nil, grpcstatus.Errorf(codes.Internal, "csi-mock: %s panicked: %v", path.Base(info.FullMethod), r)
		}
	}()
	return handler(ctx, req)
}
