// Package translatetest holds what the golden tests of translate.Node
// and xds's equivalence test share: the YAML form of a node's input
// (Load, Decode), the YAML rendering of its resources (Render) and a
// line diff for failures (Diff), the YAML form of translate.PolicyService's
// input and its rendering (LoadPolicy, RenderPolicy), and the fixtures the xds and xdscache
// tests share (World, Listeners). Tests only: nothing in production
// imports it.
//
// translatetest may import translate, envoy, discovery, subsetting and policy,
// and YAML and protobuf encoders; it must not import xds, xdscache, or
// any server or gRPC package.
//
// imports_test.go enforces the import rules.
package translatetest
