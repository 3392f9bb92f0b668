// A minimal runtime on Debian's libcni (golang-github-appc-cni-dev), for interop tests:
//
//	libcni_tool add|del|check|cached NETCONFDIR NETWORK NETNS CONTAINER-ID CACHEDIR CNIPATH
//
// CNI_IFNAME (default eth0), CNI_ARGS (K=V;…) and CAP_ARGS (JSON) as cnitool reads them.
// make bench also runs it as podman's libcni: with TIMING_FILE set, the microseconds spent
// in the one libcni call (every plugin exec'd, as podman waits for them; not this tool's own
// start-up, which a long-running runtime does not pay per container) are written there.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
)

func fail(err error) {
	fmt.Fprintf(os.Stderr, "libcni_tool: %v\n", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 8 {
		fail(fmt.Errorf("usage: libcni_tool add|del|check|cached NETCONFDIR NETWORK NETNS CONTAINER-ID CACHEDIR CNIPATH"))
	}
	cmd, dir, name, netns, cid, cacheDir, path := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[6], os.Args[7]
	list, err := libcni.LoadConfList(dir, name)
	if err != nil {
		fail(err)
	}
	ifname := os.Getenv("CNI_IFNAME")
	if ifname == "" {
		ifname = "eth0"
	}
	rt := &libcni.RuntimeConf{ContainerID: cid, NetNS: netns, IfName: ifname}
	if a := os.Getenv("CNI_ARGS"); a != "" {
		for _, pair := range strings.Split(a, ";") {
			kv := strings.SplitN(pair, "=", 2)
			rt.Args = append(rt.Args, [2]string{kv[0], kv[1]})
		}
	}
	if c := os.Getenv("CAP_ARGS"); c != "" {
		if err := json.Unmarshal([]byte(c), &rt.CapabilityArgs); err != nil {
			fail(err)
		}
	}
	cni := libcni.NewCNIConfigWithCacheDir(filepath.SplitList(path), cacheDir, nil)
	ctx := context.Background()
	start := time.Now()
	timed := func() {
		if f := os.Getenv("TIMING_FILE"); f != "" {
			_ = os.WriteFile(f, []byte(fmt.Sprintf("%d\n", time.Since(start).Microseconds())), 0o644)
		}
	}
	switch cmd {
	case "add":
		res, err := cni.AddNetworkList(ctx, list, rt)
		if err != nil {
			fail(err)
		}
		timed()
		_ = res.Print()
	case "del":
		if err := cni.DelNetworkList(ctx, list, rt); err != nil {
			fail(err)
		}
		timed()
	case "check":
		if err := cni.CheckNetworkList(ctx, list, rt); err != nil {
			fail(err)
		}
	case "cached":
		res, err := cni.GetNetworkListCachedResult(list, rt)
		if err != nil {
			fail(err)
		}
		if res == nil {
			fail(fmt.Errorf("no cached result"))
		}
		_ = res.Print()
	default:
		fail(fmt.Errorf("unknown command %q", cmd))
	}
}
