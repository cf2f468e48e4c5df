package agent

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
)

// bootIdentity is the kernel's random id of this boot.
func bootIdentity() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// procStart is field 22 of /proc/<pid>/stat: when the process started, in clock ticks since
// boot. The fields after the command name, which is in parentheses and may hold anything, are
// counted from its last ')'.
func procStart(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", errors.New("unreadable /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", errors.New("short /proc stat")
	}
	return f[19], nil // field 22 overall: state is field 3, the first after ')'
}
