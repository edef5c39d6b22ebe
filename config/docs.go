package config

import (
	"fmt"
	"strconv"
	"strings"
)

// MarkdownTable is the README's table of every key: name, default and
// meaning, with a link to the section that explains it.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| key | type | default | meaning |\n|---|---|---|---|\n")
	for _, key := range Keys {
		def := "`" + key.DefaultText() + "`"
		switch {
		case key.Default == nil:
			def = "unset"
		case key.DefaultText() == "":
			def = "`\"\"`"
		}
		help := strings.ReplaceAll(key.Help, "|", `\|`)
		if key.Doc != "" {
			help += fmt.Sprintf(" ([more](#%s))", key.Doc)
		}
		name := key.Name
		if !key.FileOnly() {
			name += "` `" + "--" + key.Name
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", key.Name, key.Kind, def, help)
	}
	return b.String()
}

// ExampleYAML is examples/xds-server.yaml: every key at its default (the
// per-service ones under "*"), each after its help as a comment; keys
// without a default are commented out.
func ExampleYAML() string {
	var b strings.Builder
	b.WriteString(`# A complete xds-server configuration with every key at its default.
# Generated from the key table (config/keys.go) by: go test ./config -run TestDocs -update
# Every key but services.* and listeners is also a flag (--xds.address) and an env var
# (XDS_SERVER_XDS_ADDRESS); precedence: flag > env > file > default.
# Durations need a unit (50ms, 5s, 1m). Keys without a default are commented out.
`)
	var open []string // sections written so far, outermost first
	for _, key := range Keys {
		path := strings.Split(strings.Replace(key.Name, "services.<name>.", `services."*".`, 1), ".")
		path = joinQuoted(path)
		sections, leaf := path[:len(path)-1], path[len(path)-1]
		common := 0
		for common < len(open) && common < len(sections) && open[common] == sections[common] {
			common++
		}
		comment := ""
		if key.Default == nil {
			comment = "# "
		}
		for i := common; i < len(sections); i++ {
			c := ""
			if key.Default == nil && i > 0 && !hasDefaults(strings.Join(path[:i+1], ".")) {
				c = "# "
			}
			fmt.Fprintf(&b, "%s%s%s:\n", strings.Repeat("  ", i), c, sections[i])
		}
		open = sections
		indent := strings.Repeat("  ", len(sections))
		for _, line := range wrap(key.Help, 88-len(indent)) {
			fmt.Fprintf(&b, "%s# %s\n", indent, line)
		}
		fmt.Fprintf(&b, "%s%s%s:%s\n", indent, comment, leaf, yamlValue(key))
	}
	return b.String()
}

// joinQuoted keeps a quoted path element ("*") whole.
func joinQuoted(path []string) []string {
	var out []string
	for i := 0; i < len(path); i++ {
		if path[i] == `"*"` {
			out = append(out, `"*"`)
			continue
		}
		out = append(out, path[i])
	}
	return out
}

// hasDefaults reports whether the section at the example's path has a
// key with a default (so it is written uncommented).
func hasDefaults(section string) bool {
	section = strings.Replace(section, `services."*"`, "services.<name>", 1)
	for _, key := range Keys {
		if strings.HasPrefix(key.Name, section+".") && key.Default != nil {
			return true
		}
	}
	return false
}

func yamlValue(key Key) string {
	switch d := key.Default.(type) {
	case nil:
		if key.Kind == Listeners {
			return " []"
		}
		return ""
	case string:
		return " " + strconv.Quote(d)
	default:
		return " " + key.DefaultText()
	}
}
