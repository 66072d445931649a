package loadkit

import (
	"math"
	"slices"
	"time"
)

// Quantiles summarise a latency distribution in milliseconds.
type Quantiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// QuantilesOf uses the nearest-rank method; it sorts d.
func QuantilesOf(d []time.Duration) Quantiles {
	if len(d) == 0 {
		return Quantiles{}
	}
	slices.Sort(d)
	rank := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(d)))) - 1
		return MS(d[max(i, 0)])
	}
	return Quantiles{N: len(d), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: MS(d[len(d)-1])}
}

// MS is d in milliseconds.
func MS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
