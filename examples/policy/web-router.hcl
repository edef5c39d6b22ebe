# Testers opt in: a request with the header x-canary: 1 goes to v2, always;
# every other request falls through to web's splitter (or its resolver).
#   consul config write examples/policy/web-router.hcl
Kind = "service-router"
Name = "web"
Routes = [
  {
    Match {
      HTTP {
        Header = [
          {
            Name  = "x-canary"
            Exact = "1"
          },
        ]
      }
    }
    Destination {
      ServiceSubset = "v2"
    }
  },
]
