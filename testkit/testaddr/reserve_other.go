//go:build !unix

package testaddr

import "net"

// reserve falls back to a closed listener's port, which another socket may
// take meanwhile.
func reserve() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, func() {}, nil
}
