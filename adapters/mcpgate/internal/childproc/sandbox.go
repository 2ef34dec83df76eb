package childproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Sandbox contains a child under bubblewrap (bwrap).
//
// The child gets a PID namespace of its own, so that stopping it ends every
// process it started; a filesystem of only the system's programs and
// libraries (SystemPaths), the command's own program and interpreter, and
// the paths listed here; no network unless Network. See
// docs/mcp-gateway.md, "Contained children".
type Sandbox struct {
	// Bwrap is the path of the bwrap program (FindBwrap).
	Bwrap string
	// ReadOnly and Writable are absolute paths the child sees, read-only
	// or writable, at the same place; each must exist.
	ReadOnly []string
	Writable []string
	// Network keeps the host's network; without it the child has only a
	// loopback of its own.
	Network bool
}

// SystemPaths are what every sandboxed child sees read-only, where they exist.
//
// They are the system's programs and libraries, and the few files of /etc that
// programs read to run (the dynamic linker's cache, users and groups for
// their names, the time zone, name resolution, TLS roots, Debian's
// alternatives). /bin, /sbin and /lib* that are symbolic links (a merged
// /usr) are the same links in the sandbox. Besides these the child has a
// /proc of its own PID namespace, a minimal /dev (null, zero, full, random,
// urandom, tty, a /dev/shm, pts) and an empty tmpfs /tmp.
var SystemPaths = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime",
	"/etc/hosts", "/etc/host.conf", "/etc/resolv.conf", "/etc/gai.conf",
	"/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/crypto-policies",
}

// probeTimeout bounds FindBwrap's trial sandbox.
const probeTimeout = 10 * time.Second

// FindBwrap finds bwrap in PATH and checks that it can start a sandbox here
// (user and PID namespaces, a /proc of its own; without network unless
// network), running true in one. The error says why not: bwrap missing,
// or what it answered.
func FindBwrap(network bool) (string, error) {
	if runtime.GOOS != "linux" {
		return "", fmt.Errorf("bubblewrap runs on Linux only, not %s", runtime.GOOS)
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return "", errors.New("bubblewrap (bwrap) is not in PATH")
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		return "", fmt.Errorf("no true program in PATH to try bwrap with: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	args := append(namespaceArgs(network), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", truePath)
	cmd := exec.CommandContext(ctx, bwrap, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 300 {
			msg = msg[:300]
		}
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("%s cannot start a sandbox here (user or PID namespaces refused?): %s", bwrap, msg)
	}
	return bwrap, nil
}

// namespaceArgs are bwrap's namespaces and privileges: every namespace
// (the user one where the system allows it), the network kept with
// network, no capability left (a gateway run as root would otherwise leave
// its child root's capabilities, mounts included), and the sandbox killed
// when bwrap's parent (the gateway) dies.
//
// The child stays in bwrap's session (no --new-session): the gateway runs
// bwrap in a session of its own (ownGroup), with no terminal, and lists
// that session to send the child SIGTERM (signalSandbox).
func namespaceArgs(network bool) []string {
	args := []string{"--unshare-all", "--cap-drop", "ALL", "--die-with-parent"}
	if network {
		args = append(args, "--share-net")
	}
	return args
}

// mount is one of bwrap's mount operations: op (--ro-bind, --bind,
// --symlink, --proc, --dev, --tmpfs) of src onto dst.
type mount struct{ op, src, dst string }

func (m mount) args() []string {
	if m.src == "" {
		return []string{m.op, m.dst}
	}
	return []string{m.op, m.src, m.dst}
}

// depth orders mounts: a folder is mounted before what is mounted inside
// it, which would otherwise be hidden.
func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// Check checks the listed paths: absolute, existing.
func (s *Sandbox) Check() error {
	for _, list := range [][]string{s.ReadOnly, s.Writable} {
		for _, p := range list {
			if !filepath.IsAbs(p) {
				return fmt.Errorf("the sandbox path %q is not absolute", p)
			}
			if _, err := os.Stat(p); err != nil {
				return fmt.Errorf("the sandbox path %q: %w", p, err)
			}
		}
	}
	return nil
}

// CheckCommand checks that c can be started in the sandbox: its program
// found, its working directory among the sandbox's paths.
func (s *Sandbox) CheckCommand(c Command) error {
	_, err := s.bwrapArgs(c)
	return err
}

// bwrapArgs is bwrap's argument list for c (its program resolved to an
// absolute path): the namespaces, the mounts, the working directory, then
// c's program and arguments.
func (s *Sandbox) bwrapArgs(c Command) ([]string, error) {
	prog, err := programPath(c)
	if err != nil {
		return nil, err
	}
	var mounts []mount
	visible := func(p string) bool {
		// Through the links made here first (/bin -> usr/bin).
		for _, m := range mounts {
			if m.op == "--symlink" && within(p, m.dst) {
				p = filepath.Join("/", m.src, strings.TrimPrefix(p, m.dst))
				break
			}
		}
		return slices.ContainsFunc(mounts, func(m mount) bool {
			return (m.op == "--ro-bind" || m.op == "--bind") && within(p, m.dst)
		})
	}
	for _, p := range SystemPaths {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0 && filepath.Dir(p) == "/":
			target, err := os.Readlink(p)
			if err == nil {
				mounts = append(mounts, mount{"--symlink", target, p})
			}
		default:
			mounts = append(mounts, mount{"--ro-bind", p, p})
		}
	}
	mounts = append(mounts, mount{"--proc", "", "/proc"}, mount{"--dev", "", "/dev"}, mount{"--tmpfs", "", "/tmp"})
	for _, p := range s.Writable {
		mounts = append(mounts, mount{"--bind", filepath.Clean(p), filepath.Clean(p)})
	}
	for _, p := range s.ReadOnly {
		if p = filepath.Clean(p); !slices.Contains(s.Writable, p) {
			mounts = append(mounts, mount{"--ro-bind", p, p})
		}
	}
	// The program and its interpreter, where the system's paths and the
	// listed ones do not show them.
	mounts = append(mounts, programMounts(prog, visible)...)
	path := childPath(c.Env)
	if path == "" {
		path = os.Getenv("PATH")
	}
	if interp := interpreter(prog, path); interp != "" {
		mounts = append(mounts, programMounts(interp, visible)...)
	}
	slices.SortStableFunc(mounts, func(a, b mount) int { return depth(a.dst) - depth(b.dst) })

	args := namespaceArgs(s.Network)
	for _, m := range mounts {
		args = append(args, m.args()...)
	}
	// The working directory: Dir, else the gateway's own where the child
	// sees it, else /.
	dir := c.Dir
	if dir == "" {
		if wd, err := os.Getwd(); err == nil && visible(wd) {
			dir = wd
		} else {
			dir = "/"
		}
	} else if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	} else if !visible(dir) {
		return nil, fmt.Errorf("the child's working directory %s is not among the sandbox's paths: list it", dir)
	}
	args = append(args, "--chdir", dir, "--")
	return append(append(args, prog), c.Args...), nil
}

// programPath is c's program as an absolute path: found in PATH (the
// gateway's, as exec.Command does) unless it holds a slash; relative to
// Dir.
func programPath(c Command) (string, error) {
	p := c.Path
	if !strings.Contains(p, "/") {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", err
		}
		p = found
	}
	if !filepath.IsAbs(p) {
		base := c.Dir
		if base == "" {
			wd, err := os.Getwd()
			if err != nil {
				return "", err
			}
			base = wd
		}
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p), nil
}

// programMounts makes program p visible, read-only, if it is not yet: its
// real file at its real path (and p a link to it); where it lies in a
// node_modules folder, that whole folder (the outermost), so its imports
// resolve.
func programMounts(p string, visible func(string) bool) []mount {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil // exec reports the missing program
	}
	var out []mount
	shown := func(p string) bool {
		return visible(p) || slices.ContainsFunc(out, func(m mount) bool { return m.op == "--ro-bind" && within(p, m.dst) })
	}
	if tree := nodeModules(real); tree != "" {
		if !visible(tree) {
			out = append(out, mount{"--ro-bind", tree, tree})
		}
	} else if !visible(real) {
		out = append(out, mount{"--ro-bind", real, real})
	}
	if p != real && !shown(p) {
		if tree := nodeModules(p); tree != "" {
			out = append(out, mount{"--ro-bind", tree, tree})
		} else {
			out = append(out, mount{"--symlink", real, p})
		}
	}
	return out
}

// nodeModules is the outermost node_modules folder p lies in, or "".
func nodeModules(p string) string {
	i := strings.Index(p, "/node_modules/")
	if i < 0 {
		return ""
	}
	return p[:i+len("/node_modules")]
}

// childPath is the PATH of the child's environment env.
func childPath(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			return v
		}
	}
	return ""
}

// interpreter is the program a script p names on its #! line: for
// "#!/usr/bin/env [-S] NAME", NAME found in path (the child's PATH); else
// the interpreter's own path. "" for a program that is no script.
func interpreter(p, path string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 512).ReadSlice('\n')
	if err != nil && !errors.Is(err, bufio.ErrBufferFull) && len(line) == 0 {
		return ""
	}
	rest, ok := bytes.CutPrefix(line, []byte("#!"))
	if !ok {
		return ""
	}
	fields := strings.Fields(string(rest))
	if len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) != "env" {
		return fields[0]
	}
	for _, f := range fields[1:] {
		if strings.HasPrefix(f, "-") || strings.Contains(f, "=") {
			continue // env's options (-S) and assignments
		}
		if strings.Contains(f, "/") {
			return f
		}
		for _, dir := range filepath.SplitList(path) {
			if dir == "" || !filepath.IsAbs(dir) {
				continue
			}
			if cand := filepath.Join(dir, f); isExecutable(cand) {
				return cand
			}
		}
		return ""
	}
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
