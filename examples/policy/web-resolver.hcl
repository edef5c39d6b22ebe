# web's subsets, by the version in each instance's service meta: each is a
# cluster of its own for Envoy (web~v1, web~v2). Without a DefaultSubset,
# web's own target is every instance.
#   consul config write examples/policy/web-resolver.hcl
Kind = "service-resolver"
Name = "web"
Subsets = {
  v1 = {
    Filter = "Service.Meta.version == v1"
  }
  v2 = {
    Filter = "Service.Meta.version == v2"
  }
}
