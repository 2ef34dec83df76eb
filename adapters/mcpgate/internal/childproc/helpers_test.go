package childproc

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// probeEnv makes the test binary a probe a sandbox test runs as its child:
// "connect" dials the address in probeArgEnv; "read" and "write" read and
// write the file it names. It prints "ok" or the error, and exits 0.
const (
	probeEnv    = "AXGATE_CHILDPROC_TEST_PROBE"
	probeArgEnv = "AXGATE_CHILDPROC_TEST_ARG"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(probeEnv); mode != "" {
		arg := os.Getenv(probeArgEnv)
		var err error
		switch mode {
		case "connect":
			var c net.Conn
			if c, err = net.DialTimeout("tcp", arg, 5*time.Second); err == nil {
				c.Close()
			}
		case "read":
			_, err = os.ReadFile(arg)
		case "write":
			err = os.WriteFile(arg, []byte("written"), 0o600)
		default:
			err = fmt.Errorf("unknown probe %q", mode)
		}
		if err != nil {
			fmt.Println(err)
		} else {
			fmt.Println("ok")
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
