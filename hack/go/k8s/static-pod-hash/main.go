// Command static-pod-hash runs upstream's kubelet code (k8s.io/kubernetes v1.37.2) on
// static pod manifests, to give berth's tests values computed by upstream itself and to
// generate src/podsource/go-pod-types.ts. From hack/go/k8s:
//
//	go run ./static-pod-hash ts > ../../../src/podsource/go-pod-types.ts
//	go run ./static-pod-hash file <nodeName> <dir>        # the file source's pods (JSON)
//	go run ./static-pod-hash url <nodeName> <file> <addr>  # the URL source's pods
//	go run ./static-pod-hash dump <file>                   # the text hashed for the UID
//	go run ./static-pod-hash q <json quantity>...          # resource.Quantity in memory
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	"k8s.io/kubernetes/pkg/kubelet/config"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/utils/dump"
)

type noObs struct{}

func (noObs) ObservedPodOnWatch(logger klog.Logger, pod *v1.Pod, when time.Time) {}

func main() {
	mode := os.Args[1]
	if mode == "url" {
		fromURL(os.Args[2], os.Args[3], os.Args[4])
		return
	}
	if mode == "q" {
		quantities(os.Args[2:])
		return
	}
	if mode == "ts" {
		emitTypes()
		return
	}
	if mode == "types" {
		dumpTypes()
		return
	}
	if mode == "dump" {
		data, _ := os.ReadFile(os.Args[2])
		j, err := utilyaml.ToJSON(data)
		if err != nil {
			panic(err)
		}
		obj, err := runtime.Decode(legacyscheme.Codecs.UniversalDecoder(), j)
		if err != nil {
			panic(err)
		}
		fmt.Print(dump.ForHash(obj))
		return
	}
	// mode "file": nodeName path
	logger := klog.Background()
	cfg := config.NewPodConfig(&record.FakeRecorder{}, noObs{})
	ch := cfg.Channel(context.Background(), kubetypes.FileSource)
	go config.NewSourceFile(logger, os.Args[3], types.NodeName(os.Args[2]), time.Hour, ch)
	u := <-cfg.Updates()
	out, _ := json.MarshalIndent(u.Pods, "", "  ")
	fmt.Println(string(out))
}
