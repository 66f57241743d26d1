package framework

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/virtop-dev/virtop/internal/testing/poll"
)

// RequestCounts are virtop_api_requests_total's samples by verb and
// resource.
type RequestCounts map[[2]string]float64

var requestSample = regexp.MustCompile(`^virtop_api_requests_total\{(.*)\} ([0-9.e+]+)$`)
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// ScrapeRequests reads virtop_api_requests_total from the operator's HTTPS
// metrics endpoint (a self-signed certificate).
func ScrapeRequests(ctx context.Context, addr string) (RequestCounts, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the operator's self-signed metrics certificate
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := RequestCounts{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := requestSample.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var verb, res string
		for _, l := range labelPair.FindAllStringSubmatch(m[1], -1) {
			switch l[1] {
			case "verb":
				verb = l[2]
			case "resource":
				res = l[2]
			}
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, err
		}
		out[[2]string{verb, res}] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no virtop_api_requests_total samples yet")
	}
	return out, nil
}

// MustScrape scrapes the operator's request counters, retrying for a
// minute while the endpoint is not up.
func MustScrape(t testing.TB, addr string) RequestCounts {
	t.Helper()
	var out RequestCounts
	poll.Eventually(t, "the operator's metrics", time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		out, err = ScrapeRequests(ctx, addr)
		return err == nil, err
	})
	return out
}

// IsWrite reports whether an API verb writes.
func IsWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Delta is after - before by verb, by verb and resource, and the writes.
func (after RequestCounts) Delta(before RequestCounts) (byVerb map[string]float64, byKey RequestCounts, writes float64) {
	byVerb, byKey = map[string]float64{}, RequestCounts{}
	for k, v := range after {
		d := v - before[k]
		if d == 0 {
			continue
		}
		byVerb[k[0]] += d
		byKey[k] = d
		if IsWrite(k[0]) {
			writes += d
		}
	}
	return byVerb, byKey, writes
}

// FormatVerbs prints counts by verb with their total.
func FormatVerbs(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	total := 0.0
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%g", k, m[k])
		total += m[k]
	}
	return fmt.Sprintf("total=%g%s", total, b.String())
}

// FormatKeys prints counts by verb and resource.
func FormatKeys(m RequestCounts) string {
	keys := make([][2]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s=%g", k[0], k[1], m[k]))
	}
	return strings.Join(parts, ", ")
}
