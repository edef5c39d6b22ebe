// Package freeport owns finding free loopback ports for the child
// processes that tests and benchmarks start (Consul agents, Redis, Envoy):
// Loopback returns ports free for both TCP and UDP at the time of the
// call, drawn from outside the kernel's ephemeral range so that a child
// restarted on its ports does not find one taken by an outgoing
// connection. A port can still be taken before the child binds it:
// callers retry with fresh ports.
//
// freeport must not import anything else in this module.
//
// imports_test.go enforces the import rules.
package freeport
