// Package devices turns the plugins' -ids / -count flags into one list of device IDs, so the device
// plugin and the DRA plugin advertise the same GPUs for the same flags and reject the same bad input.
package devices

import (
	"fmt"
	"strings"
)

// IDs returns the comma-separated ids, or count IDs made with format (one %d), exactly one of the two
// being given. Empty entries and duplicates are errors: the kubelet would otherwise count a GPU twice.
func IDs(ids string, count int, format string) ([]string, error) {
	switch {
	case ids != "" && count != 0:
		return nil, fmt.Errorf("give -ids or -count, not both")
	case ids == "" && count <= 0:
		return nil, fmt.Errorf("give -ids ID,... or -count N (N > 0)")
	}
	var out []string
	if ids == "" {
		for i := range count {
			out = append(out, fmt.Sprintf(format, i))
		}
		return out, nil
	}
	seen := map[string]bool{}
	for _, id := range strings.Split(ids, ",") {
		id = strings.TrimSpace(id)
		if id == "" {
			return nil, fmt.Errorf("-ids %q has an empty entry", ids)
		}
		if seen[id] {
			return nil, fmt.Errorf("-ids %q names %s twice", ids, id)
		}
		seen[id] = true
		out = append(out, id)
	}
	return out, nil
}
