// The Go floor: the smallest NRI plugin NRI's own stub library allows, answering
// CreateContainer with the same adjustment as the bridge's benchmark (env BENCH=1,
// cpu.shares 512). benchmarks/bench_webhook.py runs it behind the same simulator as the
// bridge, so the ratio of the two round trips is the cost of our Python plugin.
// Built by build.sh from Debian's Go toolchain and NRI source packages (no module proxy).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

type plugin struct{}

func (plugin) CreateContainer(_ context.Context, _ *api.PodSandbox, _ *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adjust := &api.ContainerAdjustment{}
	adjust.AddEnv("BENCH", "1")
	adjust.SetLinuxCPUShares(512)
	return adjust, nil, nil
}

func main() {
	socket := flag.String("nri-socket", "/var/run/nri/nri.sock", "the runtime's NRI socket")
	name := flag.String("plugin-name", "gofloor", "plugin name")
	index := flag.String("plugin-index", "10", "plugin index")
	flag.Parse()
	s, err := stub.New(plugin{}, stub.WithPluginName(*name), stub.WithPluginIdx(*index),
		stub.WithSocketPath(*socket))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gofloor:", err)
		os.Exit(1)
	}
	if err := s.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "gofloor:", err)
		os.Exit(1)
	}
}
