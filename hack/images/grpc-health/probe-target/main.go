// Command probe-target is the probe benchmark's HTTP server (bench/probe-pods.ts).
//
//	probe-target -port 8080 -dir /log          serve; GET /<name> appends to <dir>/<name>.log
//	probe-target -cat /log/r.log               print a log (for CRI ExecSync: the image has no cat)
//
// Every request appends the wall-clock time it reached the server, as
// "<seconds>.<microseconds>\n", to the log named by the request path's last element,
// then answers 200 "ok". It forks nothing and keeps each log open, so what the
// benchmark reads is when the node agent's probe arrived, not how long a shell took
// to start under load (the CGI scripts this replaces forked three processes per probe).
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// A log name is one short path element: nothing a request could use to leave -dir.
var logName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

type logs struct {
	dir   string
	mu    sync.Mutex
	files map[string]*os.File
}

func (l *logs) file(name string) (*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f, ok := l.files[name]; ok {
		return f, nil
	}
	f, err := os.OpenFile(filepath.Join(l.dir, name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	l.files[name] = f
	return f, nil
}

func (l *logs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Taken first, before anything this server does could delay it.
	now := time.Now()
	name := path.Base(r.URL.Path)
	if !logName.MatchString(name) {
		http.Error(w, "no such log", http.StatusNotFound)
		return
	}
	f, err := l.file(name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// One write per line with O_APPEND: concurrent requests never interleave a line.
	line := fmt.Sprintf("%d.%06d\n", now.Unix(), now.Nanosecond()/1000)
	if _, err := f.WriteString(line); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ok\n")
}

func main() {
	port := flag.Int("port", 8080, "TCP port to serve on, on every address")
	dir := flag.String("dir", "/log", "directory of the request logs")
	cat := flag.String("cat", "", "print this file and exit")
	flag.Parse()

	if *cat != "" {
		f, err := os.Open(*cat)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := io.Copy(os.Stdout, f); err != nil {
			log.Fatal(err)
		}
		return
	}

	srv := &http.Server{
		Addr:              fmt.Sprintf(":%d", *port),
		Handler:           &logs{dir: *dir, files: map[string]*os.File{}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	// As PID 1 in a container nothing else ends it on SIGTERM.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
