package main

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	mockservice "k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

// nodeIDService gives the mock a node ID other than its driver name. Upstream's mock
// reports its driver name as the node ID and checks ControllerPublishVolume's node ID
// against it; this translates between the two at the edge, so the mock's own logic
// (and its state keys) stay as upstream wrote them. Requests are cloned: the call log
// shows what the caller sent.
type nodeIDService struct {
	mockservice.Service
	nodeID string // what the kubelet and the attacher see
	mockID string // what the mock uses (its driver name)
}

func (s *nodeIDService) toMock(id string) string {
	if id == s.nodeID {
		return s.mockID
	}
	return id
}

func (s *nodeIDService) fromMock(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		if id == s.mockID {
			id = s.nodeID
		}
		out[i] = id
	}
	return out
}

func (s *nodeIDService) NodeGetInfo(ctx context.Context, req *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	resp, err := s.Service.NodeGetInfo(ctx, req)
	if resp != nil {
		resp.NodeId = s.nodeID
	}
	return resp, err
}

func (s *nodeIDService) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	r := proto.Clone(req).(*csi.ControllerPublishVolumeRequest)
	r.NodeId = s.toMock(r.NodeId)
	return s.Service.ControllerPublishVolume(ctx, r)
}

func (s *nodeIDService) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	r := proto.Clone(req).(*csi.ControllerUnpublishVolumeRequest)
	r.NodeId = s.toMock(r.NodeId)
	return s.Service.ControllerUnpublishVolume(ctx, r)
}

func (s *nodeIDService) ControllerGetVolume(ctx context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	resp, err := s.Service.ControllerGetVolume(ctx, req)
	if resp.GetStatus() != nil {
		resp.Status.PublishedNodeIds = s.fromMock(resp.Status.PublishedNodeIds)
	}
	return resp, err
}

func (s *nodeIDService) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	resp, err := s.Service.ListVolumes(ctx, req)
	for _, e := range resp.GetEntries() {
		if e.GetStatus() != nil {
			e.Status.PublishedNodeIds = s.fromMock(e.Status.PublishedNodeIds)
		}
	}
	return resp, err
}
