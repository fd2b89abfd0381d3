package main

// The runtime's process group (proc_other.go: Setpgid, pgid = pid) and the daemons that leave
// it (setsid, setpgid): each runtime carries a per-run token in its environment, and after the
// run every process still carrying it is killed, wherever its group.

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// RunTokenEnv names the per-run token every runtime (and what it starts) inherits.
const RunTokenEnv = "GO_HOST_RUN"

// signalGroup sends sig to the whole group; an error only when the group is gone.
func signalGroup(pgid int, sig syscall.Signal) error {
	return syscall.Kill(-pgid, sig)
}

// groupAlive tells whether any process of the group is left.
func groupAlive(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// waitGroupGone polls the group every 10 ms for up to bound (proc.go waitProcessGroupGone).
func waitGroupGone(pgid int, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// killGroup SIGKILLs what is left of the group and waits (bounded) until it is gone.
func killGroup(pgid int, bound time.Duration) bool {
	if !groupAlive(pgid) {
		return true
	}
	_ = signalGroup(pgid, syscall.SIGKILL)
	return waitGroupGone(pgid, bound)
}

// killByToken SIGKILLs every process whose environment carries RunTokenEnv=token (Linux /proc;
// elsewhere it finds nothing). Returns how many it signalled.
func killByToken(token string) int {
	needle := []byte(RunTokenEnv + "=" + token + "\x00")
	paths, _ := filepath.Glob("/proc/[0-9]*/environ")
	killed := 0
	for _, path := range paths {
		environ, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(append(environ, 0), needle) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err == nil && pid != os.Getpid() && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}
