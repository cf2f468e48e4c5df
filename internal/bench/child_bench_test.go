package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cryochamber/cryochamber/sessionlog"
)

// childEnv makes the test binary a small child process instead of running tests, so that the
// peak RSS of one operation is measured alone (ru_maxrss of that child): "latest:PATH" finds the
// latest block with sessionlog and reads it, "naive:PATH" is the baseline that reads the whole
// file and looks for the last SESSION line.
const childEnv = "CRYO_BENCH_CHILD"

func runChild(spec string) int {
	mode, path, _ := strings.Cut(spec, ":")
	var n int
	var err error
	switch mode {
	case "latest":
		n, err = latestBlock(path)
	case "naive":
		n, err = naiveLatest(path)
	default:
		err = fmt.Errorf("unknown child mode %q", mode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench child: %v\n", err)
		return 1
	}
	fmt.Println(n)
	return 0
}

// latestBlock is what status and validate do with the log: find the latest block from the end
// (no hint), then read every line of it.
func latestBlock(path string) (int, error) {
	info, err := sessionlog.Latest(path, -1)
	if err != nil {
		return 0, err
	}
	lines := 0
	err = sessionlog.Each(path, info, func(sessionlog.Line) error { lines++; return nil })
	if err != nil {
		return 0, err
	}
	if lines != info.Lines {
		return 0, fmt.Errorf("read %d lines of session %d, Latest said %d", lines, info.Session, info.Lines)
	}
	return info.Session, nil
}

// naiveLatest is the baseline a first implementation would write: read the whole file, find the
// last SESSION line.
func naiveLatest(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndex(data, []byte("\n--- CRYO SESSION "))
	if i < 0 {
		return 0, errors.New("no SESSION line")
	}
	var n int
	if _, err := fmt.Sscanf(string(data[i+len("\n--- CRYO SESSION "):min(len(data), i+64)]), "%d", &n); err != nil {
		return 0, err
	}
	return n, nil
}
