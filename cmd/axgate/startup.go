package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/axgate/axgate/gates"
)

// fileFlag checks that the file a flag names can be read. Its error names
// the flag, the file as given and, for a relative path, the absolute path
// tried and the working directory it was resolved from: a desktop client
// starts the gateway from a directory of its own, where a relative path
// the user tested in a shell does not resolve.
func fileFlag(flagName, path string) error {
	return fileProblem("--"+flagName+" "+path, path)
}

// fileArg is fileFlag for a file given as an argument (axgate lint FILE).
func fileArg(path string) error { return fileProblem(path, path) }

// missingFileError is a file named on the command line that cannot be
// read: a usage error (exit 2), unlike a file that is read but wrong.
type missingFileError struct{ msg string }

func (e *missingFileError) Error() string { return e.msg }

func fileProblem(label, path string) error {
	f, err := os.Open(path)
	if err == nil {
		st, serr := f.Stat()
		f.Close()
		if serr == nil && st.IsDir() {
			return &missingFileError{fmt.Sprintf("%s: is a directory, not a file%s", label, resolvedFrom(path))}
		}
		return nil
	}
	why := err.Error()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why = "no such file"
	case errors.Is(err, fs.ErrPermission):
		why = "permission denied"
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			why = pe.Err.Error()
		}
	}
	return &missingFileError{fmt.Sprintf("%s: %s%s", label, why, resolvedFrom(path))}
}

// resolvedFrom says where a relative path was looked for ("" for an
// absolute one).
func resolvedFrom(path string) string {
	if filepath.IsAbs(path) {
		return ""
	}
	wd, err := os.Getwd()
	if err != nil {
		return " (a relative path; the working directory cannot be told: " + err.Error() + ")"
	}
	return fmt.Sprintf(" (looked for %s: a relative path is read from the working directory, %s; give an absolute path)", filepath.Join(wd, path), wd)
}

// commandFlag checks that the program of --upstream-command can be found
// as the gateway will start it: a name without a slash in the PATH of this
// process (a desktop client's PATH is often shorter than a shell's), a
// path with one from the working directory.
func commandFlag(flagName, program string) error {
	if strings.ContainsRune(program, filepath.Separator) || strings.ContainsRune(program, '/') {
		st, err := os.Stat(program)
		switch {
		case err != nil:
			return fileFlag(flagName, program)
		case st.IsDir():
			return &missingFileError{fmt.Sprintf("--%s %s: is a directory, not a program%s", flagName, program, resolvedFrom(program))}
		case st.Mode()&0o111 == 0:
			return &missingFileError{fmt.Sprintf("--%s %s: is not executable%s", flagName, program, resolvedFrom(program))}
		}
		return nil
	}
	if _, err := exec.LookPath(program); err != nil {
		wd, _ := os.Getwd()
		return &missingFileError{fmt.Sprintf("--%s: program %q is not in the PATH of this process (PATH=%s; working directory %s): give its absolute path, or set PATH in the client's configuration",
			flagName, program, os.Getenv("PATH"), wd)}
	}
	return nil
}

// startError words an error that stopped a gateway's start for the command
// line: conditions bound to nothing are fixed with flags, not with the Go
// options the library's error names, and the library's "axgate: " prefix
// would follow the command's own.
func startError(err error) string {
	if unbound := unboundErrors(err); len(unbound) > 0 {
		var b strings.Builder
		example := ""
		for i, u := range unbound {
			names := make([]string, 0, len(u.Names))
			for n := range u.Names {
				names = append(names, n)
			}
			sort.Strings(names)
			if i > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "%d %ss are not bound to a check:", len(names), u.Kind)
			for j, n := range names {
				sep := ";"
				if j == len(names)-1 {
					sep = ""
				}
				fmt.Fprintf(&b, " %q (%s)%s", n, strings.Join(u.Names[n], ", "), sep)
			}
			if example == "" && len(names) > 0 {
				example = fmt.Sprintf("--%s '%s=EXPR'", u.Kind, names[0])
			}
		}
		fmt.Fprintf(&b, "\nto fix: bind each to a CEL expression over the call (args, principal):"+
			" --precondition 'NAME=EXPR' for a precondition, --postcondition 'NAME=EXPR' for a postcondition, one flag per condition (e.g. %s);"+
			" or start anyway with --allow-unbound-conditions, which lets the calls pass those conditions unchecked, recording a warning", example)
		return b.String()
	}
	return strings.TrimPrefix(err.Error(), "axgate: ")
}

// unboundErrors returns the *gates.UnboundError in err's tree, in order.
func unboundErrors(err error) []*gates.UnboundError {
	var out []*gates.UnboundError
	var walk func(error)
	walk = func(err error) {
		if u, ok := err.(*gates.UnboundError); ok {
			out = append(out, u)
			return
		}
		switch x := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			if e := x.Unwrap(); e != nil {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}
