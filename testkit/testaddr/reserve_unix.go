//go:build unix

package testaddr

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
)

// reserve binds a socket to a free loopback port and never listens on it:
// the kernel refuses every connection to the port, and, since the socket
// does not set SO_REUSEADDR, lets no other socket bind it.
func reserve() (string, func(), error) {
	syscall.ForkLock.RLock() // no child inherits the descriptor before it is close-on-exec
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return "", nil, fmt.Errorf("socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("bind: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("getsockname: %w", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("getsockname: %T, want an IPv4 address", sa)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port)), sync.OnceFunc(func() { syscall.Close(fd) }), nil
}
