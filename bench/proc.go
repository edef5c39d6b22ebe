package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

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
