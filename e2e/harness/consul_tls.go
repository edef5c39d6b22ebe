package harness

import (
	"cmp"
	"fmt"
	"strconv"

	"github.com/hashicorp/consul/api"
)

// ConsulOptions are the settings of ConsulWith.
type ConsulOptions struct {
	// TLS, when set, serves the HTTP API over HTTPS only, on the port
	// Addr names (no plain HTTP port).
	TLS *ConsulTLS
	// Datacenter of the agent; "" means ConsulDatacenter.
	Datacenter string
	// WAN gives the agent a serf WAN port on loopback, to be joined with
	// agents of other datacenters (see ConsulWAN).
	WAN bool
}

// ConsulTLS are the PEM files of an agent serving HTTPS; the caller makes
// them (the certificate must be valid for 127.0.0.1).
type ConsulTLS struct {
	CAFile, CertFile, KeyFile string // the CA and the agent's certificate
	// ClientCertFile and ClientKeyFile, when set, make the agent require
	// client certificates signed by the CA (verify_incoming), and are the
	// one the harness's own client presents.
	ClientCertFile, ClientKeyFile string
}

// args are the agent's command line.
func (a *ConsulAgent) args() []string {
	args := []string{"agent", "-dev", "-node=" + a.node, "-datacenter=" + a.dc,
		"-bind=127.0.0.1", "-client=127.0.0.1", "-config-dir=" + a.configDir, "-log-level=info",
		"-serf-lan-port=" + strconv.Itoa(a.serfLAN),
		"-server-port=" + strconv.Itoa(a.server), "-serf-wan-port=" + strconv.Itoa(cmp.Or(a.serfWAN, -1)), "-dns-port=-1",
		"-grpc-port=-1", "-grpc-tls-port=-1", "-hcl=disable_update_check = true"}
	args = append(args, a.wanArgs()...)
	if a.tls == nil {
		return append(args, "-http-port="+strconv.Itoa(a.http))
	}
	return append(args, "-http-port=-1", fmt.Sprintf("-hcl=ports { https = %d }", a.http),
		fmt.Sprintf("-hcl=tls { defaults { ca_file = %q cert_file = %q key_file = %q } https { verify_incoming = %t } }",
			a.tls.CAFile, a.tls.CertFile, a.tls.KeyFile, a.tls.ClientCertFile != ""))
}

// clientConfig is the configuration of the harness's own API client.
func (a *ConsulAgent) clientConfig() *api.Config {
	c := &api.Config{Address: a.Addr(), Token: "", Datacenter: a.dc}
	if a.tls != nil {
		c.Scheme = "https"
		c.TLSConfig = api.TLSConfig{CAFile: a.tls.CAFile, CertFile: a.tls.ClientCertFile, KeyFile: a.tls.ClientKeyFile}
	}
	return c
}
