package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FindPID returns the pid of the one process whose command line holds every
// one of args as a whole argument (e.g. a flag and its unique address).
func FindPID(args ...string) (int, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	var found []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue // gone, or a kernel thread
		}
		have := map[string]bool{}
		for _, a := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
			have[string(a)] = true
		}
		all := true
		for _, a := range args {
			all = all && have[a]
		}
		if all {
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			if err == nil {
				found = append(found, pid)
			}
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("bench: %d processes run with %q, want 1", len(found), args)
	}
	return found[0], nil
}

// Memory is the resident memory of a process, in bytes.
type Memory struct {
	RSS  float64 // VmRSS: resident now
	Peak float64 // VmHWM: the most it has been resident since it started
}

// ReadMemory reads /proc/<pid>/status.
func ReadMemory(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, fmt.Errorf("bench: %w", err)
	}
	var m Memory
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			m.RSS = kb * 1024
		case "VmHWM:":
			m.Peak = kb * 1024
		}
	}
	if m.RSS == 0 || m.Peak == 0 {
		return Memory{}, fmt.Errorf("bench: no VmRSS/VmHWM for pid %d", pid)
	}
	return m, nil
}
