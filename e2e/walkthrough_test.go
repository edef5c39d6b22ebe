package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestReadmeDrainWalkthrough runs the README's drain walk-through (the sh
// block of "The example backend") as a script, against a Consul of the
// harness and with xds-server on free ports; the only rewrites are those
// addresses and building from the repository. The script ends with the
// first backend drained and exited 0 (wait $first), and the log shows the
// drain.
func TestReadmeDrainWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "### The example backend")
	_, block, ok2 := strings.Cut(section, "```sh\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 || !strings.Contains(block, "go build -o bin/backend ./examples/backend") || strings.Contains(block, "go run ./examples/backend") {
		t.Fatalf("README walk-through does not build the backend binary first:\n%s", block)
	}
	consul := harness.Consul(t)
	script := strings.NewReplacer(
		"go build -o bin/", `go -C "$REPO" build -o "$PWD"/bin/`,
		"consul agent -dev", ": consul agent -dev", // the harness's agent is running
		"bin/backend -service", `bin/backend -consul "$CONSUL_HTTP_ADDR" -service`,
	).Replace(block)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script+"\nkill $(jobs -p) 2>/dev/null; wait || true\n")
	cmd.Dir = dir
	consulBin, err := harness.ConsulBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "REPO="+repo, "GOTOOLCHAIN=local", "CONSUL_HTTP_ADDR="+consul.Addr(),
		"PATH="+filepath.Dir(consulBin)+":"+os.Getenv("PATH"),
		"XDS_SERVER_DISCOVERY_CONSUL_ADDRESS="+consul.Addr(), "XDS_SERVER_XDS_ADDRESS=127.0.0.1:0",
		"XDS_SERVER_ADMIN_ADDRESS=127.0.0.1:0", "XDS_SERVER_RATELIMIT_ADDRESS=127.0.0.1:0",
		"XDS_SERVER_DISCOVERY_CONSUL_MIN_INTERVAL=10ms")
	out, err := cmd.CombinedOutput()
	logs, _ := os.ReadFile(filepath.Join(dir, "xds-server.log"))
	if err != nil {
		t.Fatalf("walk-through: %v\n%s\nxds-server.log:\n%s", err, out, logs)
	}
	if !strings.Contains(string(out), "backend 1 drained and exited cleanly") ||
		!strings.Contains(string(out), "draining=+1 drained=consul_maintenance:1") {
		t.Errorf("walk-through output:\n%s\nxds-server.log:\n%s", out, logs)
	}
	t.Logf("walk-through output:\n%s", out)
}
