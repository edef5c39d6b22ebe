package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// WeightsConfig is an xds-server config file that turns on weights from
// POST /v1/load for every service of the catalog.
func (c Catalog) WeightsConfig() string {
	var b strings.Builder
	b.WriteString("services:\n")
	for s := range c.Services {
		fmt.Fprintf(&b, "  %s: { weights: { enabled: true, sources: [http] } }\n", c.Service(s))
	}
	return b.String()
}

// loadReport is one element of a POST /v1/load batch.
type loadReport struct {
	Service     string  `json:"service"`
	Endpoint    string  `json:"endpoint"`
	Utilization float64 `json:"utilization"`
	QPS         float64 `json:"qps"`
}

// LoadBatch is the body of POST /v1/load that replica `of` of `replicas`
// receives in round k: the reports of the endpoints e with e % replicas
// == of (so that every replica ingests a part and only the shared
// summaries make the whole), each with a utilization fixed per endpoint
// in [0.3, 0.7] plus a jitter of +-0.01 that changes every round.
func (c Catalog) LoadBatch(of, replicas, k int) ([]byte, error) {
	var reports []loadReport
	for s := range c.Services {
		for e := range c.Endpoints {
			if e%max(replicas, 1) != of {
				continue
			}
			base := 0.3 + 0.4*float64((s*31+e*17)%97)/96
			jitter := 0.01 * float64((s+e+k)%3-1)
			reports = append(reports, loadReport{Service: c.Service(s), Endpoint: c.id(s, e), Utilization: base + jitter, QPS: 100})
		}
	}
	b, err := json.Marshal(map[string][]loadReport{"reports": reports})
	if err != nil {
		return nil, fmt.Errorf("bench: load batch: %w", err)
	}
	return b, nil
}

// LoadReporter posts a LoadBatch to each admin address every interval,
// until Stop.
type LoadReporter struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
	posts  int
}

// StartLoad starts posting load reports of cat to the admin addresses.
func StartLoad(cat Catalog, admins []string, interval time.Duration) *LoadReporter {
	ctx, cancel := context.WithCancel(context.Background())
	l := &LoadReporter{cancel: cancel}
	l.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for k := 0; ; k++ {
			for i, a := range admins {
				l.record(postLoad(ctx, cat, a, i, len(admins), k))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return l
}

func (l *LoadReporter) record(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.posts++
	if err != nil && l.err == nil {
		l.err = err
	}
}

// Stop stops posting and returns the number of posts and the first error
// of a post made before Stop.
func (l *LoadReporter) Stop() (int, error) {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.posts, l.err
}

func postLoad(ctx context.Context, cat Catalog, admin string, of, replicas, k int) error {
	body, err := cat.LoadBatch(of, replicas, k)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+admin+"/v1/load", strings.NewReader(string(body)))
	if err != nil {
		return fmt.Errorf("bench: load: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped
		}
		return fmt.Errorf("bench: POST %s/v1/load: %w", admin, err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("bench: POST %s/v1/load: %s", admin, resp.Status)
	}
	return nil
}
