package store

import (
	"context"
	"time"
)

// Schedules keeps, per schedule, the time of the latest run claimed, so that
// a run happens once among replicas sharing a store and runs missed while
// no process was up can be reported at the next start.
type Schedules interface {
	// ClaimRun records at as the latest run of the schedule name and
	// reports true, or reports false and writes nothing when a run at at or
	// later was claimed already (by this process or another).
	ClaimRun(ctx context.Context, name string, at time.Time) (bool, error)
	// LastRun returns the latest run claimed for name; ok is false when
	// none was.
	LastRun(ctx context.Context, name string) (at time.Time, ok bool, err error)
}
