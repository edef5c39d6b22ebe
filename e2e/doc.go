// Package e2e holds whole-system tests: the real xds-server binary, a real
// Consul agent, real gRPC backends, and grpc-go's own xDS resolver as the
// xDS client (plus a raw delta ADS client, since grpc-go speaks only state
// of the world). They are skipped with -short.
//
// e2e runs the built binary: it must not import cmd.
package e2e
