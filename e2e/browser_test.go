package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium tab that records console errors.
type browser struct {
	ctx context.Context

	mu       sync.Mutex
	errors   []string
	expected []string // URL parts whose network errors the test provokes
}

func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("XDS_SERVER_REQUIRE_INTEGRATION") != "" {
		t.Fatal("no chromium on PATH (scripts/install-chromium.sh installs it)")
	}
	t.Skip("no chromium on PATH (scripts/install-chromium.sh installs it)")
	return ""
}

func newBrowser(t *testing.T, path string) *browser {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1000), chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		// Cancel waits for the browser to exit and its profile directory
		// to be removed; cancelling alone leaves the directory behind
		// when the test process exits first.
		_ = chromedp.Cancel(ctx)
		cancel()
		cancelAlloc()
	})
	b := &browser{ctx: ctx}
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type != chromedp.ConsoleError && m.Type != chromedp.ConsoleException {
				continue
			}
			b.mu.Lock()
			if !b.isExpected(m) {
				b.errors = append(b.errors, fmt.Sprintf("%s (%s:%d)", m.String(), m.URL, m.Line))
			}
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	if err := chromedp.Do(ctx); err != nil { // start the browser
		t.Fatalf("chromium: %v", err)
	}
	return b
}

// expectNetworkError lets one failed request to a URL containing part
// (a 4xx the test provokes) through checkConsole.
func (b *browser) expectNetworkError(part string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expected = append(b.expected, part)
}

func (b *browser) isExpected(m chromedp.ConsoleMessage) bool {
	for i, part := range b.expected {
		if m.Source == "network" && strings.Contains(m.URL, part) {
			b.expected = append(b.expected[:i], b.expected[i+1:]...)
			return true
		}
	}
	return false
}

// probeConsole checks that the test sees console errors and uncaught
// exceptions at all: it provokes one of each and forgets them.
func (b *browser) probeConsole(t *testing.T) {
	t.Helper()
	b.do(t, chromedp.Evaluate[chromedp.Void](`console.error("console-probe"); setTimeout(() => { throw new Error("exception-probe"); }); undefined`))
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		b.mu.Lock()
		all := strings.Join(b.errors, "\n")
		if strings.Contains(all, "console-probe") && strings.Contains(all, "exception-probe") {
			b.errors = nil
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the browser's console error and exception did not reach the test: %q", all)
		}
	}
}

func (b *browser) checkConsole(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		t.Errorf("browser console: %s", e)
	}
}

func (b *browser) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// poll waits until the JavaScript expression is true.
func (b *browser) poll(t *testing.T, expr string, limit time.Duration) {
	t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(limit),
		chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("waiting %v for %s: %v", limit, expr, err)
	}
}

func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	for try := 1; ; try++ {
		s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
		switch {
		case err == nil:
			return s
		case try < 5 && strings.Contains(err.Error(), "No node with given id"):
			// The page re-rendered between finding the node and reading it
			// (the console refreshes every second): find it again.
		default:
			t.Fatal(err)
		}
	}
}

func (b *browser) count(t *testing.T, sel string) int {
	t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *browser) shot(t *testing.T, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// consoleShots is where the screenshots go: $XDS_SERVER_SCREENSHOTS, or
// the test's artifact directory with go test -artifacts, else
// $TMPDIR/xds-server-console (kept after the test).
func consoleShots(t *testing.T) string {
	dir := os.Getenv("XDS_SERVER_SCREENSHOTS")
	if f := flag.Lookup("test.artifacts"); dir == "" && f != nil && f.Value.String() == "true" {
		dir = t.ArtifactDir()
	}
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "xds-server-console")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func jsString(s string) string { b, _ := json.Marshal(s); return string(b) }
