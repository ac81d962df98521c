package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/config"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// fromURL serves a manifest at a fixed address and reads it through upstream's URL source.
func fromURL(nodeName, file, addr string) {
	data, _ := os.ReadFile(file)
	go http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(data) }))
	time.Sleep(200 * time.Millisecond)
	cfg := config.NewPodConfig(&record.FakeRecorder{}, noObs{})
	ch := cfg.Channel(context.Background(), kubetypes.HTTPSource)
	config.NewSourceURL(klog.Background(), "http://"+addr+"/pod", http.Header{}, types.NodeName(nodeName), time.Hour, ch)
	u := <-cfg.Updates()
	out, _ := json.MarshalIndent(u.Pods, "", "  ")
	fmt.Println(string(out))
}
