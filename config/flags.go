package config

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// rawValue is a flag's value as given: it is parsed (and its errors
// reported) with the file's and the environment's, in Load.
type rawValue struct {
	kind Kind
	s    string
}

func (v *rawValue) String() string     { return v.s }
func (v *rawValue) Set(s string) error { v.s = s; return nil }

// Type is the value name shown in usage ("" for on/off flags).
func (v *rawValue) Type() string {
	if v.kind == Bool {
		return "bool"
	}
	return v.kind.String()
}

// AddFlags declares one flag per key of the table on fs (--xds.address),
// and returns the function that collects the values of the flags given.
func AddFlags(fs *pflag.FlagSet) func() map[string]string {
	for _, key := range FlagKeys() {
		f := fs.VarPF(&rawValue{kind: key.Kind}, key.Name, "", key.Help)
		if key.Kind == Bool {
			f.NoOptDefVal = "true" // --ratelimit.headers alone means true
		}
	}
	return func() map[string]string {
		set := map[string]string{}
		fs.Visit(func(f *pflag.Flag) {
			if v, ok := f.Value.(*rawValue); ok {
				set[f.Name] = v.s
			}
		})
		return set
	}
}

// PrintFlags writes the usage of every key's flag: the flag, its value
// name and default, then its help wrapped under it.
func PrintFlags(w io.Writer) {
	for _, key := range FlagKeys() {
		line := "  --" + key.Name
		if key.Kind != Bool {
			line += " " + key.Kind.String()
		}
		if d := key.DefaultText(); d != "" && d != "[]" {
			line += " (default " + d + ")"
		}
		fmt.Fprintln(w, line)
		for _, l := range wrap(key.Help, 72) {
			fmt.Fprintln(w, "        "+l)
		}
	}
}

// wrap breaks text into lines of at most width bytes, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// FlagNames are the names of every key's flag, for did-you-mean hints.
func FlagNames() []string { return flagNames() }
