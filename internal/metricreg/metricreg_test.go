package metricreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func counter(name string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "h"})
}

func TestRegisterAllOrNone(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := Register(reg, counter("taken")); err != nil {
		t.Fatal(err)
	}
	if err := Register(reg, counter("a"), counter("b"), counter("taken")); err == nil {
		t.Fatal("registering a taken name: no error")
	}
	// a and b were unregistered: registering them again works.
	if err := Register(reg, counter("a"), counter("b")); err != nil {
		t.Errorf("a and b left registered after the failure: %v", err)
	}
}

func TestRegisterNil(t *testing.T) {
	if err := Register(nil, counter("a")); err != nil {
		t.Error(err)
	}
}

func TestReuse(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := Reuse(reg, counter("c"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Reuse(reg, counter("c"))
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Error("Reuse returned a new collector, want the one registered first")
	}
	// same name, other type: not reusable.
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "c", Help: "h"})
	if _, err := Reuse(reg, g); err == nil {
		t.Error("Reuse of a gauge over a counter: no error")
	}
	if c, err := Reuse(nil, first); err != nil || c != first {
		t.Errorf("Reuse(nil) = %v, %v", c, err)
	}
}
