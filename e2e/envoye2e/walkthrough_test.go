package envoye2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// wtFixedPorts are the ports the Envoy walk-through and its example files
// name (backends' HTTP and gRPC, xds-server's ADS, RLS and admin, Envoy's
// listener and admin); the test moves each to a free port, in the README
// block and in copies of examples/consul and examples/envoy alike.
var wtFixedPorts = []string{"8081", "8082", "8091", "8092", "9081", "9082", "9091", "9092",
	"18000", "18081", "19000", "10000", "9901"}

// wtEpilogue runs after the README block, on the walk-through's own
// (rewritten) ports: what Envoy's rate-limit filter and our RLS counted.
const wtEpilogue = `
echo "== envoy ratelimit stats"; curl -s 'localhost:9901/stats?filter=ratelimit'
echo "== xds-server ratelimit metrics"; curl -s localhost:19000/metrics | grep -E '^ratelimit_(requests|over_limit)_total' || true
`

// TestReadmeEnvoyWalkthrough runs the sh block of the README's "Envoy with
// routing and rate limiting" as a script, with a real Envoy: Consul
// services from examples/consul, four example backends, xds-server with
// examples/envoy/xds-server.yaml and Envoy with
// examples/envoy/envoy-bootstrap.yaml. The only rewrites: the harness's
// Consul agent instead of `consul agent -dev` (and its address handed to
// the backends), every fixed port moved to a free one (in the block and in
// copies of the example files), building from the repository, and Envoy
// without hot restart (other Envoys run beside it). It asserts what the block's comments promise: web and api answer
// through Envoy; the loop of step 6 prints nine 200s then 429s, counted as
// over-limit by Envoy's rate-limit filter and by our RLS; in step 7, web-1
// drains and exits 0 while every request through Envoy succeeds.
func TestReadmeEnvoyWalkthrough(t *testing.T) {
	skipShort(t)
	block := wtReadmeBlock(t, "\n## Envoy with routing and rate limiting\n", "consul agent -dev",
		"go build -o bin/backend ./examples/backend", "go build -o bin/xds-server ./cmd/xds-server",
		"envoy -c examples/envoy/envoy-bootstrap.yaml")
	dir, out := wtRunWalkthrough(t, block+wtEpilogue, "consul", "envoy")
	wtCheckRouting(t, out)
	wtCheckRateLimit(t, out)
	wtCheckRestart(t, dir, out)
	if t.Failed() {
		wtLogFiles(t, dir, "xds-server.log", "envoy.log", "web-1.log", "web-2.log")
	}
}

// wtRunWalkthrough runs a README walk-through's block as a script with a
// real Envoy in a new directory, with copies of the named directories of
// examples/, and returns that directory and the script's output. The only
// rewrites: the harness's Consul agent instead of `consul agent -dev` (and
// its address handed to the backends), every fixed port moved to a free one
// (in the block and in the copies), building from the repository, and
// Envoy without hot restart (other Envoys run beside it).
func wtRunWalkthrough(t *testing.T, block string, examples ...string) (dir, out string) {
	t.Helper()
	envoyBin := harness.RequireEnvoy(t)
	consulBin, err := harness.ConsulBinary()
	if err != nil {
		t.Fatal(err)
	}
	repo := wtRepo(t)
	consul := harness.Consul(t)
	ports := wtPortMap(t, consul.Addr())
	dir = t.TempDir()
	for _, sub := range examples {
		wtCopyTree(t, filepath.Join(repo, "examples", sub), filepath.Join(dir, "examples", sub), ports)
	}
	script := strings.NewReplacer(
		"go build -o bin/", `go -C "$REPO" build -o "$PWD"/bin/`,
		"consul agent -dev", ": consul agent -dev", // the harness's agent is running
		"envoy -c ", "envoy --disable-hot-restart --concurrency 1 -c ",
		"bin/backend -service", `bin/backend -consul "$CONSUL_HTTP_ADDR" -service`,
	).Replace(wtRewritePorts(block, ports))
	out = wtRunScript(t, dir, script, "REPO="+repo, "GOTOOLCHAIN=local", "CONSUL_HTTP_ADDR="+consul.Addr(),
		"PATH="+filepath.Dir(envoyBin)+":"+filepath.Dir(consulBin)+":"+os.Getenv("PATH"))
	t.Logf("walk-through output:\n%s", out)
	return dir, out
}

// wtRepo returns the repository's root directory.
func wtRepo(t *testing.T) string {
	t.Helper()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// wtReadmeBlock returns the first sh block of the README's section under
// heading (up to the next heading of level 2 or 3), after checking it has
// each of the commands the test rewrites.
func wtReadmeBlock(t *testing.T, heading string, wants ...string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(wtRepo(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), heading)
	section, _, _ = strings.Cut(section, "\n## ")
	section, _, _ = strings.Cut(section, "\n### ")
	_, block, ok2 := strings.Cut(section, "```sh\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatalf("README has no sh block under %q", strings.TrimSpace(heading))
	}
	for _, want := range wants {
		if !strings.Contains(block, want) {
			t.Fatalf("README's walk-through %q lacks %q:\n%s", strings.TrimSpace(heading), want, block)
		}
	}
	return block
}

// wtPortMap maps each fixed port to a free loopback port below the
// kernel's ephemeral range (where no outgoing connection or port-0
// listener can take it before the script binds it), and Consul's 8500 to
// the harness agent's port.
func wtPortMap(t *testing.T, consulAddr string) map[string]string {
	t.Helper()
	_, consulPort, err := net.SplitHostPort(consulAddr)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{"8500": consulPort}
	used := map[int]bool{}
	for _, fixed := range wtFixedPorts {
		for tries := 0; ; tries++ {
			if tries > 1000 {
				t.Fatal("no free port in 20000-32767")
			}
			p := 20000 + rand.IntN(12768) // below 32768, where Linux's ephemeral ports begin
			if used[p] {
				continue
			}
			l, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", p))
			if err != nil {
				continue
			}
			l.Close()
			used[p] = true
			m[fixed] = strconv.Itoa(p)
			break
		}
	}
	return m
}

// wtPortRE matches a whole port number (not 8081 inside 18081).
var wtPortRE = regexp.MustCompile(`\b\d{4,5}\b`)

// wtRewritePorts replaces every whole number that is a key of ports.
func wtRewritePorts(s string, ports map[string]string) string {
	return wtPortRE.ReplaceAllStringFunc(s, func(n string) string {
		if p, ok := ports[n]; ok {
			return p
		}
		return n
	})
}

// wtCopyTree copies the files under src to dst, ports rewritten.
func wtCopyTree(t *testing.T, src, dst string, ports map[string]string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), []byte(wtRewritePorts(string(b), ports)), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// wtRunScript runs script with bash -euo pipefail in dir, in its own
// process group, and kills the group when bash is done or at a 4-minute
// deadline (the block leaves the backends, xds-server and Envoy running, as
// a person would). It returns the script's stdout and stderr.
func wtRunScript(t *testing.T, dir, script string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	outPath := filepath.Join(t.TempDir(), "script.out")
	f, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// If this test process dies without cleaning up (go test -timeout), the
	// script's group kills itself.
	watchdog := fmt.Sprintf("(while kill -0 %d; do sleep 1; done; kill -KILL 0) >/dev/null 2>&1 &\n", os.Getpid())
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", watchdog+script)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, append(os.Environ(), env...), f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	if err = cmd.Start(); err == nil {
		err = cmd.Wait()
		wtKillGroup(cmd.Process.Pid)
	}
	out, _ := os.ReadFile(outPath)
	if err != nil {
		wtLogFiles(t, dir, "xds-server.log", "envoy.log", "web-1.log", "web-2.log", "api-1.log", "api-2.log")
		t.Fatalf("walk-through after %v: %v\n%s", time.Since(start).Round(time.Second), err, out)
	}
	t.Logf("walk-through ran in %v", time.Since(start).Round(time.Second))
	return string(out)
}

// wtKillGroup kills process group pgid and waits (up to 10 s) until no
// process of it is left, so that none writes into the test's directories
// while they are removed.
func wtKillGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling the kernel: no event to await
	}
}

// wtLogFiles logs the tail (4 KiB) of each named file of dir.
func wtLogFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Logf("%s: %v", n, err)
			continue
		}
		if len(b) > 4096 {
			b = b[len(b)-4096:]
		}
		t.Logf("%s (tail):\n%s", n, b)
	}
}

// wtCheckRouting: step 6's first two curls were answered by web and api.
func wtCheckRouting(t *testing.T, out string) {
	t.Helper()
	for _, re := range []string{`(?m)^hello from web-[12] \(/\)$`, `(?m)^hello from api-[12] \(/api/users\)$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no line matching %s in the walk-through's output", re)
		}
	}
}

// wtCodesRE matches the line of step 6's loop: 30 status codes.
var wtCodesRE = regexp.MustCompile(`(?m)^((?:\d{3} ){30})$`)

// wtCheckRateLimit: the loop printed nine 200s (the curl before it was
// the tenth request to /api in the minute) then 429s, and Envoy's
// rate-limit filter (cluster.api.ratelimit.over_limit) and our RLS (rule
// path_api of domain edge) each counted every 429.
func wtCheckRateLimit(t *testing.T, out string) {
	t.Helper()
	m := wtCodesRE.FindStringSubmatch(out)
	if m == nil {
		t.Errorf("no line of 30 status codes (step 6's loop) in the walk-through's output")
		return
	}
	want := strings.Repeat("200 ", 9) + strings.Repeat("429 ", 21)
	if m[1] != want {
		t.Errorf("step 6's loop printed\n  %s\nwant nine 200s then 429s:\n  %s", m[1], want)
	}
	if got := wtStat(out, `(?m)^cluster\.api\.ratelimit\.over_limit: (\d+)$`); got != 21 {
		t.Errorf("Envoy's cluster.api.ratelimit.over_limit = %d, want 21 (the 429s came from elsewhere?)", got)
	}
	if got := wtStat(out, `(?m)^ratelimit_over_limit_total\{domain="edge",rule="path_api"\} (\d+)$`); got != 21 {
		t.Errorf("xds-server's ratelimit_over_limit_total{domain=\"edge\",rule=\"path_api\"} = %d, want 21", got)
	}
}

// wtStat returns the number the first group of re captures in out, or -1.
func wtStat(out, re string) int {
	m := regexp.MustCompile(re).FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// wtCheckRestart: in step 7, web-1 drained and exited 0, and each of the
// 40 requests of the loop through Envoy was answered 200, by web-1 before
// its drain and by web-2.
func wtCheckRestart(t *testing.T, dir, out string) {
	t.Helper()
	if !strings.Contains(out, "web-1 drained and exited cleanly") {
		t.Errorf("web-1 did not exit 0 after SIGTERM (no \"web-1 drained and exited cleanly\")")
	}
	logs, _ := os.ReadFile(filepath.Join(dir, "xds-server.log"))
	if !regexp.MustCompile(`service=web .*draining=\+1 drained=consul_maintenance:1`).Match(logs) {
		t.Errorf("xds-server did not log web-1's drain (service=web ... draining=+1 drained=consul_maintenance:1)")
	}
	b, err := os.ReadFile(filepath.Join(dir, "restart.out"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	by, failed := map[string]int{}, 0
	ok := regexp.MustCompile(`^hello from (web-[12]) \(/\) 200$`)
	for _, l := range lines {
		if m := ok.FindStringSubmatch(l); m != nil {
			by[m[1]]++
		} else {
			failed++
			t.Errorf("request during web-1's restart: %q", l)
		}
	}
	t.Logf("rolling restart through Envoy: %d requests, %d failed, by backend %v", len(lines), failed, by)
	if len(lines) != 40 || by["web-1"] == 0 || by["web-2"] == 0 {
		t.Errorf("restart.out has %d lines (want 40: web-1's before the drain, then web-2's)", len(lines))
	}
}
