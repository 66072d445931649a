package bridge

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// rateLimits holds one token bucket per user and kind. Buckets of users who
// went quiet are dropped once the map grows, so memory stays bounded.
type rateLimits struct {
	chat, flow rate.Limit
	burst      int
	now        func() time.Time // the core's clock
	mu         sync.Mutex
	m          map[string]*userLimit
}

type userLimit struct {
	l    *rate.Limiter
	seen time.Time
}

func newRateLimits(l Limits, now func() time.Time) *rateLimits {
	perMin := func(n float64) rate.Limit {
		if n <= 0 {
			return rate.Inf
		}
		return rate.Limit(n / 60)
	}
	return &rateLimits{chat: perMin(l.ChatPerMinute), flow: perMin(l.FlowsPerMinute), burst: l.Burst, now: now, m: make(map[string]*userLimit)}
}

// allowChat and allowFlow take one request from the user's bucket, or report
// how long until the next one would be allowed.
func (r *rateLimits) allowChat(platform, user string) (bool, time.Duration) {
	return r.allow("c/"+platform+"/"+user, r.chat)
}

func (r *rateLimits) allowFlow(platform, user string) (bool, time.Duration) {
	return r.allow("f/"+platform+"/"+user, r.flow)
}

func (r *rateLimits) allow(key string, lim rate.Limit) (bool, time.Duration) {
	if lim == rate.Inf {
		return true, 0
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.m[key]
	if u == nil {
		if len(r.m) >= 10000 {
			for k, v := range r.m {
				if now.Sub(v.seen) > 10*time.Minute {
					delete(r.m, k)
				}
			}
		}
		u = &userLimit{l: rate.NewLimiter(lim, r.burst)}
		r.m[key] = u
	}
	u.seen = now
	if u.l.AllowN(now, 1) {
		return true, 0
	}
	// A reservation tells the wait; cancelled at once, it takes nothing.
	res := u.l.ReserveN(now, 1)
	wait := res.DelayFrom(now)
	res.CancelAt(now)
	return false, wait
}
