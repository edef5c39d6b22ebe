// Package metricreg owns the one way this module registers its Prometheus
// collectors: Register (all of a component's collectors or none: a nil
// Registerer registers nothing; on the first failure those already
// registered by the call are unregistered and the error returned) and
// Reuse (register a collector, or take the one a previous instance of
// the component already registered under the same descriptor). Callers
// wrap the error with their package prefix; metric names, labels and help
// texts stay with the callers.
//
// metricreg must not import anything else in this module.
//
// imports_test.go enforces the import rules.
package metricreg
