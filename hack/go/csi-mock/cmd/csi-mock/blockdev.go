package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	mockservice "k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

// blockService gives the mock real block devices. Upstream's mock makes every
// NodePublishVolume target a directory, block or not; a kubelet mapping a block volume
// needs a device there. With --block-dir, each volume gets a sparse backing file in that
// directory (kept across stage/unstage and restarts, as a disk would be), attached to a
// loop device on NodeStageVolume (or on the first NodePublishVolume), and a block
// publish replaces the mock's directory with a file the loop device is bind-mounted on.
// NodeUnpublishVolume unmounts it before the mock removes it; NodeUnstageVolume
// detaches the loop device. Mount requests are left to the mock as upstream wrote it.
type blockService struct {
	mockservice.Service
	dir       string
	sizeBytes int64
	replaying *atomic.Bool
}

func isBlock(c *csi.VolumeCapability) bool { return c.GetBlock() != nil }

func (s *blockService) backingFile(volumeID string) string {
	sum := sha256.Sum256([]byte(volumeID))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:])+".img")
}

// loopOf returns the loop device backed by the volume's file, or "".
func loopOf(file string) (string, error) {
	out, err := exec.Command("losetup", "-j", file).Output()
	if err != nil {
		return "", fmt.Errorf("losetup -j %s: %w", file, err)
	}
	line := strings.TrimSpace(string(out))
	if line == "" {
		return "", nil
	}
	return strings.SplitN(line, ":", 2)[0], nil
}

// attach makes (once) the volume's backing file and returns its loop device.
func (s *blockService) attach(volumeID string) (string, error) {
	file := s.backingFile(volumeID)
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	st, err := f.Stat()
	if err == nil && st.Size() == 0 {
		err = f.Truncate(s.sizeBytes)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	if dev, err := loopOf(file); err != nil || dev != "" {
		return dev, err
	}
	out, err := exec.Command("losetup", "-f", "--show", file).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("losetup -f %s: %v: %s", file, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func internal(format string, args ...any) error {
	return status.Errorf(codes.Internal, format, args...)
}

func (s *blockService) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	resp, err := s.Service.NodeStageVolume(ctx, req)
	if err != nil || !isBlock(req.GetVolumeCapability()) || s.replaying.Load() {
		return resp, err
	}
	if _, err := s.attach(req.GetVolumeId()); err != nil {
		return nil, internal("cannot attach the block device of %s: %v", req.GetVolumeId(), err)
	}
	return resp, nil
}

func (s *blockService) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	resp, err := s.Service.NodePublishVolume(ctx, req)
	if err != nil || !isBlock(req.GetVolumeCapability()) || s.replaying.Load() {
		return resp, err
	}
	target := req.GetTargetPath()
	if st, err := os.Lstat(target); err == nil && st.Mode()&os.ModeDevice != 0 {
		return resp, nil // published before
	}
	dev, err := s.attach(req.GetVolumeId())
	if err != nil {
		return nil, internal("cannot attach the block device of %s: %v", req.GetVolumeId(), err)
	}
	// The mock made the target a directory; a block target is a file the device is bound on.
	if err := os.Remove(target); err != nil && !os.IsNotExist(err) {
		return nil, internal("cannot replace %s: %v", target, err)
	}
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		return nil, internal("cannot create %s: %v", target, err)
	}
	if out, err := exec.Command("mount", "--bind", dev, target).CombinedOutput(); err != nil {
		_ = os.Remove(target)
		return nil, internal("mount --bind %s %s: %v: %s", dev, target, err, out)
	}
	return resp, nil
}

func (s *blockService) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if !s.replaying.Load() {
		if st, err := os.Lstat(target); err == nil && st.Mode()&os.ModeDevice != 0 {
			if out, err := exec.Command("umount", target).CombinedOutput(); err != nil {
				return nil, internal("umount %s: %v: %s", target, err, out)
			}
		}
	}
	return s.Service.NodeUnpublishVolume(ctx, req)
}

func (s *blockService) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	resp, err := s.Service.NodeUnstageVolume(ctx, req)
	if err != nil || s.replaying.Load() {
		return resp, err
	}
	file := s.backingFile(req.GetVolumeId())
	if _, statErr := os.Stat(file); statErr != nil {
		return resp, nil // never a block volume
	}
	dev, err := loopOf(file)
	if err != nil {
		return nil, internal("%v", err)
	}
	if dev != "" {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			return nil, internal("losetup -d %s: %v: %s", dev, err, out)
		}
	}
	return resp, nil
}
