package discovery

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// StaticConfig configures the static file source.
type StaticConfig struct {
	File         string        // YAML file of services; "" means Embedded
	Embedded     []byte        // contents used when File is ""
	PollInterval time.Duration // how often File is checked for changes; 0 means 1s
	Logger       *slog.Logger  // nil means slog.Default()
	Metrics      *Metrics      // may be nil
	// OnReload, if set, is called after every attempt to load a changed
	// file, with nil or the reason the new contents were rejected.
	OnReload func(error)
}

// Validate reports configuration errors.
func (c StaticConfig) Validate() error {
	var errs []error
	if c.File == "" && len(c.Embedded) == 0 {
		errs = append(errs, errors.New("discovery: static: file: neither a file nor embedded contents given"))
	}
	if c.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("discovery: static: poll_interval: %v is negative", c.PollInterval))
	}
	return errors.Join(errs...)
}

// Static is a Source reading services from a YAML file, reloaded when the
// file changes. A file that fails to read or parse is reported and the
// previous contents stay in force.
type Static struct {
	cfg  StaticConfig
	log  *slog.Logger
	snap Snapshot
	sum  [sha256.Size]byte // of the contents last tried, good or bad
}

// NewStatic loads the file once; it fails if the initial contents are bad.
func NewStatic(cfg StaticConfig) (*Static, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.PollInterval = cmp.Or(cfg.PollInterval, time.Second)
	s := &Static{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()).With("component", "discovery.static")}
	data, err := s.read()
	if err != nil {
		return nil, err
	}
	if err := s.load(data); err != nil {
		return nil, err
	}
	return s, nil
}

// Snapshot returns the current contents.
func (s *Static) Snapshot() Snapshot { return s.snap }

// Run emits the current snapshot, then a new one each time the file changes
// to valid contents, until ctx is done.
func (s *Static) Run(ctx context.Context, emit func(Snapshot)) error {
	s.cfg.Metrics.emitted("static")
	emit(s.snap)
	if s.cfg.File == "" {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		data, err := s.read()
		if err == nil {
			sum := sha256.Sum256(data)
			if sum == s.sum {
				continue
			}
			s.sum = sum
			err = s.load(data)
		}
		s.reloaded(err)
		if err == nil {
			s.cfg.Metrics.emitted("static")
			emit(s.snap)
		}
	}
}

func (s *Static) reloaded(err error) {
	if m := s.cfg.Metrics; m != nil {
		result := "ok"
		if err != nil {
			result = "error"
		}
		m.Reloads.WithLabelValues(result).Inc()
	}
	if err != nil {
		s.cfg.Metrics.failed("static")
		s.log.Error("static endpoints file rejected; keeping the previous contents", "file", s.cfg.File, "error", err)
	} else {
		s.log.Info("static endpoints file reloaded", "file", s.cfg.File, "services", len(s.snap.Services), "endpoints", s.snap.EndpointCount())
	}
	if s.cfg.OnReload != nil {
		s.cfg.OnReload(err)
	}
}

func (s *Static) read() ([]byte, error) {
	if s.cfg.File == "" {
		return s.cfg.Embedded, nil
	}
	data, err := os.ReadFile(s.cfg.File)
	if err != nil {
		return nil, fmt.Errorf("discovery: static: %w", err)
	}
	return data, nil
}

func (s *Static) load(data []byte) error {
	raw, err := ParseStatic(data)
	if err != nil {
		return fmt.Errorf("discovery: static: %s: %w", cmp.Or(s.cfg.File, "embedded"), err)
	}
	snap, problems := Normalize(raw)
	for _, p := range problems {
		s.log.Warn("skipping bad entry", "service", p.Service, "endpoint", p.Endpoint, "reason", p.Reason, "detail", p.Detail)
	}
	s.cfg.Metrics.skipped("static", problems)
	s.cfg.Metrics.succeeded("static", float64(time.Now().Unix()))
	s.snap, s.sum = snap, sha256.Sum256(data)
	return nil
}

type staticFile struct {
	// Services is nil when the file has no services key (or an empty
	// value for it); an empty list is services: [].
	Services *[]staticService `yaml:"services"`
}

// ErrNoServices is wrapped by ParseStatic for an empty file, or one
// without a services key: most likely a file truncated or half written,
// not a wish to serve nothing (write services: [] for that).
var ErrNoServices = errors.New("no services key (an empty file is rejected; write services: [] to serve nothing)")

type staticService struct {
	Name      string           `yaml:"name"`
	Endpoints []staticEndpoint `yaml:"endpoints"`
}

type staticEndpoint struct {
	ID       string            `yaml:"id"`
	Address  string            `yaml:"address"`
	Port     int               `yaml:"port"`
	Health   string            `yaml:"health"` // unknown|healthy|degraded|unhealthy|draining; "" = healthy
	Weight   uint32            `yaml:"weight"`
	Region   string            `yaml:"region"`
	Zone     string            `yaml:"zone"`
	SubZone  string            `yaml:"sub_zone"`
	Meta     map[string]string `yaml:"meta"`
	Tags     []string          `yaml:"tags"`
	Draining bool              `yaml:"draining"`
}

// ParseStatic parses a static endpoints file. Unknown keys, invalid health
// names and a file without a services key (ErrNoServices: an empty file
// too) are errors; bad endpoints are left for Normalize to skip.
// An endpoint's health defaults to healthy and its id to "address:port".
func ParseStatic(data []byte) ([]Service, error) {
	var f staticFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if f.Services == nil {
		return nil, fmt.Errorf("parse: %w", ErrNoServices)
	}
	out := make([]Service, 0, len(*f.Services))
	var errs []error
	for i, fs := range *f.Services {
		svc := Service{Name: fs.Name, Endpoints: make([]Endpoint, 0, len(fs.Endpoints))}
		for j, fe := range fs.Endpoints {
			ep, err := fe.endpoint()
			if err != nil {
				errs = append(errs, fmt.Errorf("services[%d].endpoints[%d].health: %w", i, j, err))
				continue
			}
			svc.Endpoints = append(svc.Endpoints, ep)
		}
		out = append(out, svc)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func (fe staticEndpoint) endpoint() (Endpoint, error) {
	h, err := ParseHealth(cmp.Or(fe.Health, "healthy"))
	if err != nil {
		return Endpoint{}, err
	}
	if fe.Draining {
		h = HealthDraining
	}
	drain := ""
	if h == HealthDraining {
		drain = DrainStatic
	}
	id := fe.ID
	if id == "" && fe.Address != "" {
		id = fmt.Sprintf("%s:%d", fe.Address, fe.Port)
	}
	loc := LocalityFrom(fe.Meta, fe.Tags, fe.Meta["datacenter"])
	loc.Region = cmp.Or(fe.Region, loc.Region)
	loc.Zone = cmp.Or(fe.Zone, loc.Zone)
	loc.SubZone = cmp.Or(fe.SubZone, loc.SubZone)
	return Endpoint{
		ID: id, Address: fe.Address, Port: fe.Port, Health: h, Weight: fe.Weight,
		Locality: loc, Meta: fe.Meta, Tags: fe.Tags, Drain: drain, Datacenter: fe.Meta["datacenter"],
	}, nil
}
