package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

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
// Durations are written as their String ("5s"), in text and in JSON.
func newLogger(c config.LogConfig, w io.Writer) *slog.Logger {
	level, _ := parseLevel(c.Level)
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: readableDurations}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// readableDurations is a slog ReplaceAttr writing time.Duration values as
// strings: the JSON handler would write nanoseconds (5000000000).
func readableDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	if d, ok := a.Value.Any().(time.Duration); ok && a.Value.Kind() == slog.KindAny {
		return slog.String(a.Key, d.String())
	}
	return a
}
