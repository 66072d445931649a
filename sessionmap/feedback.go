package sessionmap

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// Feedback keys are reply, platform and user joined by NUL bytes (none of
// them holds one), so a user's vote on a reply has one place. The value is
// a version byte and JSON with short names.
const feedbackV1 = 1

type voteRecord struct {
	Reply        string    `json:"r"`
	Platform     string    `json:"p,omitempty"`
	User         string    `json:"u"`
	UserName     string    `json:"un,omitempty"`
	Conversation string    `json:"cv,omitempty"`
	Session      string    `json:"s,omitempty"`
	Agent        string    `json:"a,omitempty"`
	Value        string    `json:"v"`
	Time         time.Time `json:"t"`
}

func voteKey(v store.Vote) []byte {
	return []byte(v.Reply + "\x00" + v.Platform + "\x00" + v.User)
}

// PutVote records v as its user's vote on its reply and returns the value it
// replaced.
func (s *Store) PutVote(v store.Vote) (string, error) {
	if v.Time.IsZero() {
		v.Time = time.Now()
	}
	if v.Reply == "" || v.User == "" {
		return "", fmt.Errorf("put vote: reply and user are required")
	}
	key := voteKey(v)
	if err := checkKey("vote key", string(key)); err != nil {
		return "", fmt.Errorf("put vote: %w", err)
	}
	rec, err := json.Marshal(voteRecord(v))
	if err != nil {
		return "", fmt.Errorf("put vote: %w", err)
	}
	var previous string
	err = s.update(func(tx *bolt.Tx) error {
		previous = ""
		b := tx.Bucket(bucketFeedback)
		if old := b.Get(key); old != nil {
			held, err := decodeVote(old)
			if err != nil {
				return err
			}
			previous = held.Value
			if held.Value == v.Value {
				return nil
			}
		}
		return b.Put(key, append([]byte{feedbackV1}, rec...))
	})
	if err != nil {
		return "", fmt.Errorf("put vote: %w", err)
	}
	return previous, nil
}

func decodeVote(v []byte) (store.Vote, error) {
	if len(v) == 0 || v[0] != feedbackV1 {
		return store.Vote{}, fmt.Errorf("%w: vote record of unknown version", ErrCorrupt)
	}
	var r voteRecord
	if err := json.Unmarshal(v[1:], &r); err != nil {
		return store.Vote{}, fmt.Errorf("%w: vote record: %v", ErrCorrupt, err)
	}
	return store.Vote(r), nil
}

// Votes returns the votes f selects, oldest first. Votes are few next to
// messages (one per press), so it reads them all.
func (s *Store) Votes(f store.FeedbackFilter) ([]store.Vote, error) {
	var out []store.Vote
	err := s.scan(bucketFeedback, nil, func([]byte) bool { return true }, func(_, v []byte) (bool, error) {
		vote, err := decodeVote(v)
		if err != nil {
			return false, err
		}
		if voteMatch(f, vote) {
			out = append(out, vote)
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("votes: %w", err)
	}
	slices.SortStableFunc(out, func(a, b store.Vote) int { return a.Time.Compare(b.Time) })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func voteMatch(f store.FeedbackFilter, v store.Vote) bool {
	return (f.Since.IsZero() || !v.Time.Before(f.Since)) &&
		(f.Until.IsZero() || v.Time.Before(f.Until)) &&
		(f.Agent == "" || v.Agent == f.Agent) &&
		(f.User == "" || v.User == f.User) &&
		(f.Value == "" || v.Value == f.Value) &&
		(f.Platform == "" || v.Platform == f.Platform) &&
		(f.Reply == "" || v.Reply == f.Reply)
}
