package consulstate

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
)

// DefaultAddress is the Consul agent's HTTP address when none is given.
const DefaultAddress = "127.0.0.1:8500"

// TLS configures HTTPS to Consul. Empty fields fall back to Consul's own
// environment variables: CONSUL_CACERT, CONSUL_CLIENT_CERT,
// CONSUL_CLIENT_KEY, CONSUL_TLS_SERVER_NAME (and
// CONSUL_HTTP_SSL_VERIFY=false for InsecureSkipVerify).
type TLS struct {
	CAFile             string // PEM CA bundle verifying Consul's certificate; "" = system roots
	CertFile           string // PEM client certificate (Consul's verify_incoming)
	KeyFile            string // its private key
	ServerName         string // name the certificate is verified for; "" = the address's host
	InsecureSkipVerify bool   // testing only
}

// withEnv fills the empty fields of t from Consul's env vars.
func (t TLS) withEnv() TLS {
	t.CAFile = cmp.Or(t.CAFile, os.Getenv("CONSUL_CACERT"))
	t.CertFile = cmp.Or(t.CertFile, os.Getenv("CONSUL_CLIENT_CERT"))
	t.KeyFile = cmp.Or(t.KeyFile, os.Getenv("CONSUL_CLIENT_KEY"))
	t.ServerName = cmp.Or(t.ServerName, os.Getenv("CONSUL_TLS_SERVER_NAME"))
	return t
}

// enabled reports whether t asks for HTTPS.
func (t TLS) enabled() bool {
	return t != TLS{}
}

// ClientConfig is where and how to reach Consul.
type ClientConfig struct {
	Address    string // host:port or a URL; "" = DefaultAddress
	Datacenter string // "" = the agent's
	Token      string // ACL token; wins over TokenFile
	TokenFile  string // file holding the token, followed when rotated
	TLS        TLS
	Now        func() time.Time // the token file's check clock; nil = time.Now
}

// NewClient returns a Consul API client for c's address, datacenter,
// token and TLS: the one client construction of discovery, ha and
// nodeindex. The token is c.Token, else the content of c.TokenFile, else
// Consul's CONSUL_HTTP_TOKEN and CONSUL_HTTP_TOKEN_FILE env vars; a token
// file is followed (a rotated token is used without a restart). Any TLS
// setting (c.TLS or its env vars) makes a host:port address https. It does
// not contact Consul.
func NewClient(c ClientConfig) (*api.Client, error) {
	addr := cmp.Or(c.Address, DefaultAddress)
	t := c.TLS.withEnv()
	ac := &api.Config{Address: addr, Token: c.Token, TokenFile: c.TokenFile, Datacenter: c.Datacenter,
		TLSConfig: api.TLSConfig{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile,
			Address: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}}
	if c.Token != "" {
		ac.TokenFile = "" // api's precedence is the other way round
	}
	if t.enabled() && !strings.Contains(addr, "://") {
		ac.Scheme = "https"
	}
	client, err := api.NewClient(ac)
	if err != nil {
		return nil, fmt.Errorf("consulstate: client for %s: %w", addr, err)
	}
	// NewClient filled ac: the token file it read (ours, or
	// CONSUL_HTTP_TOKEN_FILE's) and the http.Client the client uses.
	if c.Token == "" && ac.TokenFile != "" && ac.HttpClient != nil {
		if err := followTokenFile(ac.HttpClient, ac.TokenFile, ac.Token, 0, c.Now); err != nil {
			return nil, err
		}
	}
	return client, nil
}
