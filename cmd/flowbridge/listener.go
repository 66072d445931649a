package main

import (
	"time"
)

// adminLimits bound what holding connections to the admin listener can
// take: an idle or slow connection is closed after the timeouts, and at
// most maxConns are open at once (the rest wait in the kernel's accept
// queue, costing the process no descriptor), so neither idle connections
// nor clients that keep a connection after a 401 can starve the process of
// file descriptors or memory.
type adminLimits struct {
	maxConns int
	// readHeader bounds reading a request's header, from the connection's
	// accept or its previous response on.
	readHeader time.Duration
	// read bounds reading a whole request, body included.
	read time.Duration
	// idle bounds how long a keep-alive connection waits for its next
	// request.
	idle time.Duration
	// write bounds writing a response: /backup writes the whole store.
	write time.Duration
}

// defaultAdminLimits are the admin listener's: a probe every second from
// a few monitors, the CLI, a scrape and a backup fit well within them.
var defaultAdminLimits = adminLimits{
	maxConns:   64,
	readHeader: 5 * time.Second,
	read:       30 * time.Second,
	idle:       10 * time.Second,
	write:      5 * time.Minute,
}
