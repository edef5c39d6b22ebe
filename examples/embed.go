package examples

import _ "embed"

// Endpoints is examples/endpoints.yaml, the embedded default static source.
//
//go:embed endpoints.yaml
var Endpoints []byte
