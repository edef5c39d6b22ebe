package config

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"gopkg.in/yaml.v3"
)

// Sources are where a configuration comes from, in increasing
// precedence: the defaults of Keys, the file, the environment, the flags.
type Sources struct {
	File string                      // YAML file; "" = none
	Env  func(string) (string, bool) // os.LookupEnv; nil = no environment
	// Environ is the whole environment (os.Environ), only to warn of
	// XDS_SERVER_* variables that name no key; nil = no such check.
	Environ []string
	Flags   map[string]string // values of the flags given, by key name
}

// Load builds the configuration from src and validates it. It returns
// every problem at once, sorted by key path; the configuration holds the
// default in place of each bad value. Load reads the files the
// configuration names (the static endpoints file, rate-limit configs) and
// nothing else: no network, no goroutines.
func Load(src Sources) (Config, Errors) {
	p := &problems{}
	tree := map[string]any{}
	var doc map[string]any
	if src.File != "" {
		var err error
		if doc, err = readFile(src.File); err != nil {
			p.bad("config", src.File, err.Error())
			return defaults(), p.errs.Sorted()
		}
	}
	fileVals := map[string]any{}
	services := map[string]map[string]any{}
	walkFile(p, "", doc, fileVals, services)
	for _, key := range FlagKeys() {
		raw, ok := any(nil), false
		if v, set := src.Flags[key.Name]; set {
			raw, ok = v, true
		} else if v, set := lookupEnv(src.Env, key.Env()); set {
			raw, ok = v, true
		} else if v, set := fileVals[key.Name]; set {
			raw, ok = v, true
		}
		val := key.Default
		if ok {
			typed, reason := parse(key.Kind, raw)
			if reason != "" {
				p.bad(key.Name, shown(key, raw), reason)
			} else {
				val = typed
			}
		}
		setPath(tree, key.Name, val)
	}
	cfg, err := decode(tree)
	if err != nil {
		p.badKey("config", err.Error())
	}
	shapes := slices.Clone(p.errs)
	cfg.Listeners = decodeListeners(p, doc["listeners"])
	cfg.XDS.Authorization.Rules = decodeRules(p, fileVals[rulesKey])
	cfg.Services = resolveServices(p, services)
	cfg.validate(p)
	unknownEnv(p, src.Environ)
	return cfg, dropShadowed(p.errs, shapes).Sorted()
}

// defaults is the configuration of the defaults alone.
func defaults() Config {
	cfg, _ := Load(Sources{})
	return cfg
}

// shown is a value as it may be printed: secrets never are.
func shown(key Key, v any) any {
	if key.Secret {
		return "(redacted)"
	}
	return v
}

func lookupEnv(env func(string) (string, bool), name string) (string, bool) {
	if env == nil {
		return "", false
	}
	return env(name)
}

// readFile parses a YAML file into a mapping with lower-cased keys.
func readFile(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	switch d := lowerKeys(doc).(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return d, nil
	default:
		return nil, fmt.Errorf("is not a YAML mapping of keys")
	}
}

// lowerKeys lower-cases the keys of every mapping in v; keys are matched
// case-insensitively (service names too).
func lowerKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[strings.ToLower(k)] = lowerKeys(e)
		}
		return out
	case []any:
		for i, e := range v {
			v[i] = lowerKeys(e)
		}
		return v
	}
	return v
}

// walkFile checks the keys of the file's mapping m at prefix: known keys
// go to vals (flag keys, raw) or services (typed, per service), sections
// are walked (an empty or null section is fine), the rest are unknown.
func walkFile(p *problems, prefix string, m map[string]any, vals map[string]any, services map[string]map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, path := m[k], prefix+k
		switch {
		case path == "services":
			walkServices(p, v, services)
		case path == rulesKey:
			vals[path] = v
		case path == "listeners":
			if v != nil {
				p.errs = append(p.errs, checkListenerKeys(v)...)
			}
		case isFlagKey(path):
			vals[path] = v
		case isSection("", path):
			if sub, ok := v.(map[string]any); ok {
				walkFile(p, path+".", sub, vals, services)
			} else if v != nil {
				p.bad(path, v, "is a value, want a section of "+strings.Join(childNames("", path), ", "))
			}
		default:
			p.badKey(path, "unknown key"+suggest(path, append(siblings(prefix), flagNames()...)))
		}
	}
}

func isFlagKey(name string) bool {
	key, ok := Lookup(name)
	return ok && !key.FileOnly()
}

func flagNames() []string {
	var out []string
	for _, key := range FlagKeys() {
		out = append(out, key.Name)
	}
	return out
}

// childNames are the names of the keys and sections right under section
// path of prefix.
func childNames(prefix, path string) []string {
	var out []string
	for _, key := range Keys {
		if rest, ok := strings.CutPrefix(key.Name, prefix+path+"."); ok {
			child, _, _ := strings.Cut(rest, ".")
			if !slices.Contains(out, child) {
				out = append(out, child)
			}
		}
	}
	return out
}

// walkServices checks the services: mapping and keeps each service's
// typed settings (nested as in the file) under its lower-cased name.
func walkServices(p *problems, v any, services map[string]map[string]any) {
	if v == nil {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.bad("services", v, `is not a mapping of service names ("*" for every service) to settings`)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		own := map[string]any{}
		services[name] = own
		switch sv := m[name].(type) {
		case nil:
		case map[string]any:
			walkService(p, name, "", sv, own)
		default:
			p.bad("services."+name, sv, "is a value, want a section of "+strings.Join(childNames("services.<name>", ""), ", "))
		}
	}
}

func walkService(p *problems, name, prefix string, m map[string]any, out map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, rel := m[k], prefix+k
		at := "services." + name + "." + rel
		if key, ok := serviceKey(rel); ok && (key.Kind == Subsets || key.Kind == HashPolicies) {
			p.errs = append(p.errs, checkStructured(at, key.Kind, v)...)
			out[k] = v
			continue
		}
		if key, ok := serviceKey(rel); ok {
			if typed, reason := parse(key.Kind, v); reason != "" {
				p.bad(at, v, reason)
			} else {
				out[k] = typed
			}
			continue
		}
		if !isSection(ServicePrefix, rel) {
			p.badKey(at, "unknown key"+suggest(rel, serviceNames()))
			continue
		}
		sub := map[string]any{} // present, even when empty: the feature is on
		out[k] = sub
		switch sv := v.(type) {
		case nil:
		case map[string]any:
			walkService(p, name, rel+".", sv, sub)
		default:
			p.bad(at, v, "is a value, want a section of "+strings.Join(childNames(ServicePrefix, rel), ", "))
		}
	}
}

func serviceNames() []string {
	var out []string
	for _, key := range Keys {
		if rel, ok := strings.CutPrefix(key.Name, ServicePrefix); ok {
			out = append(out, rel)
		}
	}
	return out
}

// setPath sets the dotted path of tree to v, making sections as needed.
func setPath(tree map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, part := range parts[:len(parts)-1] {
		sub, ok := tree[part].(map[string]any)
		if !ok {
			sub = map[string]any{}
			tree[part] = sub
		}
		tree = sub
	}
	tree[parts[len(parts)-1]] = v
}

// decode fills a value of type T from a tree of typed values.
func decodeInto[T any](tree any, out *T) error {
	return decodeWith(tree, out, false)
}

// decodeWith decodes tree into out; weak converts scalars between types
// (the listeners: section, whose durations are parsed later).
func decodeWith[T any](tree any, out *T, weak bool) error {
	d, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{Result: out, TagName: "mapstructure", WeaklyTypedInput: weak})
	if err != nil {
		return err
	}
	return d.Decode(tree)
}

func decode(tree map[string]any) (Config, error) {
	var cfg Config
	err := decodeInto(tree, &cfg)
	return cfg, err
}

// decodeListeners decodes the listeners: list, one entry at a time so a
// bad entry is reported under its index.
func decodeListeners(p *problems, v any) []ListenerConfig {
	items, ok := v.([]any)
	if !ok {
		return nil // a non-list was reported by checkListenerKeys
	}
	out := make([]ListenerConfig, 0, len(items))
	for i, item := range items {
		var lc ListenerConfig
		if err := decodeWith(item, &lc, true); err != nil {
			p.badKey(fmt.Sprintf("listeners[%d]", i), err.Error())
		}
		out = append(out, lc)
	}
	return out
}

// dropShadowed drops the problems of a listener whose keys or shape are
// wrong (in shapes, found before decoding): decoding it anyway gives
// misleading ones, like an empty service for a route that was not a list.
func dropShadowed(errs, shapes Errors) Errors {
	bad := map[string]bool{}
	for _, e := range shapes {
		var i int
		if _, err := fmt.Sscanf(e.Key, "listeners[%d]", &i); err == nil {
			bad[fmt.Sprintf("listeners[%d]", i)] = true
		}
	}
	var out Errors
	for i, e := range errs {
		at, _, _ := strings.Cut(e.Key, ".")
		if i >= len(shapes) && bad[at] {
			continue
		}
		out = append(out, e)
	}
	return out
}

// siblings are the full names of the keys and sections right under the
// section prefix (which ends with a dot; "" for the top level).
func siblings(prefix string) []string {
	var out []string
	for _, key := range Keys {
		rest, ok := strings.CutPrefix(key.Name, prefix)
		if !ok {
			continue
		}
		child, _, _ := strings.Cut(rest, ".")
		if name := prefix + child; !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}
