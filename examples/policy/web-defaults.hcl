# web speaks HTTP: Consul accepts a service-splitter or -router only for a
# service whose protocol is http, http2 or grpc.
#   consul config write examples/policy/web-defaults.hcl
Kind     = "service-defaults"
Name     = "web"
Protocol = "http"
