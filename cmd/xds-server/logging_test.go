package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/config"
)

func TestLogDurationsAreStrings(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			log := newLogger(config.LogConfig{Level: "info", Format: format}, &buf)
			log.With("component", "test").Info("shutting down", "grace", 5*time.Second,
				"down_for", time.Duration(1500)*time.Millisecond, "count", 3)
			out := buf.String()
			if format == "json" {
				var line map[string]any
				if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				if line["grace"] != "5s" || line["down_for"] != "1.5s" || line["count"] != float64(3) {
					t.Errorf("got %s", out)
				}
				return
			}
			if !strings.Contains(out, "grace=5s") || !strings.Contains(out, "down_for=1.5s") {
				t.Errorf("got %s", out)
			}
		})
	}
}
