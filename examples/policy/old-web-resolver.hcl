# old-web was renamed: every request for it goes to web's subset v2
# instead (a cluster of web's, web~v2; old-web's own instances, if any,
# get none).
#   consul config write examples/policy/old-web-resolver.hcl
Kind = "service-resolver"
Name = "old-web"
Redirect = {
  Service       = "web"
  ServiceSubset = "v2"
}
