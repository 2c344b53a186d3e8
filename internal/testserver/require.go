package testserver

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// RequireEnv is the environment variable that turns a missing server binary
// from a skipped test into a failed one when set to "1", as CI should do so
// that a broken install cannot pass silently.
const RequireEnv = "DISTLOCK_REQUIRE_SERVERS"

// Require returns the path of binary (a name looked up in PATH, or a path).
// If it cannot be found, the test is skipped with a hint on how to install
// it, or failed when RequireEnv is "1".
func Require(tb testing.TB, binary string) string {
	tb.Helper()
	path, err := exec.LookPath(binary)
	if err != nil {
		unavailable(tb, "%s not found (%v); install it with `sudo scripts/install-deps.sh` or `apt-get install redis-server`", binary, err)
	}
	return path
}

// unavailable reports that a test cannot run on this machine: a skip for
// developers without the servers, a failure where they are required.
func unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatalf("%s (%s=1)", msg, RequireEnv)
	}
	tb.Skipf("%s (set %s=1 to fail instead of skip)", msg, RequireEnv)
}
