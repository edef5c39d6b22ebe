package harness

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// HTTPLoadConfig is a steady HTTP load: Workers goroutines, each sending
// one GET after another (waiting Interval between them) to URL.
type HTTPLoadConfig struct {
	URL      string
	Workers  int           // default 4
	Interval time.Duration // pause after each request of a worker; 0: none
	Header   http.Header   // sent with every request
	Timeout  time.Duration // per request; default 5s
}

// HTTPLoad is a running load (StartHTTPLoad).
type HTTPLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	res LoadResult
}

// LoadResult counts what a load got back.
type LoadResult struct {
	Total    int
	ByStatus map[int]int    // HTTP status -> responses
	Errors   map[string]int // transport errors (no response) by message
	// ByBackend counts 200s by the backend that answered: the example
	// backend says "hello from <id> (...)".
	ByBackend map[string]int
	// Samples are the first few failed answers: status and body.
	Samples []string
}

// Failed is every request that did not get a 200.
func (r LoadResult) Failed() int { return r.Total - r.ByStatus[http.StatusOK] }

// String is a one-line summary.
func (r LoadResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests, %d failed; statuses", r.Total, r.Failed())
	for _, s := range slices.Sorted(maps.Keys(r.ByStatus)) {
		fmt.Fprintf(&b, " %d:%d", s, r.ByStatus[s])
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(&b, "; errors %v", r.Errors)
	}
	fmt.Fprintf(&b, "; backends %v", r.ByBackend)
	if len(r.Samples) > 0 {
		fmt.Fprintf(&b, "; first failures: %s", strings.Join(r.Samples, " | "))
	}
	return b.String()
}

// StartHTTPLoad starts the load; Stop ends it.
func StartHTTPLoad(cfg HTTPLoadConfig) *HTTPLoad {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &HTTPLoad{cancel: cancel, res: LoadResult{ByStatus: map[int]int{}, Errors: map[string]int{}, ByBackend: map[string]int{}}}
	client := &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Workers}}
	for range cfg.Workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil {
				l.one(ctx, client, cfg)
				if cfg.Interval > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(cfg.Interval):
					}
				}
			}
		}()
	}
	return l
}

// one sends a request and counts its answer; a request cut by Stop is
// not counted.
func (l *HTTPLoad) one(ctx context.Context, client *http.Client, cfg HTTPLoadConfig) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL, nil)
	maps.Copy(req.Header, cfg.Header)
	resp, err := client.Do(req)
	if ctx.Err() != nil {
		if err == nil {
			resp.Body.Close()
		}
		return
	}
	var body []byte
	if err == nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.res.Total++
	if err != nil {
		l.res.Errors[err.Error()]++
		return
	}
	l.res.ByStatus[resp.StatusCode]++
	if resp.StatusCode == http.StatusOK {
		if id, ok := BackendOf(string(body)); ok {
			l.res.ByBackend[id]++
		}
	} else if len(l.res.Samples) < 5 {
		l.res.Samples = append(l.res.Samples, fmt.Sprintf("%d %q", resp.StatusCode, strings.TrimSpace(string(body))))
	}
}

// BackendOf is the id in an example backend's "hello from <id> (...)".
func BackendOf(body string) (string, bool) {
	rest, ok := strings.CutPrefix(body, "hello from ")
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, " ")
	return id, ok
}

// Snapshot is what the load got so far.
func (l *HTTPLoad) Snapshot() LoadResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.res
	r.ByStatus, r.Errors, r.ByBackend = maps.Clone(r.ByStatus), maps.Clone(r.Errors), maps.Clone(r.ByBackend)
	r.Samples = slices.Clone(r.Samples)
	return r
}

// Stop ends the load and returns what it got.
func (l *HTTPLoad) Stop() LoadResult {
	l.cancel()
	l.wg.Wait()
	return l.Snapshot()
}
