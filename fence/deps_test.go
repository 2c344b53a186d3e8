package fence_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoRedisDependency: programs that fence SQL rows or HTTP services
// import fence without building a Redis client; the Redis helpers live in
// fence/redisfence.
func TestNoRedisDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "redis") {
			t.Errorf("fence depends on %s", dep)
		}
	}
}
