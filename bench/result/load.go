package result

import (
	"os"
	"strings"
)

// LoadAverage is /proc/loadavg's first three fields, the machine's 1, 5 and 15 minute load
// averages while a scenario measures; "unknown" where there is none.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
