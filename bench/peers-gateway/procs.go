package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a process the runner started: a hop, an upstream or a gateway.
type proc struct {
	name  string
	cmd   *exec.Cmd
	addr  string // host:port it serves on
	log   string // its output
	admin string // axgate's admin address with pprof (-profile), or ""
}

// freeAddr is a free loopback address (the port is closed again before the
// process that takes it starts: a race only with other programs).
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatalf("%v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start runs argv with its output in dir/name.log, serving on addr, and
// waits until addr accepts connections.
func (r *runner) start(name, addr string, argv ...string) *proc {
	logPath := filepath.Join(r.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		fatalf("%v", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "OTEL_SDK_DISABLED=true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, addr: addr, log: logPath}
	r.procs = append(r.procs, p)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p
		}
		if cmd.ProcessState != nil || time.Now().After(deadline) {
			out, _ := os.ReadFile(logPath)
			fatalf("%s did not start on %s: %s", name, addr, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startSelf runs this binary's subcommand sub on a free address.
func (r *runner) startSelf(name, sub string, args ...string) *proc {
	addr := freeAddr()
	return r.start(name, addr, append([]string{r.self, sub, "-addr", addr}, args...)...)
}

func (r *runner) stopAll() {
	for _, p := range r.procs {
		if p.cmd.Process != nil {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range r.procs {
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
		}
	}
}

// cpuTicks is the user + system CPU time of the process so far, in clock
// ticks (1/100 s on Linux), from /proc/PID/stat (all its threads).
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	// The command name (field 2) may hold spaces: fields count from its ')'.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

const ticksPerSecond = 100 // sysconf(_SC_CLK_TCK) on Linux

// resetPeakRSS sets the process's peak RSS (VmHWM) to its current RSS
// (writing 5 to /proc/PID/clear_refs), so that the next reading is the
// peak of what follows.
func resetPeakRSS(pid int) {
	os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0)
}

// peakRSS is the process's VmHWM in KiB.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "peers-gateway: "+format+"\n", args...)
	if current != nil {
		current.stopAll()
		if current.dir != "" {
			fmt.Fprintf(os.Stderr, "peers-gateway: the processes' logs are in %s\n", current.dir)
		}
	}
	os.Exit(1)
}

// withProfile returns argv with an admin server serving pprof when the run
// takes profiles (-profile), and that server's address ("" otherwise).
func (r *runner) withProfile(argv ...string) ([]string, string) {
	if r.profile == "" {
		return argv, ""
	}
	admin := freeAddr()
	return append(argv, "--admin", admin, "--pprof"), admin
}

// profileDuring starts a CPU profile of e as long as one measurement, on
// the first round only, and returns the function that waits for it and
// writes it to the -profile directory as name-engine.pprof.
func (r *runner) profileDuring(round int, e engine, name string) func() {
	if round != 0 || e.admin == "" {
		return func() {}
	}
	secs := max(1, int(r.duration.Round(time.Second)/time.Second))
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", e.admin, secs))
		if err != nil {
			fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			fmt.Fprintf(os.Stderr, "profile %s: HTTP %d %v\n", name, resp.StatusCode, err)
			return
		}
		file := strings.NewReplacer(" ", "_", "/", "_").Replace(name + "-" + e.name + ".pprof")
		if err := os.WriteFile(filepath.Join(r.profile, file), b, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
		}
	}()
	return func() { <-done }
}
