package main

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
)

// TestJournalGroupCommit: records appended while a sync runs wait for the
// next one and share it; none returns before a sync that covers it; and the
// file holds every record, framed and checksummed.
func TestJournalGroupCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, err := os.Create(filepath.Join(t.TempDir(), "journal"))
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var syncsMu sync.Mutex
		syncs := 0
		j := newJournal(f, func(*os.File) error {
			<-release
			syncsMu.Lock()
			syncs++
			syncsMu.Unlock()
			return nil
		})
		done := make(chan int, 11)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := j.append('r', "first", "hello"); err != nil {
				t.Error(err)
			}
			done <- 0
		})
		synctest.Wait() // the first writer is in its sync
		for i := 1; i <= 10; i++ {
			wg.Go(func() {
				if err := j.append('s', "k", ""); err != nil {
					t.Error(err)
				}
				done <- i
			})
		}
		synctest.Wait() // the ten wait for it
		if len(done) != 0 {
			t.Fatalf("%d appends returned before any sync", len(done))
		}
		release <- struct{}{} // the first sync ends
		synctest.Wait()       // one of the ten syncs the ten
		if len(done) != 1 {
			t.Fatalf("%d appends returned after the first sync, want the first alone", len(done))
		}
		release <- struct{}{}
		wg.Wait()
		if records, n := j.stats(); records != 11 || n != 2 || syncs != 2 {
			t.Errorf("%d records, %d syncs counted, %d made; want 11 records in 2 syncs", records, n, syncs)
		}
		j.close()
		data, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; len(data) > 0; n++ {
			size := binary.LittleEndian.Uint32(data)
			rec := data[8 : 8+size]
			if crc32.Checksum(rec, castagnoli) != binary.LittleEndian.Uint32(data[4:]) {
				t.Fatalf("record %d: checksum does not match", n)
			}
			data = data[8+size:]
		}
	})
}
