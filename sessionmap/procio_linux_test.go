//go:build linux

package sessionmap

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// processIO is what /proc/self/io says this process has written: wchar,
// the bytes passed to write calls (bbolt's pwrites of pages), and
// write_bytes, the bytes it sent towards the disk (the figure issue 29
// compares per message).
func processIO() (wchar, writeBytes int64, ok bool) {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	found := 0
	for sc.Scan() {
		name, val, cut := bytes.Cut(sc.Bytes(), []byte(": "))
		if !cut {
			continue
		}
		n, err := strconv.ParseInt(string(val), 10, 64)
		if err != nil {
			continue
		}
		switch string(name) {
		case "wchar":
			wchar = n
			found++
		case "write_bytes":
			writeBytes = n
			found++
		}
	}
	return wchar, writeBytes, found == 2
}
