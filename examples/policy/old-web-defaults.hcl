# old-web speaks HTTP, as web does: Consul accepts a redirect only between
# services of one protocol (its discovery chain has one protocol).
#   consul config write examples/policy/old-web-defaults.hcl
Kind     = "service-defaults"
Name     = "old-web"
Protocol = "http"
