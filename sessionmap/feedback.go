package sessionmap

import (
	"bytes"
	"context"
	"encoding/binary"
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
	Message      string    `json:"m,omitempty"`
	Link         string    `json:"l,omitempty"`
	Turn         string    `json:"tu,omitempty"`
	Excerpt      string    `json:"x,omitempty"`
}

func voteKey(v store.Vote) []byte {
	return []byte(v.Reply + "\x00" + v.Platform + "\x00" + v.User)
}

// PutVote records v as its user's vote on its reply and returns the value it
// replaced.
func (s *Store) PutVote(ctx context.Context, v store.Vote) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("put vote: %w", err)
	}
	if err := checkTime(v.Time); err != nil {
		return "", fmt.Errorf("put vote: %w", err)
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
func (s *Store) Votes(ctx context.Context, f store.FeedbackFilter) ([]store.Vote, error) {
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

// Answers live in a bucket of their own, keyed by platform and reply
// joined by a NUL byte; the value is a version byte, the time in Unix
// nanoseconds (8 bytes, big-endian: PruneAnswers reads it without decoding
// the rest) and JSON. The bucket
// is created by the first PutAnswer rather than at Open, so files from
// before it need no upgrade; reads treat a missing bucket as empty.
var bucketAnswers = []byte("feedback_answers")

const answerV1 = 1

type answerRecord struct {
	Reply        string    `json:"r"`
	Platform     string    `json:"p,omitempty"`
	Conversation string    `json:"cv,omitempty"`
	Agent        string    `json:"a,omitempty"`
	Session      string    `json:"s,omitempty"`
	Turn         string    `json:"tu,omitempty"`
	Excerpt      string    `json:"x,omitempty"`
	Time         time.Time `json:"t"`
}

func answerKey(platform, reply string) []byte { return []byte(platform + "\x00" + reply) }

// PutAnswer records a, replacing the Answer with its platform and reply.
func (s *Store) PutAnswer(ctx context.Context, a store.Answer) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put answer: %w", err)
	}
	if err := checkTime(a.Time); err != nil {
		return fmt.Errorf("put answer: %w", err)
	}
	if a.Reply == "" {
		return fmt.Errorf("put answer: reply is required")
	}
	key := answerKey(a.Platform, a.Reply)
	if err := checkKey("answer key", string(key)); err != nil {
		return fmt.Errorf("put answer: %w", err)
	}
	rec, err := json.Marshal(answerRecord(a))
	if err != nil {
		return fmt.Errorf("put answer: %w", err)
	}
	err = s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketAnswers)
		if err != nil {
			return err
		}
		v := binary.BigEndian.AppendUint64([]byte{answerV1}, uint64(a.Time.UnixNano()))
		return b.Put(key, append(v, rec...))
	})
	if err != nil {
		return fmt.Errorf("put answer: %w", err)
	}
	return nil
}

// Answer returns the Answer recorded under platform and reply.
func (s *Store) Answer(ctx context.Context, platform, reply string) (store.Answer, bool, error) {
	var (
		a  store.Answer
		ok bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAnswers)
		if b == nil {
			return nil
		}
		v := b.Get(answerKey(platform, reply))
		if v == nil {
			return nil
		}
		var err error
		a, err = decodeAnswer(v)
		ok = err == nil
		return err
	})
	if err != nil {
		return store.Answer{}, false, fmt.Errorf("answer: %w", err)
	}
	return a, ok, nil
}

func decodeAnswer(v []byte) (store.Answer, error) {
	if len(v) < 9 || v[0] != answerV1 {
		return store.Answer{}, fmt.Errorf("%w: answer record of unknown version", ErrCorrupt)
	}
	var r answerRecord
	if err := json.Unmarshal(v[9:], &r); err != nil {
		return store.Answer{}, fmt.Errorf("%w: answer record: %v", ErrCorrupt, err)
	}
	return store.Answer(r), nil
}

// PruneAnswers deletes the Answers recorded before before. Answers are
// keyed by reply, not time, so it reads them all (one read transaction,
// no write held meanwhile), then deletes the old ones in chunks of bounded
// size.
func (s *Store) PruneAnswers(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("prune answers: %w", err)
	}
	var old [][]byte
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAnswers)
		if b == nil {
			return nil
		}
		limit := before.UnixNano()
		return b.ForEach(func(k, v []byte) error {
			if len(v) < 9 || v[0] != answerV1 {
				return fmt.Errorf("%w: answer record of unknown version", ErrCorrupt)
			}
			if int64(binary.BigEndian.Uint64(v[1:9])) < limit {
				old = append(old, bytes.Clone(k))
			}
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("prune answers: %w", err)
	}
	total := 0
	for chunk := range slices.Chunk(old, pruneChunk) {
		err := s.update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketAnswers)
			for _, k := range chunk {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("prune answers: %w", err)
		}
		total += len(chunk)
	}
	return total, nil
}

// pruneChunk bounds the answers one PruneAnswers transaction deletes.
const pruneChunk = 1000
