package envoye2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/xds-server/xds-server/e2e/harness"
)

// lzDumped reads resource name of kind from e's /config_dump into m.
func lzDumped(t *testing.T, e *harness.Envoy, kind, name string, m proto.Message) {
	t.Helper()
	d, ok := readEnvoyDump(t, e)[kind][name]
	if !ok {
		t.Fatalf("Envoy's /config_dump has no %s %s", kind, name)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(d.raw, m); err != nil {
		t.Fatalf("%s %s from Envoy's /config_dump: %v", kind, name, err)
	}
}

// lzCounts is what n requests got: answers by backend id, failures.
type lzCounts struct {
	byID   map[string]int
	failed int
	errs   map[string]int
}

// share is the fraction of all requests served in zone.
func (c lzCounts) share(zone string) float64 {
	n, in := c.failed, 0
	for id, k := range c.byID {
		n += k
		if id[:1] == zone {
			in += k
		}
	}
	if n == 0 {
		return 0
	}
	return float64(in) / float64(n)
}

func (c lzCounts) String() string {
	return fmt.Sprintf("answers %v, %d failed %v", c.byID, c.failed, c.errs)
}

// lzCount sends n requests to path through the Envoy listener at addr, 4 at a time, and counts
// them.
func lzCount(t *testing.T, addr, path string, n int) lzCounts {
	t.Helper()
	const workers = 4
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	out := lzCounts{byID: map[string]int{}, errs: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	for range workers {
		wg.Go(func() {
			for range next {
				id, err := lzGet(client, "http://"+addr+path)
				mu.Lock()
				if err != nil {
					out.failed++
					out.errs[err.Error()]++
				} else {
					out.byID[id]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// lzGet sends one GET and returns the id of the backend that answered.
func lzGet(client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %q", resp.Status, strings.TrimSpace(string(b)))
	}
	id, ok := harness.BackendOf(string(b))
	if !ok || id == "" {
		return "", errors.New("unexpected answer " + strconv.Quote(string(b)))
	}
	return id, nil
}

// lzAdmin sends method path (with a JSON body, if any) to xds-server's
// admin listener and fails the test unless it answers 200.
func lzAdmin(t *testing.T, srv *harness.Server, method, path, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, srv.AdminURL(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s: %s", method, path, resp.Status, b)
	}
}
