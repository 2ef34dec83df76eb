//go:build unix

package gateway_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/adapters/mcpgate/gateway"
	"github.com/axgate/axgate/manifest"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// processHelper is the process of helperEnv=mode, which a child of a
// command upstream starts:
//   - "own-group": in a process group of its own (Go's exec with
//     SysProcAttr.Setpgid, Python's process_group=0, a shell's job
//     control), staying in the child's session;
//   - "hop": likewise, and then its process hops (hopHelper);
//   - "sleep": it just runs.
//
// Each appends its pid to the file pidsEnv names and runs for a minute.
func processHelper(mode string) int {
	switch mode {
	case "own-group":
		syscall.Setpgid(0, 0)
	case "hop":
		return hopHelper()
	}
	appendPID()
	// A real process that runs until killed (what the test checks); the
	// minute bounds one a failing test leaves behind.
	time.Sleep(60 * time.Second)
	return 0
}

// pidFile is a file for the pids of the processes a test's upstream
// starts (childPIDs reads it); the test kills them at its end.
func pidFile(t *testing.T) string {
	t.Helper()
	pids := filepath.Join(t.TempDir(), "pids")
	t.Cleanup(func() {
		for _, pid := range childPIDs(pids) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pids
}

// newGatewayErr is newGateway for a goroutine: it returns New's error
// instead of failing the test. The caller closes the gateway (its in-memory
// enforcer is left to the garbage collector: t.Cleanup may not be called
// from a goroutine that outlives the test).
func newGatewayErr(t *testing.T, up gateway.Upstream, opts ...gateway.Option) (*gateway.Gateway, error) {
	m, err := manifest.Parse(manifestFor(t, ""))
	if err != nil {
		return nil, err
	}
	enf, err := axgate.New(m)
	if err != nil {
		return nil, err
	}
	base := []gateway.Option{
		gateway.WithBearer(authenticate, &oauthex.ProtectedResourceMetadata{
			Resource: "https://gw.example.com/mcp", AuthorizationServers: []string{"https://id.example.com"},
		}),
		gateway.WithRestartBackoff(300*time.Millisecond, time.Second),
		gateway.WithConnectTimeout(20 * time.Second),
		// The tests of the inline question trust the client, as a desktop
		// app would be (trust_test.go pins the default).
		gateway.WithTrustClientElicitation(),
	}
	g, err := gateway.New(enf, up, append(base, opts...)...)
	if err != nil {
		enf.Close()
		return nil, err
	}
	return g, nil
}

// running reports whether process pid runs: it exists and is not a zombie
// (a process killed after its parent ended waits, a zombie, for init to
// reap it; on some machines init does not reap at once).
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return alive(pid) // no /proc: ask the kernel
	}
	// The state follows the command's name, which is in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
