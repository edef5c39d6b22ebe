package bench

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// envoyServerMemory reads the server's RSS and live heap after a settle.
func envoyServerMemory(b *testing.B, side envoySide) (rss, heap float64) {
	sleep(b.Context(), max(*flagEnvoySettle, time.Until(side.settled)))
	mem, err := ReadMemory(side.pid)
	if err != nil {
		b.Fatal(err)
	}
	return mem.RSS, side.heap()
}

// envoyVerdict is what the Envoys rejected (their rejection stats, see
// harness.Envoy.Rejections) and what they logged (EnvoySaid), each
// distinct line with how many Envoys reported it.
func envoyVerdict(b *testing.B, envoys []*harness.Envoy) (rejected, said []string) {
	logs := make([]string, len(envoys))
	counts := map[string]int{}
	for i, e := range envoys {
		logs[i] = e.Logs()
		rej, err := e.Rejections()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range rej {
			counts[line]++
		}
	}
	for line, n := range counts {
		rejected = append(rejected, fmt.Sprintf("%s (%d of %d Envoys)", line, n, len(envoys)))
	}
	slices.Sort(rejected)
	return rejected, EnvoySaid(logs)
}

// envoyChanges flips -envoy-changes TTL checks one at a time and records,
// for each, every Envoy's latency until its admin API shows the
// service's new healthy host count, and the server's CPU from the flip
// to the last Envoy.
func envoyChanges(b *testing.B, consul *ConsulConnect, cat Catalog, side envoySide, admins []*EnvoyAdmin, r *EnvoyRun) *NodeFlipper {
	ctx := b.Context()
	flip := NewNodeFlipper(cat, consul.Client.Catalog())
	healthy := make([]int, cat.Services)
	for s := range healthy {
		healthy[s] = cat.Endpoints
	}
	for k := range *flagEnvoyChanges {
		s, e := k%cat.Services, (k/cat.Services)%cat.Endpoints
		if flip.Down(s, e) {
			healthy[s]++
		} else {
			healthy[s]--
		}
		cpu0, err := ProcCPU(side.pid)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := flip.Flip(ctx, s, e); err != nil {
			b.Fatal(err)
		}
		lat, err := AwaitEnvoysHealthy(ctx, admins, cat.Service(s), healthy[s], t0, *flagEnvoyPoll, envoyChangeTimeout)
		if err != nil {
			b.Fatalf("change %d (%s): %v", k, cat.CheckID(s, e), err)
		}
		cpu1, err := ProcCPU(side.pid)
		if err != nil {
			b.Fatal(err)
		}
		r.ServerCPU += cpu1 - cpu0
		secs := make([]float64, len(lat))
		for i, d := range lat {
			secs[i] = d.Seconds()
		}
		r.Latencies = append(r.Latencies, secs...)
		r.ChangeSpread = append(r.ChangeSpread, slices.Max(secs)-slices.Min(secs))
		r.Changes++
		sleep(ctx, *flagGap)
	}
	return flip
}

// envoyFinalCheck reads every Envoy's /clusters once and checks that each
// host of every service has the health Consul has for it.
func envoyFinalCheck(b *testing.B, envoys []*harness.Envoy, cat Catalog, flip *NodeFlipper) {
	var bad []string
	for _, e := range envoys {
		c, err := e.Clusters()
		if err != nil {
			b.Fatal(err)
		}
		if err := CheckEnvoyHosts(c, cat, flip.Down); err != nil {
			bad = append(bad, e.NodeID+": "+err.Error())
		}
	}
	if len(bad) > 0 {
		b.Fatalf("%d of %d Envoys' /clusters differ from Consul after the changes:\n%s", len(bad), len(envoys), strings.Join(bad, "\n"))
	}
}
