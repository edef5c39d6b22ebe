package config

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/xds-server/xds-server/certs"
	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/xds"
)

// rulesKey is the file-only list of xDS authorization rules.
const rulesKey = "xds.authorization.rules"

// TLSConfig is the tls: section of a listener (xds, ratelimit, admin).
type TLSConfig struct {
	CertFile     string `mapstructure:"cert_file"`      // PEM certificate chain; "" = no TLS
	KeyFile      string `mapstructure:"key_file"`       // its private key
	ClientCAFile string `mapstructure:"client_ca_file"` // PEM CA bundle of client certificates; "" = no mTLS
	// ExpiryWarning is how long before the certificate expires a warning
	// is logged; 0 means certs.DefaultExpiryWarning.
	ExpiryWarning time.Duration `mapstructure:"expiry_warning"`
}

// Enabled reports whether the listener serves TLS.
func (t TLSConfig) Enabled() bool { return t.CertFile != "" }

// Server is the certs.Config of the listener named name; the caller adds
// the logger and the metrics.
func (t TLSConfig) Server(name string) certs.Config {
	return certs.Config{Name: name, CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFile: t.ClientCAFile, ExpiryWarning: t.ExpiryWarning}
}

// XDSAuthzConfig is the xds.authorization section.
type XDSAuthzConfig struct {
	Rules []AuthzRule `mapstructure:"-"` // file only; decoded by decodeRules
}

// AuthzRule lets the client certificates whose identity (a URI or DNS
// SAN) matches Identities claim the nodes whose id matches NodeIDs and
// whose cluster matches Clusters (globs; empty = any).
type AuthzRule struct {
	Identities []string `mapstructure:"identities"`
	NodeIDs    []string `mapstructure:"node_ids"`
	Clusters   []string `mapstructure:"clusters"`
}

// ConsulTLS is the discovery.consul.tls section.
type ConsulTLS struct {
	CAFile             string `mapstructure:"ca_file"`
	CertFile           string `mapstructure:"cert_file"`
	KeyFile            string `mapstructure:"key_file"`
	ServerName         string `mapstructure:"server_name"`
	InsecureSkipVerify bool   `mapstructure:"insecure_skip_verify"`
}

func (t ConsulTLS) discovery() discovery.ConsulTLS {
	return discovery.ConsulTLS{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile,
		ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
}

// decodeRules decodes xds.authorization.rules, one rule at a time so a
// bad one is reported under its index.
func decodeRules(p *problems, v any) []AuthzRule {
	if v == nil {
		return nil
	}
	items, ok := v.([]any)
	if !ok {
		p.bad(rulesKey, v, "is not a list of {identities, node_ids, clusters}")
		return nil
	}
	out := make([]AuthzRule, 0, len(items))
	for i, item := range items {
		at := fmt.Sprintf("%s[%d]", rulesKey, i)
		m, ok := item.(map[string]any)
		if !ok {
			p.bad(at, item, "is not a mapping of identities, node_ids, clusters")
			continue
		}
		for k := range m {
			if k != "identities" && k != "node_ids" && k != "clusters" {
				p.badKey(at+"."+k, "unknown key (a rule has identities, node_ids and clusters)")
				delete(m, k)
			}
		}
		var r AuthzRule
		if err := decodeWith(m, &r, true); err != nil {
			p.badKey(at, strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		if len(r.Identities) == 0 {
			p.badKey(at+".identities", "is empty: a rule names the certificate identities it applies to")
		}
		for field, globs := range map[string][]string{"identities": r.Identities, "node_ids": r.NodeIDs, "clusters": r.Clusters} {
			for j, g := range globs {
				if err := certs.CheckGlob(g); err != nil {
					p.bad(fmt.Sprintf("%s.%s[%d]", at, field, j), g, err.Error())
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// XDSAuthorization is the xds package's form of the rules.
func (c Config) XDSAuthorization() []xds.AuthzRule {
	out := make([]xds.AuthzRule, len(c.XDS.Authorization.Rules))
	for i, r := range c.XDS.Authorization.Rules {
		out[i] = xds.AuthzRule{Identities: r.Identities, NodeIDs: r.NodeIDs, Clusters: r.Clusters}
	}
	return out
}

// validateSecurity checks the TLS, authorization and admin keys.
func (c Config) validateSecurity(p *problems) {
	for prefix, t := range map[string]TLSConfig{"xds.tls": c.XDS.TLS, "ratelimit.tls": c.RateLimit.TLS, "admin.tls": c.Admin.TLS} {
		checkTLS(p, prefix, t)
	}
	if len(c.XDS.Authorization.Rules) > 0 && c.XDS.TLS.ClientCAFile == "" {
		p.badKey(rulesKey, "needs xds.tls.client_ca_file: identities come from verified client certificates")
	}
	ids := c.RateLimit.Authorization.Identities
	if len(ids) > 0 && c.RateLimit.TLS.ClientCAFile == "" {
		p.bad("ratelimit.authorization.identities", ids, "needs ratelimit.tls.client_ca_file: identities come from verified client certificates")
	}
	for i, g := range ids {
		if err := certs.CheckGlob(g); err != nil {
			p.bad("ratelimit.authorization.identities", ids, fmt.Sprintf("entry %d %s", i, err))
		}
	}
	checkFile(p, "discovery.consul.token_file", c.Discovery.Consul.TokenFile)
	ct := c.Discovery.Consul.TLS
	for key, f := range map[string]string{"discovery.consul.tls.ca_file": ct.CAFile,
		"discovery.consul.tls.cert_file": ct.CertFile, "discovery.consul.tls.key_file": ct.KeyFile} {
		checkFile(p, key, f)
	}
	if (ct.CertFile == "") != (ct.KeyFile == "") {
		p.badKey("discovery.consul.tls.cert_file", "cert_file and key_file go together")
	}
	if !c.Admin.AllowInsecure && !loopback(c.Admin.Address) && c.Admin.TokenFile == "" && c.Admin.TLS.ClientCAFile == "" {
		p.bad("admin.address", c.Admin.Address, "is not a loopback address, and the admin listener asks for no bearer token (admin.token_file) "+
			"nor client certificate (admin.tls.client_ca_file): anyone who reaches it could drain endpoints and read the debug pages; "+
			"set admin.token_file (with admin.tls.* so the token does not travel in clear), or admin.allow_insecure: true if you really mean it")
	}
	checkTokenFile(p, "admin.token_file", c.Admin.TokenFile)
	checkAllowedHosts(p, c.Admin.AllowedHosts)
}

// checkAllowedHosts checks admin.allowed_hosts: host names or IPs without
// a port, "*.<domain>", or "*".
func checkAllowedHosts(p *problems, hosts []string) {
	for i, h := range hosts {
		name := strings.TrimPrefix(h, "*.")
		if h == "*" {
			continue
		}
		if _, err := netip.ParseAddr(h); err == nil {
			continue
		}
		if name == "" || strings.ContainsAny(name, "*:/ \t@[]") {
			p.bad("admin.allowed_hosts", hosts, fmt.Sprintf("entry %d %q is not a host name, an IP address, \"*.<domain>\" or \"*\" (no port, no scheme)", i, h))
		}
	}
}

// checkTLS checks the tls: section at prefix.
func checkTLS(p *problems, prefix string, t TLSConfig) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		p.badKey(prefix+".cert_file", "cert_file and key_file go together")
	}
	if t.ClientCAFile != "" && t.CertFile == "" {
		p.bad(prefix+".client_ca_file", t.ClientCAFile, "needs "+prefix+".cert_file and key_file (mTLS is TLS first)")
	}
	if t.ExpiryWarning < 0 {
		p.bad(prefix+".expiry_warning", t.ExpiryWarning, "is negative")
	}
	checkFile(p, prefix+".cert_file", t.CertFile)
	checkFile(p, prefix+".key_file", t.KeyFile)
	checkFile(p, prefix+".client_ca_file", t.ClientCAFile)
}

// checkFile reports a named file that cannot be read.
func checkFile(p *problems, key, path string) {
	if path == "" {
		return
	}
	if f, err := os.Open(path); err != nil {
		p.bad(key, path, "cannot be read: "+strings.TrimPrefix(err.Error(), "open "+path+": "))
	} else {
		f.Close()
	}
}

// checkTokenFile reports a token file that cannot be read or holds no
// token (the server would refuse to start on it).
func checkTokenFile(p *problems, key, path string) {
	if path == "" {
		return
	}
	data, err := os.ReadFile(path)
	switch {
	case err != nil:
		p.bad(key, path, "cannot be read: "+strings.TrimPrefix(err.Error(), "open "+path+": "))
	case strings.TrimSpace(string(data)) == "":
		p.bad(key, path, "holds no token (the file is empty)")
	}
}

// loopback reports whether the host of addr is a loopback address or
// localhost (an empty host listens on every interface).
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true // reported by checkAddr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
