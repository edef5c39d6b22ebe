package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ReadFiles reads the configuration at path: the file itself, or the
// *.yaml and *.yml files of the directory (not its subdirectories, and
// not hidden files), in name order. Symbolic links are followed, so a
// Kubernetes ConfigMap mount works.
func ReadFiles(path string) ([]File, error) {
	names, err := configNames(path)
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(names))
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("ratelimit: reading config: %w", err)
		}
		files = append(files, File{Name: n, Data: data})
	}
	return files, nil
}

// LoadPath reads and loads the configuration at path with the default
// LoadOptions (see ReadFiles and Load).
func LoadPath(path string) (*Config, error) { return LoadOptions{}.LoadPath(path) }

// LoadPath reads and loads the configuration at path (see ReadFiles and
// LoadOptions.Load).
func (o LoadOptions) LoadPath(path string) (*Config, error) {
	files, err := ReadFiles(path)
	if err != nil {
		return nil, err
	}
	c, err := o.Load(files...)
	if err != nil || o.AllowEmpty || len(c.domains) > 0 {
		return c, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: %s has no *.yaml or *.yml file (set ratelimit.allow_empty: true to serve no domains)", ErrEmptyConfig, path)
	}
	return nil, fmt.Errorf("%w: %s defines no domain (set ratelimit.allow_empty: true to serve no domains)", ErrEmptyConfig, path)
}

// ErrEmptyConfig is LoadPath's error for a path without any domain,
// unless LoadOptions.AllowEmpty.
var ErrEmptyConfig = errors.New("ratelimit: empty config")

// configNames lists the configuration files at path.
func configNames(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: reading config: %w", err)
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: reading config: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		ext := strings.ToLower(filepath.Ext(n))
		if strings.HasPrefix(n, ".") || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		full := filepath.Join(path, n)
		if st, err := os.Stat(full); err != nil || st.IsDir() {
			continue
		}
		names = append(names, full)
	}
	slices.Sort(names)
	return names, nil
}

// fingerprint summarizes the configuration files at path (names, sizes,
// modification times) to notice changes; "" when path is unreadable.
func fingerprint(path string) string {
	names, err := configNames(path)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, n := range names {
		if st, err := os.Stat(n); err == nil {
			fmt.Fprintf(&b, "%s\x00%d\x00%d\n", n, st.Size(), st.ModTime().UnixNano())
		}
	}
	return b.String()
}

// Reload loads the configuration at ServiceConfig.Path and swaps it in.
// On failure the previous configuration stays and the error is counted
// (ratelimit_config_reloads_total{result="error"}) and returned.
func (s *Service) Reload() error {
	if s.cfg.Path == "" {
		return errors.New("ratelimit: reload: no config path")
	}
	c, err := LoadOptions{MergeDomains: s.cfg.MergeDomains, AllowEmpty: s.cfg.AllowEmpty}.LoadPath(s.cfg.Path)
	if err != nil {
		s.m.reloads.WithLabelValues("error").Inc()
		return fmt.Errorf("ratelimit: reload %s: %w", s.cfg.Path, err)
	}
	s.SetConfig(c)
	s.m.reloads.WithLabelValues("success").Inc()
	return nil
}

// Watch polls ServiceConfig.Path every interval (in practice a few
// seconds) and reloads when a file changed, appeared or went; failures
// are logged and keep the previous configuration. It returns ctx's error
// when ctx ends.
func (s *Service) Watch(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("ratelimit: watch interval %v must be positive", interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	return s.watch(ctx, t.C, nil)
}

// watch reloads on each tick that sees a changed fingerprint; after each
// tick it calls done (if set) with whether it reloaded and the result.
func (s *Service) watch(ctx context.Context, ticks <-chan time.Time, done func(bool, error)) error {
	last := fingerprint(s.cfg.Path)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticks:
		}
		fp := fingerprint(s.cfg.Path)
		if fp == last {
			if done != nil {
				done(false, nil)
			}
			continue
		}
		last = fp
		err := s.Reload()
		if err != nil {
			s.log.Error("config reload failed; keeping the previous config", "path", s.cfg.Path, "error", err)
		} else {
			s.log.Info("config reloaded", "path", s.cfg.Path, "domains", len(s.Config().Domains()),
				"rules", len(s.Config().rules))
		}
		if done != nil {
			done(true, err)
		}
	}
}
