// Package examples holds the example configuration files shipped with
// xds-server; endpoints.yaml is embedded as the default static source.
package examples

import _ "embed"

// Endpoints is examples/endpoints.yaml, the embedded default static source.
//
//go:embed endpoints.yaml
var Endpoints []byte
