package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/discovery"
)

// catalogTimeout bounds validate's look at Consul's catalog.
const catalogTimeout = 2 * time.Second

// validate is `xds-server validate`: every problem of the configuration
// at once, exit 1 when one is an error (warnings alone exit 0). With
// discovery.source consul, the services of listener routes that the file
// does not name are looked up in Consul's catalog (see checkCatalog), and
// the config entries the server would reject are listed (see
// checkConfigEntries).
func validate(cfg config.Config, errs config.Errors, output string, stdout, stderr io.Writer) int {
	if cfg.Discovery.Source == "consul" && !slices.ContainsFunc(errs, func(e config.FieldError) bool {
		return strings.HasPrefix(e.Key, "discovery.consul.")
	}) {
		errs = append(errs, checkCatalog(cfg, cfg.UnknownRouteServices())...)
		errs = append(errs, checkConfigEntries(cfg)...).Sorted()
	}
	errs = append(errs, checkCertificates(cfg, errs, time.Now())...).Sorted()
	if output == "json" {
		fmt.Fprintf(stdout, "%s\n", errs.JSON())
	} else {
		printProblems(stderr, errs)
		if !errs.Invalid() {
			fmt.Fprintln(stdout, "configuration is valid")
		}
	}
	if errs.Invalid() {
		return 1
	}
	return 0
}

// checkCatalog looks the routes' services up in Consul's catalog. A
// service Consul does not know is a warning, not an error: it may be
// registered after the config is rolled out (its routes answer 503 until
// then, and the server counts them in xds_route_unknown_service). When
// Consul does not answer, each route's service is an unchecked warning.
func checkCatalog(cfg config.Config, routes []config.RouteService) config.Errors {
	if len(routes) == 0 {
		return nil
	}
	cc := cfg.Discovery.Consul
	catalog, err := consulServices(cfg.ConsulSource())
	var out config.Errors
	for _, r := range routes {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			out = append(out, config.FieldError{Key: r.Key, Value: r.Service, Warning: true,
				Reason: fmt.Sprintf("not checked: Consul at %s did not answer within %v", cc.Address, catalogTimeout)})
		case err != nil:
			out = append(out, config.FieldError{Key: r.Key, Value: r.Service, Warning: true,
				Reason: fmt.Sprintf("not checked: Consul at %s could not be asked: %v", cc.Address, err)})
		case !catalog[strings.ToLower(r.Service)]:
			out = append(out, config.FieldError{Key: r.Key, Value: r.Service, Warning: true,
				Reason: fmt.Sprintf("is not in Consul's catalog at %s (yet): the route answers 503 until the service is registered", cc.Address)})
		}
	}
	return out
}

// consulServices lists the catalog's service names, lower-cased.
func consulServices(cc discovery.ConsulConfig) (map[string]bool, error) {
	client, err := cc.ConsulClient()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	names, _, err := client.Catalog().Services((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(names))
	for n := range names {
		out[strings.ToLower(n)] = true
	}
	return out, nil
}
