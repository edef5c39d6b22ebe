package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times (100 on every
// Linux this runs on).
const clockTicks = 100

// ProcCPU is the CPU time (user + system) process pid has used so far, in
// seconds, from /proc/<pid>/stat.
func ProcCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	return parseProcStatCPU(string(b))
}

// parseProcStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line; the command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseProcStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: /proc stat %q: %d fields after the name, want 13 or more", stat, len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bench: /proc stat %q: utime %q stime %q", stat, f[11], f[12])
	}
	return float64(utime+stime) / clockTicks, nil
}

// ReadPSS is the proportional set size of process pid in bytes (Pss of
// /proc/<pid>/smaps_rollup): its resident pages, each shared page divided
// among the processes sharing it.
func ReadPSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	return parsePSS(string(b))
}

func parsePSS(rollup string) (float64, error) {
	for line := range strings.Lines(rollup) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "Pss:" && f[2] == "kB" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return 0, fmt.Errorf("bench: smaps_rollup %q: %w", line, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("bench: no Pss line in smaps_rollup")
}
