package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// envoyAdminClient reads the lab Envoys' admin APIs.
var envoyAdminClient = &http.Client{Timeout: 5 * time.Second}

// envoyAdminGet returns the body of path on the admin listener admin.
func envoyAdminGet(admin, path string) ([]byte, error) {
	resp, err := envoyAdminClient.Get("http://" + admin + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("envoy admin %s: %s", path, resp.Status)
	}
	return b, nil
}

// envoySocket is a socket address in Envoy's admin JSON.
type envoySocket struct {
	SocketAddress struct {
		Address   string `json:"address"`
		PortValue int    `json:"port_value"`
	} `json:"socket_address"`
}

func (s envoySocket) hostPort() string {
	return net.JoinHostPort(s.SocketAddress.Address, strconv.Itoa(s.SocketAddress.PortValue))
}

// envoyListenerAddr is the host:port the listener name of the Envoy at
// admin is bound to (its real port, also when configured with port 0).
func envoyListenerAddr(admin, name string) (string, error) {
	b, err := envoyAdminGet(admin, "/listeners?format=json")
	if err != nil {
		return "", err
	}
	return parseListenerAddr(b, name)
}

// parseListenerAddr reads listener name's bound address from the JSON of
// Envoy's /listeners?format=json.
func parseListenerAddr(b []byte, name string) (string, error) {
	var ls struct {
		ListenerStatuses []struct {
			Name         string      `json:"name"`
			LocalAddress envoySocket `json:"local_address"`
		} `json:"listener_statuses"`
	}
	if err := json.Unmarshal(b, &ls); err != nil {
		return "", fmt.Errorf("envoy /listeners: %w", err)
	}
	for _, l := range ls.ListenerStatuses {
		if l.Name == name {
			if l.LocalAddress.SocketAddress.PortValue == 0 {
				return "", fmt.Errorf("listener %s not bound yet", name)
			}
			return l.LocalAddress.hostPort(), nil
		}
	}
	return "", fmt.Errorf("no listener %s", name)
}

// envoyHost is one host of a cluster as Envoy sees it.
type envoyHost struct {
	addr   string // host:port
	weight int    // the EDS load-balancing weight Envoy applies
}

// envoyHosts are the hosts of cluster in the Envoy at admin.
func envoyHosts(admin, cluster string) ([]envoyHost, error) {
	b, err := envoyAdminGet(admin, "/clusters?format=json")
	if err != nil {
		return nil, err
	}
	return parseHosts(b, cluster)
}

// parseHosts reads cluster's hosts from the JSON of Envoy's
// /clusters?format=json; a cluster Envoy does not have is an error.
func parseHosts(b []byte, cluster string) ([]envoyHost, error) {
	hosts, err := clusterHosts(b, cluster)
	if err != nil {
		return nil, err
	}
	out := make([]envoyHost, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, envoyHost{addr: h.Address.hostPort(), weight: h.Weight})
	}
	return out, nil
}

// hostStatus is one host of a cluster in Envoy's /clusters?format=json.
type hostStatus struct {
	Address envoySocket `json:"address"`
	Weight  int         `json:"weight"`
	Stats   []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"stats"`
}

// clusterHosts decodes the hosts of cluster from the JSON of Envoy's
// /clusters?format=json; a cluster Envoy does not have is an error.
func clusterHosts(b []byte, cluster string) ([]hostStatus, error) {
	var cs struct {
		ClusterStatuses []struct {
			Name         string       `json:"name"`
			HostStatuses []hostStatus `json:"host_statuses"`
		} `json:"cluster_statuses"`
	}
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("envoy /clusters: %w", err)
	}
	for _, c := range cs.ClusterStatuses {
		if c.Name == cluster {
			return c.HostStatuses, nil
		}
	}
	return nil, fmt.Errorf("no cluster %s", cluster)
}
