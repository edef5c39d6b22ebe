package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/xds-server/xds-server/config"
)

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToLower(s))); err != nil {
		return 0, fmt.Errorf("%q is not one of debug, info, warn, error", s)
	}
	return l, nil
}

// newLogger builds the process logger from a validated config.LogConfig.
func newLogger(c config.LogConfig, w io.Writer) *slog.Logger {
	level, _ := parseLevel(c.Level)
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
