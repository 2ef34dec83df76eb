package childproc

import (
	"bytes"
	"os"
	"strconv"
)

// sessionMembers lists the running processes of session sid, from /proc
// (not its zombies). The session's id stays the child's while any of its
// processes exists, so the list holds only what the child started.
func sessionMembers(sid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == sid {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp session …; comm may hold spaces and
		// parentheses, so read after its last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) > 3 && string(f[0]) != "Z" { // a zombie has ended: only its parent's wait is left
			if s, err := strconv.Atoi(string(f[3])); err == nil && s == sid {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
