package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/flowbridge/flowbridge/bridge/store"
)

func sameVote(a, b store.Vote) bool {
	return a.Reply == b.Reply && a.Platform == b.Platform && a.User == b.User && a.UserName == b.UserName &&
		a.Conversation == b.Conversation && a.Session == b.Session && a.Agent == b.Agent &&
		a.Value == b.Value && a.Time.Equal(b.Time) && a.Message == b.Message && a.Link == b.Link &&
		a.Turn == b.Turn && a.Excerpt == b.Excerpt
}

func sameAnswer(a, b store.Answer) bool {
	return a.Reply == b.Reply && a.Platform == b.Platform && a.Conversation == b.Conversation && a.Agent == b.Agent &&
		a.Session == b.Session && a.Turn == b.Turn && a.Excerpt == b.Excerpt && a.Time.Equal(b.Time)
}

func putVote(t *testing.T, s store.Store, v store.Vote, wantPrevious string) {
	t.Helper()
	prev, err := s.PutVote(t.Context(), v)
	if err != nil || prev != wantPrevious {
		t.Fatalf("PutVote(%s by %s on %s) = %q, %v, want %q", v.Value, v.User, v.Reply, prev, err, wantPrevious)
	}
}

func votes(t *testing.T, s store.Store, f store.FeedbackFilter) []store.Vote {
	t.Helper()
	got, err := s.Votes(t.Context(), f)
	if err != nil {
		t.Fatalf("Votes(%+v) = %v", f, err)
	}
	return got
}

func voteIDs(vs []store.Vote) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Reply + "/" + v.User + "=" + v.Value
	}
	return out
}

func testFeedback(t *testing.T, o Opener) {
	vote := store.Vote{
		Reply: "r1", Platform: "slack", User: "U1", UserName: "Ann Ö", Conversation: "slack/T/C1/1.2",
		Session: "5f0c6a8e-4c1e-4f7e-9d55-9f7a3a1b2c3d", Agent: "helper", Value: store.VoteUp, Time: at(10),
		Message: "C1/1.3", Link: "https://t.slack.com/archives/C1/p10000003?thread_ts=1.2&cid=C1",
		Turn: "slack/msg/C1/1.2", Excerpt: "The disk is 93 % full — clean /var/log first. ☃",
	}
	answer := store.Answer{
		Reply: "r1", Platform: "slack", Conversation: "slack/T/C1/1.2", Agent: "helper",
		Session: "5f0c6a8e-4c1e-4f7e-9d55-9f7a3a1b2c3d", Turn: "slack/msg/C1/1.2", Excerpt: "The disk is 93 % full ☃", Time: at(5),
	}

	t.Run("AnswerRoundTrip", func(t *testing.T) {
		s := o.Open(t)
		if _, ok, err := s.Answer(t.Context(), "slack", "r1"); ok || err != nil {
			t.Fatalf("Answer() before any = %v, %v, want none", ok, err)
		}
		if err := s.PutAnswer(t.Context(), answer); err != nil {
			t.Fatalf("PutAnswer() = %v", err)
		}
		got, ok, err := s.Answer(t.Context(), "slack", "r1")
		if !ok || err != nil || !sameAnswer(got, answer) {
			t.Errorf("Answer() = %+v, %v, %v, want %+v", got, ok, err, answer)
		}
		// The key is platform and reply.
		if _, ok, err := s.Answer(t.Context(), "discord", "r1"); ok || err != nil {
			t.Errorf("Answer(discord, r1) = %v, %v, want none", ok, err)
		}
		// Recording it again replaces it.
		again := answer
		again.Excerpt, again.Time = "second", at(6)
		if err := s.PutAnswer(t.Context(), again); err != nil {
			t.Fatalf("PutAnswer() again = %v", err)
		}
		if got, _, _ := s.Answer(t.Context(), "slack", "r1"); !sameAnswer(got, again) {
			t.Errorf("Answer() after a second PutAnswer = %+v, want %+v", got, again)
		}
		if err := s.PutAnswer(t.Context(), store.Answer{Platform: "slack", Time: at(1)}); err == nil {
			t.Errorf("PutAnswer() without a reply = nil error, want one")
		}
	})

	t.Run("PruneAnswers", func(t *testing.T) {
		s := o.Open(t)
		for i := range 5 {
			a := answer
			a.Reply, a.Time = fmt.Sprintf("r%d", i), at(i)
			if err := s.PutAnswer(t.Context(), a); err != nil {
				t.Fatalf("PutAnswer() = %v", err)
			}
		}
		putVote(t, s, vote, "")
		if n, err := s.PruneAnswers(t.Context(), at(3)); n != 3 || err != nil {
			t.Fatalf("PruneAnswers(at 3) = %d, %v, want 3", n, err)
		}
		for i := range 5 {
			if _, ok, err := s.Answer(t.Context(), "slack", fmt.Sprintf("r%d", i)); ok != (i >= 3) || err != nil {
				t.Errorf("Answer(r%d) after the prune = %v, %v, want %v", i, ok, err, i >= 3)
			}
		}
		// Votes keep what they hold.
		if got := votes(t, s, store.FeedbackFilter{}); len(got) != 1 || !sameVote(got[0], vote) {
			t.Errorf("Votes() after the prune = %+v, want [%+v]", got, vote)
		}
		if n, err := s.PruneAnswers(t.Context(), at(3)); n != 0 || err != nil {
			t.Errorf("PruneAnswers() again = %d, %v, want 0", n, err)
		}
	})

	t.Run("RoundTrip", func(t *testing.T) {
		s := o.Open(t)
		putVote(t, s, vote, "")
		got := votes(t, s, store.FeedbackFilter{})
		if len(got) != 1 || !sameVote(got[0], vote) {
			t.Errorf("Votes() = %+v, want [%+v]", got, vote)
		}
	})

	t.Run("OneVotePerUserAndReply", func(t *testing.T) {
		s := o.Open(t)
		putVote(t, s, vote, "")
		// The same button again changes nothing, its time included.
		again := vote
		again.Time = at(20)
		putVote(t, s, again, store.VoteUp)
		if got := votes(t, s, store.FeedbackFilter{}); len(got) != 1 || !got[0].Time.Equal(at(10)) {
			t.Errorf("after the same vote twice: Votes() = %+v, want the first, at %v", got, at(10))
		}
		// The other button changes it.
		down := vote
		down.Value, down.Time = store.VoteDown, at(30)
		putVote(t, s, down, store.VoteUp)
		if got := votes(t, s, store.FeedbackFilter{}); len(got) != 1 || !sameVote(got[0], down) {
			t.Errorf("after a change: Votes() = %+v, want [%+v]", got, down)
		}
		// Another user, another platform or another reply is a vote of its own.
		for _, v := range []store.Vote{
			{Reply: "r1", Platform: "slack", User: "U2", Value: store.VoteUp, Time: at(40)},
			{Reply: "r1", Platform: "discord", User: "U1", Value: store.VoteUp, Time: at(50)},
			{Reply: "r2", Platform: "slack", User: "U1", Value: store.VoteUp, Time: at(60)},
		} {
			putVote(t, s, v, "")
		}
		if got := votes(t, s, store.FeedbackFilter{}); len(got) != 4 {
			t.Errorf("Votes() = %v, want 4 votes", voteIDs(got))
		}
	})

	t.Run("RequiresReplyAndUser", func(t *testing.T) {
		s := o.Open(t)
		for _, v := range []store.Vote{{User: "U1", Value: store.VoteUp}, {Reply: "r1", Value: store.VoteUp}} {
			if _, err := s.PutVote(t.Context(), v); err == nil {
				t.Errorf("PutVote(%+v) = nil error, want one", v)
			}
		}
	})

	t.Run("Filter", func(t *testing.T) {
		s := o.Open(t)
		// Vote i at t0+i µs, put in reverse order; agents alternate, users
		// cycle over three, values alternate every two.
		const n = 12
		for i := n - 1; i >= 0; i-- {
			v := store.Vote{
				Reply: fmt.Sprintf("r%02d", i), Platform: []string{"slack", "discord"}[i/6], User: fmt.Sprintf("U%d", i%3),
				Agent: []string{"a", "b"}[i%2], Value: []string{store.VoteUp, store.VoteDown}[i/2%2], Time: at(i),
			}
			putVote(t, s, v, "")
		}
		replies := func(vs []store.Vote) []string {
			out := make([]string, len(vs))
			for i, v := range vs {
				out[i] = v.Reply
			}
			return out
		}
		tests := []struct {
			name string
			f    store.FeedbackFilter
			want []string
		}{
			{"all, oldest first", store.FeedbackFilter{}, []string{"r00", "r01", "r02", "r03", "r04", "r05", "r06", "r07", "r08", "r09", "r10", "r11"}},
			{"agent", store.FeedbackFilter{Agent: "b"}, []string{"r01", "r03", "r05", "r07", "r09", "r11"}},
			{"user", store.FeedbackFilter{User: "U0"}, []string{"r00", "r03", "r06", "r09"}},
			{"value", store.FeedbackFilter{Value: store.VoteDown}, []string{"r02", "r03", "r06", "r07", "r10", "r11"}},
			{"platform", store.FeedbackFilter{Platform: "discord"}, []string{"r06", "r07", "r08", "r09", "r10", "r11"}},
			{"reply", store.FeedbackFilter{Reply: "r04"}, []string{"r04"}},
			{"since inclusive, until exclusive", store.FeedbackFilter{Since: at(3), Until: at(6)}, []string{"r03", "r04", "r05"}},
			{"limit keeps the oldest", store.FeedbackFilter{Agent: "a", Limit: 2}, []string{"r00", "r02"}},
			{"ANDed", store.FeedbackFilter{Agent: "a", Value: store.VoteUp, Platform: "slack"}, []string{"r00", "r04"}},
			{"nothing", store.FeedbackFilter{Agent: "nobody"}, []string{}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if got := replies(votes(t, s, tt.f)); !slices.Equal(got, tt.want) {
					t.Errorf("Votes(%+v) = %v, want %v", tt.f, got, tt.want)
				}
			})
		}
	})

	t.Run("ConcurrentVoters", func(t *testing.T) {
		s := o.Open(t)
		// Twenty users vote on one reply at once, each twice: nothing is lost
		// or doubled.
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for i := range 20 {
			wg.Go(func() {
				for _, val := range []string{store.VoteUp, store.VoteDown} {
					if _, err := s.PutVote(t.Context(), store.Vote{Reply: "r", Platform: "slack", User: fmt.Sprintf("U%02d", i), Value: val, Time: at(i)}); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("PutVote: %v", err)
		}
		got := votes(t, s, store.FeedbackFilter{Reply: "r"})
		if len(got) != 20 {
			t.Fatalf("Votes() = %d votes, want 20", len(got))
		}
		for _, v := range got {
			if v.Value != store.VoteDown {
				t.Errorf("vote of %s = %s, want its last, %s", v.User, v.Value, store.VoteDown)
			}
		}
	})

	t.Run("Reopen", func(t *testing.T) {
		if o.Reopen == nil {
			t.Skip("Opener.Reopen is nil")
		}
		s := o.Open(t)
		putVote(t, s, vote, "")
		if err := s.PutAnswer(t.Context(), answer); err != nil {
			t.Fatalf("PutAnswer() = %v", err)
		}
		s = o.Reopen(t, s)
		if got := votes(t, s, store.FeedbackFilter{}); len(got) != 1 || !sameVote(got[0], vote) {
			t.Errorf("after Reopen: Votes() = %+v, want [%+v]", got, vote)
		}
		if got, ok, err := s.Answer(t.Context(), "slack", "r1"); !ok || err != nil || !sameAnswer(got, answer) {
			t.Errorf("after Reopen: Answer() = %+v, %v, %v, want %+v", got, ok, err, answer)
		}
		down := vote
		down.Value = store.VoteDown
		putVote(t, s, down, store.VoteUp)
	})
}
