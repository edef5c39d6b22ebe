package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"
)

// orcaPortMeta is the service meta key with the ORCA port, where xds-server
// looks for it (weights.orca_port_meta).
const orcaPortMeta = "orca_port"

// registry is the backend's registration in the local Consul agent. Every
// call is bounded by timeout, so that an unavailable Consul never hangs the
// backend.
type registry struct {
	agent   *api.Agent
	id      string        // service id
	timeout time.Duration // > 0
}

// newRegistry returns the registry of service id through the agent at
// address (the token and TLS settings come from the usual CONSUL_*
// environment variables).
func newRegistry(address, id string, timeout time.Duration) (*registry, error) {
	cfg := api.DefaultConfig()
	cfg.Address = address
	c, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("backend: consul client for %s: %w", address, err)
	}
	return &registry{agent: c.Agent(), id: id, timeout: timeout}, nil
}

// register registers reg, replacing an earlier registration of the same id.
func (r *registry) register(reg *api.AgentServiceRegistration) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	opts := api.ServiceRegisterOpts{ReplaceExistingChecks: true}.WithContext(ctx)
	if err := r.agent.ServiceRegisterOpts(reg, opts); err != nil {
		return fmt.Errorf("backend: consul: register %q: %w", r.id, err)
	}
	return nil
}

// maintenance puts the service in maintenance mode: Consul adds the
// critical check _service_maintenance:<id>, which xds-server maps to
// DRAINING.
func (r *registry) maintenance(reason string) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	if err := r.agent.EnableServiceMaintenanceOpts(r.id, reason, (&api.QueryOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("backend: consul: enable maintenance of %q: %w", r.id, err)
	}
	return nil
}

// deregister removes the service and its checks.
func (r *registry) deregister() error {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	if err := r.agent.ServiceDeregisterOpts(r.id, (&api.QueryOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("backend: consul: deregister %q: %w", r.id, err)
	}
	return nil
}

// registration is the service registration of the backend with id,
// serving gRPC (and ORCA) on grpcAddr and HTTP on httpAddr; the address
// registered is grpcAddr, or httpAddr with -register-port http. Its HTTP
// check on /healthz starts passing: the HTTP server already serves.
func registration(cfg Config, id string, grpcAddr, httpAddr *net.TCPAddr) *api.AgentServiceRegistration {
	meta := maps.Clone(cfg.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[orcaPortMeta] = strconv.Itoa(grpcAddr.Port)
	registered := grpcAddr
	if cfg.RegisterPort == "http" {
		registered = httpAddr
	}
	address := "" // unspecified: Consul uses the node's address
	if !registered.IP.IsUnspecified() {
		address = registered.IP.String()
	}
	checkHost := "127.0.0.1" // the agent runs next to the backend
	if !httpAddr.IP.IsUnspecified() {
		checkHost = httpAddr.IP.String()
	}
	check := &api.AgentServiceCheck{
		Name:     "HTTP /healthz",
		HTTP:     "http://" + net.JoinHostPort(checkHost, strconv.Itoa(httpAddr.Port)) + "/healthz",
		Interval: cfg.CheckInterval.String(),
		Timeout:  min(cfg.CheckInterval, 5*time.Second).String(),
		Status:   api.HealthPassing,
	}
	if cfg.DeregisterCriticalAfter > 0 {
		check.DeregisterCriticalServiceAfter = cfg.DeregisterCriticalAfter.String()
	}
	return &api.AgentServiceRegistration{ID: id, Name: cfg.Service, Tags: cfg.Tags, Meta: meta,
		Address: address, Port: registered.Port, Check: check}
}
