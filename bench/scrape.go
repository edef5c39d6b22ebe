package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// Metric names read from the server's /metrics.
const (
	MetricCPU        = "process_cpu_seconds_total"
	MetricRSS        = "process_resident_memory_bytes"
	MetricHeapInuse  = "go_memstats_heap_inuse_bytes"
	MetricHeapGoal   = "go_memstats_next_gc_bytes"
	MetricGoroutines = "go_goroutines"
	MetricNodes      = "xds_connected_nodes"
	MetricReconciles = "xds_reconciles_total"
	MetricEDSPushes  = `xds_pushes_total{type="endpoint"}`
	MetricHAWrites   = "xds_ha_consul_writes_total"
	MetricGCs        = "go_gc_duration_seconds_count"
	MetricQuietGCs   = "xds_gc_between_pushes_total"
	MetricReleases   = "xds_memory_releases_total"
)

// Metrics are the samples of one Prometheus text exposition, by series
// (the name followed by its labels as exposed, e.g. `a_total{type="x"}`).
type Metrics map[string]float64

// Scrape reads the Prometheus text exposition at url.
func Scrape(ctx context.Context, url string) (Metrics, error) {
	body, err := httpGet(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("bench: scrape: %w", err)
	}
	defer body.Close()
	return ParseMetrics(body)
}

// ParseMetrics parses the samples of a Prometheus text exposition; comments
// and timestamps are ignored.
func ParseMetrics(r io.Reader) (Metrics, error) {
	out := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// The series may contain spaces inside label values: split after
		// the closing brace when there is one.
		series, rest := line, ""
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			series, rest = line[:i+1], strings.TrimSpace(line[i+1:])
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			series, rest = line[:i], strings.TrimSpace(line[i+1:])
		}
		value, _, _ := strings.Cut(rest, " ")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("bench: metrics line %q: %w", line, err)
		}
		out[series] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: metrics: %w", err)
	}
	return out, nil
}

// httpGet returns the body of a successful GET of url; the caller closes it.
func httpGet(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.Body, nil
}

// fetchTo writes the body of a GET of url to the file path.
func fetchTo(ctx context.Context, url, path string) error {
	body, err := httpGet(ctx, url)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer body.Close()
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		return fmt.Errorf("bench: %s: %w", path, err)
	}
	return f.Close()
}

// WritesByKind sums the xds_ha_consul_writes_total series of m by kind.
func WritesByKind(m Metrics) map[string]float64 {
	out := map[string]float64{}
	for series, v := range m {
		rest, ok := strings.CutPrefix(series, MetricHAWrites+"{")
		if !ok {
			continue
		}
		_, kind, _ := strings.Cut(rest, `kind="`)
		kind, _, _ = strings.Cut(kind, `"`)
		out[kind] += v
	}
	return out
}
