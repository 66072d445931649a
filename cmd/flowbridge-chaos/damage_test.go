package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
)

// TestKillDamage runs the kill scenario with four SIGKILLs, and after each
// damages the store file the way a machine damages it — cut short, left
// empty, one byte changed, or gone — before the next start, in turn. Each
// start must then either refuse with a message that names the file and the
// way out (the test restores the file as the kill left it and starts
// again), or serve; whatever it serves is held to the run's three promises
// like any other restart. An empty or deleted file is always refused.
func TestKillDamage(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	p := killParams(t, tmp)
	p.Kills = len(damageKinds)
	var outcomes []damageOutcome
	got, err := runKill(t.Context(), p, func(ctx context.Context, e *killEnv, k int) (*loadkit.Child, error) {
		return damageAndStart(ctx, e, k, damageKinds[(k-1)%len(damageKinds)], &outcomes)
	})
	if err != nil {
		t.Fatalf("runKill: %v", err)
	}
	checkKill(t, got, len(damageKinds), tmp)
	var kinds []string
	for _, d := range outcomes {
		kinds = append(kinds, d.Kind)
		if (d.Kind == "zero" || d.Kind == "delete") && !d.Refused {
			t.Errorf("a store damaged by %s was served", d.Kind)
		}
	}
	if !slices.Equal(kinds, damageKinds) {
		t.Errorf("damaged starts = %v, want one of each of %v", kinds, damageKinds)
	}
	t.Logf("damaged starts: %+v", outcomes)
}

// damageKinds are applied in this order, one per kill.
var damageKinds = []string{"truncate", "zero", "flip", "delete"}

// damageOutcome is what one damaged start did.
type damageOutcome struct {
	Kind    string `json:"kind"`
	Refused bool   `json:"refused"`
	// Message is the refusal's last log line.
	Message string `json:"message,omitempty"`
}

// damageAndStart damages the store as kind says and starts the bridge on it.
// A bridge that refuses must say why, naming the file and the backup: then
// the file is put back as the kill left it and nil is returned, for the run
// to start the next process as usual. A bridge that answers is returned, to
// serve.
func damageAndStart(ctx context.Context, e *killEnv, k int, kind string, outcomes *[]damageOutcome) (*loadkit.Child, error) {
	path := filepath.Join(e.dir, "flowbridge.db")
	kept, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("damage: %w", err)
	}
	if err := damageFile(path, kept, kind); err != nil {
		return nil, fmt.Errorf("damage %s: %w", kind, err)
	}
	b, err := loadkit.Start(e.p.flowbridge, []string{"run", "-config", e.cfgPath}, filepath.Join(e.dir, fmt.Sprintf("flowbridge-%02d-%s.log", k, kind)))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(loadkit.StartTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !verifiedBy(ctx, e, b) {
		select {
		case <-b.Done:
			log := b.LogTail()
			if !strings.Contains(log, path) || !strings.Contains(log, "backup") {
				return nil, fmt.Errorf("flowbridge on a store damaged by %s exited without naming %s and the backup: %v\n%s", kind, path, b.WaitErr, log)
			}
			*outcomes = append(*outcomes, damageOutcome{Kind: kind, Refused: true, Message: lastLine(log)})
			// Back to what the kill left, and its marker with it.
			return nil, os.WriteFile(path, kept, 0o600)
		case <-ctx.Done():
			b.Kill()
			return nil, ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			b.Kill()
			return nil, fmt.Errorf("flowbridge on a store damaged by %s neither answered nor exited within %s\n%s", kind, loadkit.StartTimeout, b.LogTail())
		}
	}
	*outcomes = append(*outcomes, damageOutcome{Kind: kind})
	return b, nil
}

// verifiedBy is verified while b runs: a previous process's port is free.
func verifiedBy(ctx context.Context, e *killEnv, b *loadkit.Child) bool {
	select {
	case <-b.Done:
		return false
	default:
	}
	return e.verified(ctx)
}

// damageFile damages the file at path, whose content is data.
func damageFile(path string, data []byte, kind string) error {
	switch kind {
	case "truncate": // a copy or a disk that stopped part way
		return os.Truncate(path, int64(len(data)/4+rand.IntN(len(data)/2)))
	case "zero": // a file created and never written, or written on a full disk
		return os.Truncate(path, 0)
	case "flip": // one byte changed anywhere, as a bad sector or a stray write
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		at := rand.IntN(len(data))
		_, err = f.WriteAt([]byte{data[at] ^ byte(1+rand.IntN(255))}, int64(at))
		return errors.Join(err, f.Close())
	case "delete": // the file lost, its directory kept
		return os.Remove(path)
	}
	return fmt.Errorf("unknown damage %q", kind)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
