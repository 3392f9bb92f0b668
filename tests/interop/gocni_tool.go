// containerd's CRI as it drives CNI, on go-cni 1.1.7 (Debian's
// golang-github-containerd-go-cni-dev): the integration tests' containerd client and
// make bench's.
//
//	gocni_tool setup|remove CONFDIR NETNS SANDBOX-ID CACHEDIR CNIPATH
//
// As containerd 1.6's CRI plugin (pkg/cri/server: service_linux.go initPlatform,
// sandbox_run.go, sandbox_stop.go): go-cni with WithMinNetworkCount(2) and the default
// interface prefix "eth" loads its own cni-loopback network (on lo) and the first network
// config of CONFDIR (on eth0). Both get the same options, built from the pod as CRI builds
// them: the K8S_POD_* labels with IgnoreUnknown (CNI_ARGS), the pod's annotations as the
// io.kubernetes.cri.pod-annotations capability, its host ports as portMappings (go-cni's
// PortMapping, which has no JSON tags: the plugins see "HostPort", "ContainerPort"…), the
// kubernetes.io/ingress-bandwidth and egress-bandwidth annotations as bandwidth (go-cni's
// BandWidth, bursts math.MaxUint32 as CRI sets them), its DNS config as dns (go-cni's DNS).
// CRI sends no ipRanges; POD's ipRanges are sent as go-cni's IPRanges in the capability's
// list-of-range-sets shape, ipRangesFlat through go-cni's own WithCapabilityIPRanges.
//
// POD (optional) is the pod sandbox's config in CRI's field names:
//
//	{"metadata": {"name", "namespace", "uid"}, "annotations": {…},
//	 "portMappings": [{"protocol": "TCP", "containerPort", "hostPort", "hostIp"}],
//	 "dnsConfig": {"servers", "searches", "options"}, "ipRanges": [[…]], "ipRangesFlat": […]}
//
// setup is RunPodSandbox's network part: Setup, and when it fails (or eth0 has no address)
// the teardown containerd runs then, Remove with the same options. It prints what containerd
// keeps, {"podIP", "additionalIPs", "result": go-cni's Result, "raw": each network's result},
// or on failure {"setupError", "teardownError"} and exits 1. remove is StopPodSandbox's
// teardown. With TIMING_FILE set, the microseconds spent in Setup/Remove (every plugin
// exec'd; not this tool's start-up, which the long-running containerd does not pay per pod)
// go there.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	gocni "github.com/containerd/go-cni"
	"github.com/containernetworking/cni/libcni"
)

type portMapping struct {
	Protocol      string `json:"protocol"`
	ContainerPort int32  `json:"containerPort"`
	HostPort      int32  `json:"hostPort"`
	HostIP        string `json:"hostIp"`
}

type pod struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
	} `json:"metadata"`
	Annotations  map[string]string `json:"annotations"`
	PortMappings []portMapping     `json:"portMappings"`
	DNSConfig    *struct {
		Servers  []string `json:"servers"`
		Searches []string `json:"searches"`
		Options  []string `json:"options"`
	} `json:"dnsConfig"`
	IPRanges     [][]gocni.IPRanges `json:"ipRanges"`
	IPRangesFlat []gocni.IPRanges   `json:"ipRangesFlat"`
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "gocni_tool: %v\n", err)
	os.Exit(1)
}

// quantity reads a Kubernetes quantity as the bandwidth annotations use it ("10M", "1Gi",
// "500k"), whole values only.
func quantity(s string) (uint64, error) {
	units := []struct {
		suffix string
		factor uint64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			n, err := strconv.ParseUint(strings.TrimSuffix(s, u.suffix), 10, 64)
			return n * u.factor, err
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

// namespaceOpts are CRI's cniNamespaceOpts for sandbox `id`.
func namespaceOpts(id string, p *pod) ([]gocni.NamespaceOpts, error) {
	opts := []gocni.NamespaceOpts{
		gocni.WithLabels(map[string]string{
			"K8S_POD_NAMESPACE":          p.Metadata.Namespace,
			"K8S_POD_NAME":               p.Metadata.Name,
			"K8S_POD_INFRA_CONTAINER_ID": id,
			"K8S_POD_UID":                p.Metadata.UID,
			"IgnoreUnknown":              "1",
		}),
		gocni.WithCapability("io.kubernetes.cri.pod-annotations", p.Annotations),
	}
	var ports []gocni.PortMapping
	for _, m := range p.PortMappings {
		if m.HostPort <= 0 {
			continue
		}
		ports = append(ports, gocni.PortMapping{
			HostPort:      m.HostPort,
			ContainerPort: m.ContainerPort,
			Protocol:      strings.ToLower(m.Protocol),
			HostIP:        m.HostIP,
		})
	}
	if len(ports) > 0 {
		opts = append(opts, gocni.WithCapabilityPortMap(ports))
	}
	in, hasIn := p.Annotations["kubernetes.io/ingress-bandwidth"]
	out, hasOut := p.Annotations["kubernetes.io/egress-bandwidth"]
	if hasIn || hasOut {
		bw := gocni.BandWidth{}
		if hasIn {
			rate, err := quantity(in)
			if err != nil {
				return nil, fmt.Errorf("reading pod bandwidth annotations: %w", err)
			}
			bw.IngressRate, bw.IngressBurst = rate, math.MaxUint32
		}
		if hasOut {
			rate, err := quantity(out)
			if err != nil {
				return nil, fmt.Errorf("reading pod bandwidth annotations: %w", err)
			}
			bw.EgressRate, bw.EgressBurst = rate, math.MaxUint32
		}
		opts = append(opts, gocni.WithCapabilityBandWidth(bw))
	}
	if d := p.DNSConfig; d != nil {
		opts = append(opts, gocni.WithCapabilityDNS(gocni.DNS{Servers: d.Servers, Searches: d.Searches, Options: d.Options}))
	}
	if p.IPRanges != nil {
		opts = append(opts, gocni.WithCapability("ipRanges", p.IPRanges))
	}
	if p.IPRangesFlat != nil {
		opts = append(opts, gocni.WithCapabilityIPRanges(p.IPRangesFlat))
	}
	return opts, nil
}

// podIPs is CRI's selectPodIPs with the default preference: the first IPv4 address of eth0,
// then every other one.
func podIPs(configs []*gocni.IPConfig) (string, []string) {
	all := []string{}
	for _, c := range configs {
		all = append(all, c.IP.String())
	}
	for i, c := range configs {
		if c.IP.To4() != nil {
			return all[i], append(append([]string{}, all[:i]...), all[i+1:]...)
		}
	}
	return all[0], all[1:]
}

func printJSON(v interface{}) {
	b, err := json.Marshal(v)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(b))
}

func main() {
	if len(os.Args) != 7 {
		fail(fmt.Errorf("usage: gocni_tool setup|remove CONFDIR NETNS SANDBOX-ID CACHEDIR CNIPATH"))
	}
	cmd, dir, netns, id, cacheDir, path := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[6]
	p := &pod{}
	p.Metadata.Name, p.Metadata.Namespace, p.Metadata.UID = "pod-"+id, "default", "uid-"+id
	if s := os.Getenv("POD"); s != "" {
		if err := json.Unmarshal([]byte(s), p); err != nil {
			fail(fmt.Errorf("POD: %w", err))
		}
	}
	// go-cni 1.1.7 has no cache-dir option; libcni's default would be the host's /var/lib/cni
	libcni.CacheDir = cacheDir
	cni, err := gocni.New(
		gocni.WithMinNetworkCount(2),
		gocni.WithPluginConfDir(dir),
		gocni.WithPluginMaxConfNum(1),
		gocni.WithPluginDir(filepath.SplitList(path)),
	)
	if err != nil {
		fail(err)
	}
	if err := cni.Load(gocni.WithLoNetwork, gocni.WithDefaultConf); err != nil {
		fail(err)
	}
	opts, err := namespaceOpts(id, p)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	start := time.Now()
	timed := func() {
		if f := os.Getenv("TIMING_FILE"); f != "" {
			_ = os.WriteFile(f, []byte(fmt.Sprintf("%d\n", time.Since(start).Microseconds())), 0o644)
		}
	}
	switch cmd {
	case "setup":
		res, err := cni.Setup(ctx, id, netns, opts...)
		timed()
		if err == nil {
			if eth0, ok := res.Interfaces["eth0"]; ok && len(eth0.IPConfigs) > 0 {
				ip, more := podIPs(eth0.IPConfigs)
				printJSON(map[string]interface{}{"podIP": ip, "additionalIPs": more, "result": res, "raw": res.Raw()})
				return
			}
			err = fmt.Errorf("failed to find network info for sandbox %q", id)
		}
		// RunPodSandbox's deferred teardown of a sandbox whose network setup failed
		var teardown interface{}
		if rerr := cni.Remove(ctx, id, netns, opts...); rerr != nil {
			teardown = rerr.Error()
		}
		printJSON(map[string]interface{}{"setupError": err.Error(), "teardownError": teardown})
		os.Exit(1)
	case "remove":
		err = cni.Remove(ctx, id, netns, opts...)
		timed()
		if err != nil {
			fail(err)
		}
	default:
		fail(fmt.Errorf("unknown command %q", cmd))
	}
}
