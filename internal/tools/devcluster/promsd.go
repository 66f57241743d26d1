package devcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"go.yaml.in/yaml/v2"
)

// RunKubernetesSD runs one Kubernetes discovery of the generated
// configuration with Prometheus's own discovery code (the version virtop
// is built with) until ctx ends, writing what it finds to sd.File in
// file_sd's format after every update: each discovered target with every
// label the discovery gives it (the __meta_kubernetes_* labels the job's
// relabelling reads). The discovery authenticates as its configuration
// says: the Prometheus's ServiceAccount token.
//
// Only targets reachable inside the cluster's network namespace are
// written (reachable: the target's address is within one of the ranges):
// the pods of kwok's fake nodes have addresses no interface holds, and
// nothing may dial them.
func RunKubernetesSD(ctx context.Context, sd KubernetesSD, reachable []*net.IPNet, logf func(string, ...any)) error {
	var k kubernetes.SDConfig
	if err := yaml.UnmarshalStrict(sd.Config, &k); err != nil {
		return fmt.Errorf("job %s: its Kubernetes discovery: %w", sd.Job, err)
	}
	reg := prometheus.NewRegistry()
	metrics := k.NewDiscovererMetrics(reg, discovery.NewRefreshMetrics(reg))
	if err := metrics.Register(); err != nil {
		return err
	}
	defer metrics.Unregister()
	d, err := k.NewDiscoverer(discovery.DiscovererOptions{Logger: slog.New(slog.DiscardHandler), Metrics: metrics})
	if err != nil {
		return fmt.Errorf("job %s: %w", sd.Job, err)
	}
	ch := make(chan []*targetgroup.Group)
	go d.Run(ctx, ch)
	groups := map[string]*targetgroup.Group{}
	said := ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case tgs := <-ch:
			for _, g := range tgs {
				if g != nil {
					groups[g.Source] = g
				}
			}
			raw, n, dropped, err := fileSD(groups, reachable)
			if err != nil {
				return err
			}
			if _, err := writeIfChanged(sd.File, raw); err != nil {
				return err
			}
			if msg := fmt.Sprintf("job %s: %d targets; %d left out, unreachable (fake pods): %v", sd.Job, n, len(dropped), dropped); msg != said {
				logf("%s", msg)
				said = msg
			}
		}
	}
}

// fileSD renders target groups in file_sd's JSON format, one entry per
// target (a Kubernetes group's targets each carry labels of their own),
// in a stable order, leaving out the targets whose address is in no range
// of reachable (returned by address).
func fileSD(groups map[string]*targetgroup.Group, reachable []*net.IPNet) ([]byte, int, []string, error) {
	type entry struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	sources := make([]string, 0, len(groups))
	for s := range groups {
		sources = append(sources, s)
	}
	sort.Strings(sources)
	out := []entry{}
	var dropped []string
	for _, s := range sources {
		g := groups[s]
		for _, tl := range g.Targets {
			e := entry{Labels: map[string]string{}}
			for n, v := range g.Labels {
				e.Labels[string(n)] = string(v)
			}
			for n, v := range tl {
				if n == model.AddressLabel {
					e.Targets = []string{string(v)}
					continue
				}
				e.Labels[string(n)] = string(v)
			}
			if len(e.Targets) != 1 {
				continue
			}
			if !within4(e.Targets[0], reachable) {
				dropped = append(dropped, e.Targets[0])
				continue
			}
			out = append(out, e)
		}
	}
	sort.Strings(dropped)
	raw, err := json.MarshalIndent(out, "", " ")
	return raw, len(out), dropped, err
}

// within4 reports whether addr (host:port) is an IP address within one of
// ranges.
func within4(addr string, ranges []*net.IPNet) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	for _, r := range ranges {
		if ip != nil && r.Contains(ip) {
			return true
		}
	}
	return false
}

// removeFile removes path, if it exists.
func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
