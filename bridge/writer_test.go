package bridge_test

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/bridge/workspace/workspacetest"
	"github.com/flowbridge/flowbridge/sessionmap/bridgestore"
)

// heldStore holds every SaveTurns call until released, so a test can act
// while answered turns are still on their way to disk.
type heldStore struct {
	bridgestore.Store
	saving  chan struct{}
	release chan struct{}
}

func (h heldStore) SaveTurns(turns []bridge.Turn) error {
	h.saving <- struct{}{}
	<-h.release
	return h.Store.SaveTurns(turns)
}

func TestTurnsAreWrittenInTheBackground(t *testing.T) {
	fake := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(fake.Close)
	fake.AddAgent(workspacetest.Agent{UUID: agentUUID})
	ws, err := workspace.New(workspace.Config{BaseURL: fake.URL, WorkspaceUUID: "ws-test", Token: "test-token"})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := openStore(t)
	held := heldStore{Store: bridgestore.New(st), saving: make(chan struct{}, 10), release: make(chan struct{})}
	b, err := bridge.New(defaultConfig(), ws, held, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, b: b, fake: fake, store: st}

	h.ask("c/1", "first")
	<-held.saving // the turn is being written, and held there
	// /agent share sees the reply that is not on disk yet.
	_, shared := h.command("c/1", bridge.CommandAgent, "share")
	wantContains(t, "share of a pending reply", shared.Text, "You said: first")

	// A reset while that write is held: releasing it must not bring the
	// session back.
	h.command("c/1", bridge.CommandAgent, "reset")
	close(held.release)
	h.ask("c/2", "second") // another conversation's turn, written normally
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Session("c/1"); ok {
		t.Error("a turn written after /agent reset brought the session back")
	}
	// The other turn is on disk after Shutdown, reply and all.
	rec, ok, _ := st.Session("c/2")
	reply, rok, _ := st.LastReply("c/2")
	if !ok || !rok || !strings.Contains(reply, "You said: second") || rec.LastUsed.Before(rec.Created) {
		t.Errorf("after Shutdown: session %+v (%v), last reply %q (%v)", rec, ok, reply, rok)
	}
}
