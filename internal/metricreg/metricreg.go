package metricreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers cs with reg, in order, all or none: on the first
// failure it unregisters those it registered and returns the error. A nil
// reg registers nothing.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return err
		}
	}
	return nil
}

// Reuse registers c with reg, or returns the collector of the same type
// already registered in its place (another instance of the component in
// this process). A nil reg returns c.
func Reuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}
