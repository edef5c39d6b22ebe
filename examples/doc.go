// Package examples holds the example configuration files shipped with
// xds-server; endpoints.yaml is embedded as the default static source.
//
// examples must not import anything else in this module.
package examples
