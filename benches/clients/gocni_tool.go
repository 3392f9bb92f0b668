// containerd's CRI as it calls CNI, for make bench: go-cni 1.1.7 (Debian's
// golang-github-containerd-go-cni-dev) loads the first conflist of CONFDIR plus its own
// loopback network, and Setup/Remove attach both, as containerd 1.6 does for every pod.
//
//	gocni_tool setup|remove CONFDIR NETNS CONTAINER-ID CACHEDIR CNIPATH
//
// With TIMING_FILE set, the microseconds spent in Setup/Remove (every plugin exec'd; not
// this tool's start-up, which the long-running containerd does not pay per pod) go there.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	gocni "github.com/containerd/go-cni"
	"github.com/containernetworking/cni/libcni"
)

func fail(err error) {
	fmt.Fprintf(os.Stderr, "gocni_tool: %v\n", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 7 {
		fail(fmt.Errorf("usage: gocni_tool setup|remove CONFDIR NETNS CONTAINER-ID CACHEDIR CNIPATH"))
	}
	cmd, dir, netns, id, cacheDir, path := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[6]
	// go-cni 1.1.7 has no cache-dir option; libcni's default would be the host's /var/lib/cni
	libcni.CacheDir = cacheDir
	cni, err := gocni.New(
		gocni.WithMinNetworkCount(2),
		gocni.WithPluginConfDir(dir),
		gocni.WithPluginDir(filepath.SplitList(path)),
		gocni.WithInterfacePrefix("eth"),
	)
	if err != nil {
		fail(err)
	}
	if err := cni.Load(gocni.WithLoNetwork, gocni.WithDefaultConf); err != nil {
		fail(err)
	}
	// what the CRI passes for a pod without host ports
	opts := []gocni.NamespaceOpts{
		gocni.WithLabels(map[string]string{
			"IgnoreUnknown":              "1",
			"K8S_POD_NAMESPACE":          "default",
			"K8S_POD_NAME":               "bench-" + id,
			"K8S_POD_INFRA_CONTAINER_ID": id,
			"K8S_POD_UID":                "uid-" + id,
		}),
		gocni.WithCapabilityPortMap([]gocni.PortMapping{}),
	}
	ctx := context.Background()
	start := time.Now()
	switch cmd {
	case "setup":
		_, err = cni.Setup(ctx, id, netns, opts...)
	case "remove":
		err = cni.Remove(ctx, id, netns, opts...)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fail(err)
	}
	if f := os.Getenv("TIMING_FILE"); f != "" {
		_ = os.WriteFile(f, []byte(fmt.Sprintf("%d\n", time.Since(start).Microseconds())), 0o644)
	}
}
