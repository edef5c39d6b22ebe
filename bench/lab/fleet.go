package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/xds-server/xds-server/internal/toolbin"
)

// service is the Consul service of the lab's backends.
const service = "lab"

// simFleet is what `weightsim -json` writes (bench/weightsim/json.go).
type simFleet struct {
	Fleet struct {
		Capacities []float64 `json:"capacities"` // requests/s at utilization 1, by backend
		Rates      []float64 `json:"rates"`      // requests/s, by client
		Subsets    [][]int   `json:"subsets"`    // backend indices, by client
	} `json:"fleet"`
	Policies []struct {
		Name    string  `json:"name"`
		Noise   float64 `json:"noise"`
		MaxMean float64 `json:"max_mean"`
	} `json:"policies"`
}

// simulate runs weightsim for the lab's fleet with subsets of size (noise
// free, one trial: the lab's own seed) and returns its fleet and figures.
func simulate(ctx context.Context, bin, dir string, o options, size int) (simFleet, error) {
	path := filepath.Join(dir, "weightsim-"+strconv.Itoa(size)+".json")
	cmd := exec.CommandContext(ctx, bin, "-backends", strconv.Itoa(o.backends), "-clients", strconv.Itoa(o.clients),
		"-subset", strconv.Itoa(size), "-util", fmt.Sprint(o.util), "-sigma", fmt.Sprint(o.sigma),
		"-seed", strconv.FormatUint(o.seed, 10), "-trials", "1", "-noise", "0", "-json", path)
	if b, err := cmd.CombinedOutput(); err != nil {
		return simFleet{}, fmt.Errorf("lab: weightsim: %w\n%s", err, b)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return simFleet{}, fmt.Errorf("lab: %w", err)
	}
	var f simFleet
	if err := json.Unmarshal(b, &f); err != nil {
		return simFleet{}, fmt.Errorf("lab: weightsim json: %w", err)
	}
	if len(f.Fleet.Capacities) != o.backends || len(f.Fleet.Rates) != o.clients {
		return simFleet{}, fmt.Errorf("lab: weightsim drew %d backends and %d clients, want %d and %d",
			len(f.Fleet.Capacities), len(f.Fleet.Rates), o.backends, o.clients)
	}
	return f, nil
}

// medianFleetTrials are the seeds (1..medianFleetTrials) the default
// fleet is the median of.
const medianFleetTrials = 200

// medianSeed asks weightsim for the seed of the median fleet of o's shape
// among seeds 1..medianFleetTrials: the fleet whose noise-free round robin
// and formula figures are nearest their medians, so that the lab's
// default fleet is a typical one of its shape, by a rule, rather than
// whatever seed 1 draws.
func medianSeed(ctx context.Context, bin string, o options) (uint64, error) {
	cmd := exec.CommandContext(ctx, bin, "-backends", strconv.Itoa(o.backends), "-clients", strconv.Itoa(o.clients),
		"-subset", strconv.Itoa(o.subset), "-util", fmt.Sprint(o.util), "-sigma", fmt.Sprint(o.sigma),
		"-seed", "1", "-trials", strconv.Itoa(medianFleetTrials), "-median-fleet")
	b, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("lab: weightsim -median-fleet: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	seed, err := strconv.ParseUint(strings.TrimSpace(first), 10, 64)
	if err != nil || seed == 0 {
		return 0, fmt.Errorf("lab: weightsim -median-fleet printed %q", first)
	}
	return seed, nil
}

// simMaxMean is weightsim's steady-state max/mean of the named policy; 0
// if it has none.
func (f simFleet) simMaxMean(name string) float64 {
	for _, p := range f.Policies {
		if p.Name == name && p.Noise == 0 {
			return p.MaxMean
		}
	}
	return 0
}

// consulBinary finds consul v1.14.11 as the e2e harness does
// (internal/toolbin).
func consulBinary() (string, error) {
	p, err := toolbin.Consul()
	if err != nil {
		return "", fmt.Errorf("lab: %w", err)
	}
	return p, nil
}

// startConsul runs `consul agent -dev` on free loopback ports and waits
// for its leader. It returns the process and its HTTP address.
func startConsul(ctx context.Context, dir string) (*proc, string, error) {
	bin, err := consulBinary()
	if err != nil {
		return nil, "", err
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, "", err
		}
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := startProc(dir, "consul", bin, []string{"agent", "-dev", "-node=lab", "-bind=127.0.0.1",
		"-client=127.0.0.1", "-log-level=warn", "-http-port=" + strconv.Itoa(ports[0]),
		"-serf-lan-port=" + strconv.Itoa(ports[1]), "-server-port=" + strconv.Itoa(ports[2]),
		"-serf-wan-port=-1", "-dns-port=-1", "-grpc-port=-1", "-grpc-tls-port=-1",
		"-hcl=disable_update_check = true"}, nil)
	if err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if leader(addr) {
			return p, addr, nil
		}
		select {
		case <-p.exited:
			return nil, "", fmt.Errorf("lab: consul exited (%v); see %s", p.err, p.log)
		case <-ctx.Done():
			p.stop(time.Second)
			return nil, "", ctx.Err()
		case <-time.After(50 * time.Millisecond): // another process: poll
		}
		if time.Now().After(deadline) {
			p.stop(time.Second)
			return nil, "", fmt.Errorf("lab: consul has no leader after 60s; see %s", p.log)
		}
	}
}

// leader reports whether the agent at addr has a leader.
func leader(addr string) bool {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/v1/status/leader")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && len(strings.Trim(strings.TrimSpace(string(b)), `"`)) > 0
}

// backend is a running example backend.
type backend struct {
	id       string
	grpc     string  // host:port of its gRPC (and ORCA) listener
	capacity float64 // requests/s at utilization 1
	p        *proc
}

// startBackends runs one example backend per capacity, registered in
// Consul as service lab with ids lab-00, lab-01, ... (sorted as the
// simulator's slots), each with o.slots slots of slots/capacity seconds;
// with zones (by backend), each with service meta zone.
func startBackends(ctx context.Context, bin, dir, consul string, o options, caps []float64, zones []string) ([]*backend, error) {
	var out []*backend
	for j, c := range caps {
		id := fmt.Sprintf("%s-%02d", service, j)
		st := time.Duration(float64(o.slots) / c * float64(time.Second))
		ready := make(chan string, 1)
		p, err := startProc(dir, id, bin, append([]string{"-consul", consul, "-service", service, "-id", id,
			"-slots", strconv.Itoa(o.slots), "-service-time", st.String(), "-drain-delay", "0s",
			"-check-interval", "1s", "-deregister-critical-after", "1m", "-log-level", "warn"}, zoneMeta(zones, j)...), ready)
		if err != nil {
			stopBackends(out)
			return nil, err
		}
		b := &backend{id: id, capacity: c, p: p}
		out = append(out, b)
		select {
		case line := <-ready:
			for f := range strings.FieldsSeq(line) {
				if v, ok := strings.CutPrefix(f, "grpc="); ok {
					b.grpc = v
				}
			}
		case <-p.exited:
			stopBackends(out)
			return nil, fmt.Errorf("lab: backend %s exited (%v); see %s", id, p.err, p.log)
		case <-ctx.Done():
			stopBackends(out)
			return nil, ctx.Err()
		case <-time.After(30 * time.Second):
			stopBackends(out)
			return nil, fmt.Errorf("lab: backend %s not ready after 30s; see %s", id, p.log)
		}
	}
	return out, nil
}

// stopBackends stops every backend (SIGTERM: lame duck without delay).
func stopBackends(bs []*backend) {
	for _, b := range bs {
		_ = b.p.cmd.Process.Signal(os.Interrupt)
	}
	for _, b := range bs {
		b.p.stop(10 * time.Second)
	}
}

// zoneMeta is the backend flags that put backend j in zones[j]; none
// without zones.
func zoneMeta(zones []string, j int) []string {
	if j >= len(zones) {
		return nil
	}
	return []string{"-meta", "zone=" + zones[j]}
}
