// kube-get calls the Kubernetes API from inside a pod the way a client library does:
// the service-account token from the projected volume as bearer token, the server
// verified against the volume's ca.crt, the address from the service link variables.
// It prints the HTTP status line and body and exits non-zero unless the answer is 200.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kube-get: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	path := flag.String("path", "/api", "API path to GET")
	dir := flag.String("dir", "/var/run/secrets/kubernetes.io/serviceaccount", "service-account volume")
	flag.Parse()
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		fail("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set")
	}
	token, err := os.ReadFile(*dir + "/token")
	if err != nil {
		fail("cannot read the token: %v", err)
	}
	ca, err := os.ReadFile(*dir + "/ca.crt")
	if err != nil {
		fail("cannot read ca.crt: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		fail("ca.crt holds no certificate")
	}
	client := &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(host, port)+*path, nil)
	if err != nil {
		fail("bad request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := client.Do(req)
	if err != nil {
		fail("request failed: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Printf("%s\n%s\n", resp.Status, body)
	if resp.StatusCode != http.StatusOK {
		os.Exit(1)
	}
}
