package config

import (
	"slices"
	"strings"
)

// toolEnv are XDS_SERVER_* variables that are not configuration: the
// build scripts and tests read them, the server does not.
var toolEnv = []string{"XDS_SERVER_CACHE", "XDS_SERVER_BIN", "XDS_SERVER_BACKEND_BIN",
	"XDS_SERVER_REQUIRE_INTEGRATION", "XDS_SERVER_SCREENSHOTS"}

// unknownEnv warns of every XDS_SERVER_* variable in environ ("NAME=value"
// entries, as os.Environ gives them) that names no configuration key: a
// misspelt variable would otherwise be ignored without a word. Values are
// never shown (a variable may hold a secret).
func unknownEnv(p *problems, environ []string) {
	var known []string
	for _, k := range FlagKeys() {
		known = append(known, k.Env())
	}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || slices.Contains(known, name) || slices.Contains(toolEnv, name) {
			continue
		}
		p.errs = append(p.errs, FieldError{Key: name, Reason: "not a configuration variable: ignored" + suggest(name, known), Warning: true})
	}
}
