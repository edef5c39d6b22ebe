# web's subsets v1 and v2 by the version in each instance's service meta,
# and its default subset: a request for web that names no subset (every
# request, without a splitter or router) goes to v1.
#   consul config write examples/policy/web-resolver-v1.hcl
Kind          = "service-resolver"
Name          = "web"
DefaultSubset = "v1"
Subsets = {
  v1 = {
    Filter = "Service.Meta.version == v1"
  }
  v2 = {
    Filter = "Service.Meta.version == v2"
  }
}
