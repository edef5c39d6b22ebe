package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// servedSubset is the endpoint ids of service lab in the load assignment
// that xds-server last sent node (its /debug/config).
func servedSubset(admin, node string) ([]string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + admin + "/debug/config?node=" + node)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("lab: /debug/config?node=%s: %s", node, resp.Status)
	}
	var cfg struct {
		Resources map[string]struct {
			Resources []struct {
				ClusterName string `json:"clusterName"`
				Endpoints   []struct {
					LbEndpoints []struct {
						Endpoint struct {
							Hostname string `json:"hostname"`
						} `json:"endpoint"`
					} `json:"lbEndpoints"`
				} `json:"endpoints"`
			} `json:"resources"`
		} `json:"resources"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil {
		return nil, fmt.Errorf("lab: /debug/config?node=%s: %w", node, err)
	}
	var ids []string
	for _, cla := range cfg.Resources["endpoint"].Resources {
		if cla.ClusterName != service {
			continue
		}
		for _, l := range cla.Endpoints {
			for _, e := range l.LbEndpoints {
				ids = append(ids, e.Endpoint.Hostname)
			}
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// subsetMismatches counts the clients whose served subset is not the
// simulator's (backend j is lab-<j>), or that are in unlike (their Envoy
// sees another one); with every backend in every set there is nothing to
// compare.
func subsetMismatches(admin string, sim [][]int, bs []*backend, unlike map[int]bool) (int, error) {
	n := 0
	for i, sub := range sim {
		want := make([]string, 0, len(sub))
		for _, j := range sub {
			want = append(want, bs[j].id)
		}
		slices.Sort(want)
		got, err := servedSubset(admin, fmt.Sprintf("lab-client-%d", i))
		if err != nil {
			return 0, err
		}
		if !slices.Equal(got, want) || unlike[i] {
			n++
		}
	}
	return n, nil
}
