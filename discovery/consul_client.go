package discovery

import (
	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/consulstate"
)

// ConsulTLS configures HTTPS to Consul: consulstate.TLS (empty fields
// fall back to Consul's CONSUL_* environment variables).
type ConsulTLS = consulstate.TLS

// ConsulClient returns a Consul API client for c's address, datacenter,
// token and TLS, as consulstate.NewClient makes it (a token file is
// followed; it does not contact Consul). Its datacenter is the local one:
// Datacenter, else the first of Datacenters.
func (c ConsulConfig) ConsulClient() (*api.Client, error) {
	return consulstate.NewClient(consulstate.ClientConfig{Address: c.Address, Datacenter: c.datacenters()[0],
		Token: c.Token, TokenFile: c.TokenFile, TLS: c.TLS, Now: c.Now})
}
