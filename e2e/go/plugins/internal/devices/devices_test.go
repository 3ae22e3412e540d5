package devices

import (
	"reflect"
	"testing"
)

func TestIDs(t *testing.T) {
	got, err := IDs("", 3, "fake-gpu-%d")
	if err != nil || !reflect.DeepEqual(got, []string{"fake-gpu-0", "fake-gpu-1", "fake-gpu-2"}) {
		t.Fatalf("count: %v %v", got, err)
	}
	got, err = IDs("GPU-a, GPU-b", 0, "x%d")
	if err != nil || !reflect.DeepEqual(got, []string{"GPU-a", "GPU-b"}) {
		t.Fatalf("ids: %v %v", got, err)
	}
	for _, bad := range []struct {
		ids   string
		count int
	}{{"", 0}, {"a", 2}, {"a,,b", 0}, {"a,b,a", 0}, {"", -1}} {
		if got, err := IDs(bad.ids, bad.count, "x%d"); err == nil {
			t.Errorf("IDs(%q, %d) = %v, want an error", bad.ids, bad.count, got)
		}
	}
}
