// Command grpc-health serves grpc.health.v1.Health for berth's gRPC probe tests.
//
//	grpc-health -port 5000 -not-serving broken -check-delay 0s
//
// The server as a whole (service "") and every -serving service answer SERVING, the
// -not-serving services NOT_SERVING, any other service NOT_FOUND (as the upstream
// health server does). -check-delay holds every Check, to exercise probe timeouts.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func list(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func main() {
	port := flag.Int("port", 5000, "TCP port to serve on, on every address")
	serving := flag.String("serving", "", "comma-separated services that answer SERVING")
	notServing := flag.String("not-serving", "", "comma-separated services that answer NOT_SERVING")
	overall := flag.Bool("overall-not-serving", false, "the server as a whole (service \"\") answers NOT_SERVING")
	delay := flag.Duration("check-delay", 0, "hold every Check this long before answering")
	flag.Parse()

	lis, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	// The delay is an interceptor so the stock health server answers everything else.
	hold := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if *delay > 0 {
			select {
			case <-time.After(*delay):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return next(ctx, req)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(hold))
	h := health.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	if *overall {
		h.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	}
	for _, s := range list(*serving) {
		h.SetServingStatus(s, healthpb.HealthCheckResponse_SERVING)
	}
	for _, s := range list(*notServing) {
		h.SetServingStatus(s, healthpb.HealthCheckResponse_NOT_SERVING)
	}

	// As PID 1 in a container nothing else ends it on SIGTERM.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		h.Shutdown()
		srv.GracefulStop()
	}()
	log.Printf("serving grpc.health.v1.Health on %s", lis.Addr())
	if err := srv.Serve(lis); err != nil {
		log.Fatalf("serve: %v", err)
	}
}
