package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// maxDelay bounds the x-delay-ms metadata of a call.
const maxDelay = 10 * time.Minute

// Config is the command line of the backend.
type Config struct {
	Consul        string        // Consul agent HTTP address, host:port or a URL
	ConsulTimeout time.Duration // bound on each Consul API call; > 0

	Service string            // Consul service name
	ID      string            // Consul service id; empty: <Service>-<gRPC port>
	Tags    []string          // Consul service tags
	Meta    map[string]string // Consul service meta; orca_port is always added

	GRPCAddr string // gRPC listen address (port 0: any free port)
	HTTPAddr string // HTTP listen address (port 0: any free port)
	// RegisterPort is the listener registered in Consul as the service's
	// address: "grpc" (the default) or "http" (for Envoy routing HTTP).
	// ORCA stays on the gRPC port, named by the orca_port meta.
	RegisterPort string

	CheckInterval           time.Duration // interval of the HTTP check on /healthz; > 0
	DeregisterCriticalAfter time.Duration // Consul removes the service after its check is critical this long; 0: never

	DrainDelay      time.Duration // lame duck time while still serving, before stopping; >= 0
	ShutdownTimeout time.Duration // bound on the graceful stop of the servers; > 0

	Utilization     float64       // fixed CPU utilization reported in [0, 1]; < 0: from the in-flight RPCs
	Capacity        int           // in-flight RPCs that make a CPU utilization of 1; >= 1
	Slots           int           // capacity model: concurrent slots, calls beyond wait; 0: off (calls take no time)
	ServiceTime     time.Duration // capacity model: time a call holds a slot; > 0 with Slots
	LameDuckMetric  string        // ORCA named metric set to 1 in lame duck
	ORCAMinInterval time.Duration // shortest out-of-band ORCA report interval granted; > 0

	LogLevel slog.Level
}

// parseConfig parses the command line args (without the program name).
// Usage and errors are also written to out.
func parseConfig(args []string, out io.Writer) (Config, error) {
	cfg := Config{Meta: map[string]string{}}
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.Consul, "consul", "127.0.0.1:8500", "Consul agent HTTP address")
	fs.DurationVar(&cfg.ConsulTimeout, "consul-timeout", 2*time.Second, "bound on each Consul API call")
	fs.StringVar(&cfg.Service, "service", "backend", "Consul service name")
	fs.StringVar(&cfg.ID, "id", "", "Consul service id (default <service>-<gRPC port>)")
	fs.Func("tags", "comma-separated Consul service `tags`", func(s string) error {
		cfg.Tags = splitTags(s)
		return nil
	})
	fs.Func("meta", "Consul service meta `key=value` (repeatable); orca_port is always set to the gRPC port",
		func(s string) error { return addMeta(cfg.Meta, s) })
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", "127.0.0.1:0", "gRPC listen address (port 0: any free port)")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", "127.0.0.1:0", "HTTP listen address (port 0: any free port)")
	fs.StringVar(&cfg.RegisterPort, "register-port", "grpc",
		"listener registered in Consul as the service address: grpc or http (ORCA stays on the gRPC port)")
	fs.DurationVar(&cfg.CheckInterval, "check-interval", time.Second, "interval of Consul's HTTP check on /healthz")
	fs.DurationVar(&cfg.DeregisterCriticalAfter, "deregister-critical-after", time.Minute,
		"Consul deregisters the service after its check is critical this long (0: never)")
	fs.DurationVar(&cfg.DrainDelay, "drain-delay", 5*time.Second,
		"lame duck: keep serving this long after entering maintenance, before stopping")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 10*time.Second,
		"bound on the graceful stop of the servers (in-flight RPCs), then a hard stop")
	fs.Float64Var(&cfg.Utilization, "utilization", -1,
		"fixed CPU utilization reported over ORCA, in [0, 1] (negative: in-flight RPCs / -capacity)")
	fs.IntVar(&cfg.Capacity, "capacity", 10, "in-flight RPCs that make a CPU utilization of 1")
	fs.IntVar(&cfg.Slots, "slots", 0,
		"capacity model: concurrent slots, each call holding one for -service-time, calls beyond them queue; "+
			"the utilization reported is then the slot time in use (0: off)")
	fs.DurationVar(&cfg.ServiceTime, "service-time", 10*time.Millisecond,
		"capacity model: time a call holds a slot (capacity = -slots / -service-time calls per second)")
	fs.StringVar(&cfg.LameDuckMetric, "lame-duck-metric", "lame_duck", "ORCA named metric set to 1 in lame duck")
	fs.DurationVar(&cfg.ORCAMinInterval, "orca-min-interval", time.Second,
		"shortest out-of-band ORCA report interval granted to a client")
	fs.TextVar(&cfg.LogLevel, "log-level", slog.LevelInfo, "log `level`: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return Config{}, fmt.Errorf("backend: flags: %w", err)
	}
	err := cfg.Validate()
	if fs.NArg() > 0 {
		err = errors.Join(fmt.Errorf("backend: unexpected arguments %q", fs.Args()), err)
	}
	if err != nil {
		fmt.Fprintln(out, err)
		return Config{}, err
	}
	return cfg, nil
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Consul == "" {
		errs = append(errs, errors.New("-consul is empty"))
	}
	if c.Service == "" {
		errs = append(errs, errors.New("-service is empty"))
	}
	for name, d := range map[string]time.Duration{"-consul-timeout": c.ConsulTimeout,
		"-check-interval": c.CheckInterval, "-shutdown-timeout": c.ShutdownTimeout,
		"-orca-min-interval": c.ORCAMinInterval} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s is %v, want > 0", name, d))
		}
	}
	for name, d := range map[string]time.Duration{"-drain-delay": c.DrainDelay,
		"-deregister-critical-after": c.DeregisterCriticalAfter} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s is %v, want >= 0", name, d))
		}
	}
	if c.Utilization > 1 {
		errs = append(errs, fmt.Errorf("-utilization is %v, want at most 1", c.Utilization))
	}
	if c.Capacity < 1 {
		errs = append(errs, fmt.Errorf("-capacity is %d, want >= 1", c.Capacity))
	}
	if c.Slots < 0 {
		errs = append(errs, fmt.Errorf("-slots is %d, want >= 0", c.Slots))
	}
	if c.Slots > 0 && c.ServiceTime <= 0 {
		errs = append(errs, fmt.Errorf("-service-time is %v, want > 0 with -slots", c.ServiceTime))
	}
	if c.RegisterPort != "grpc" && c.RegisterPort != "http" {
		errs = append(errs, fmt.Errorf("-register-port is %q, want grpc or http", c.RegisterPort))
	}
	if c.LameDuckMetric == "" {
		errs = append(errs, errors.New("-lame-duck-metric is empty"))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("backend: invalid flags: %w", errors.Join(errs...))
}

// splitTags splits a comma-separated list, dropping empty items.
func splitTags(s string) []string {
	var tags []string
	for t := range strings.SplitSeq(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return tags
}

// addMeta adds one key=value pair to meta.
func addMeta(meta map[string]string, kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("meta %q is not key=value", kv)
	}
	meta[k] = v
	return nil
}
