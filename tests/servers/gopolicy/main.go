// The conformance matrix's small policy on Go's net/http (standard library only):
// CreateContainer -> env TEAM from the pod label example.com/team, as the SDK example
// examples/label_env_policy.py answers it. Built by build.sh from Debian's Go toolchain.
//
//	gopolicy -fd N [-idle SECONDS] [-close-always]
//
// Routes: /v1/policy (Content-Length), /chunked (two flushed writes, chunked framing),
// /close (Connection: close), /interim (a 103 Early Hints before the reply).
// -idle sets Server.IdleTimeout (Go's default: none, an idle connection is kept until the
// client closes it); -close-always turns keep-alive off (SetKeepAlivesEnabled(false)).
package main

import (
	"encoding/json"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

type event struct {
	Pod struct {
		Labels map[string]string `json:"labels"`
	} `json:"pod"`
}

func decide(body []byte) []byte {
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		return []byte(`{}`)
	}
	team, ok := ev.Pod.Labels["example.com/team"]
	if !ok {
		return []byte(`{}`)
	}
	out, _ := json.Marshal(map[string]any{"adjust": map[string]any{
		"env": []map[string]string{{"key": "TEAM", "value": team}}}})
	return out
}

func handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	reply := decide(body)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/chunked":
		w.Write(reply[:5])
		w.(http.Flusher).Flush()
		w.Write(reply[5:])
		return
	case "/interim":
		w.Header().Set("Link", "</x>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
	case "/close":
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
	w.Write(reply)
}

func main() {
	fd := flag.Int("fd", 3, "inherited listening socket")
	idle := flag.Float64("idle", 0, "IdleTimeout in seconds (0: Go's default)")
	closeAlways := flag.Bool("close-always", false, "no keep-alive")
	flag.Parse()
	ln, err := net.FileListener(os.NewFile(uintptr(*fd), "listener"))
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(handle)}
	if *idle > 0 {
		srv.IdleTimeout = time.Duration(*idle * float64(time.Second))
	}
	srv.SetKeepAlivesEnabled(!*closeAlways)
	log.Fatal(srv.Serve(ln))
}
