package sessionmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

func TestSessionEncodingSize(t *testing.T) {
	rec := Session{Agent: "helper", SessionUUID: "0190f5a2-7c1e-7abc-8def-0123456789ab", Created: time.Now(), LastUsed: time.Now()}
	v, err := appendSession(nil, rec)
	if err != nil {
		t.Fatal(err)
	}
	// version, flags, agent (1+6), uuid (16), two times (9 each).
	if want := 2 + 7 + 16 + 18; len(v) > want {
		t.Errorf("len(appendSession(%+v)) = %d, want at most %d", rec, len(v), want)
	}
}

func TestDecodeSessionErrors(t *testing.T) {
	valid, err := appendSession(nil, Session{Agent: "a", SessionUUID: "s", Created: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		v    []byte
	}{
		{"empty", nil},
		{"version only", []byte{sessionV1}},
		{"unknown version", append([]byte{2}, valid[1:]...)},
		{"unknown flag", []byte{sessionV1, 0x80, 0, 0}},
		{"agent length past end", []byte{sessionV1, 0, 5, 'a'}},
		{"overlong length", append([]byte{sessionV1, 0}, bytes.Repeat([]byte{0xff}, 11)...)},
		{"uuid cut short", []byte{sessionV1, flagUUID16, 0, 1, 2, 3}},
		{"missing time", []byte{sessionV1, flagCreated, 0, 0}},
		{"trailing bytes", append(bytes.Clone(valid), 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeSession(tt.v)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("decodeSession(%x) = %+v, %v, want ErrCorrupt", tt.v, got, err)
			}
		})
	}
}

func TestUUIDForm(t *testing.T) {
	tests := []struct {
		in      string
		compact bool
	}{
		{"0190f5a2-7c1e-7abc-8def-0123456789ab", true},
		{"00000000-0000-0000-0000-000000000000", true},
		{"0190F5A2-7C1E-7ABC-8DEF-0123456789AB", false}, // would not come back as given
		{"0190f5a27c1e7abc8def0123456789ab", false},
		{"0190f5a2-7c1e-7abc-8def-0123456789a", false},
		{"0190f5a2-7c1e-7abc-8def_0123456789ab", false},
		{"0190f5a2-7c1e-7abc-8def-0123456789ag", false},
		{"", false},
	}
	for _, tt := range tests {
		u, ok := parseUUID(tt.in)
		if ok != tt.compact {
			t.Errorf("parseUUID(%q) ok = %v, want %v", tt.in, ok, tt.compact)
		}
		if ok && formatUUID(u) != tt.in {
			t.Errorf("formatUUID(parseUUID(%q)) = %q", tt.in, formatUUID(u))
		}
	}
}

func FuzzDecodeSession(f *testing.F) {
	for _, rec := range []Session{
		{},
		{Agent: "helper", SessionUUID: "0190f5a2-7c1e-7abc-8def-0123456789ab", Created: time.Unix(1716212345, 100), LastUsed: time.Unix(1716212399, 0)},
		{Agent: "ops", SessionUUID: "sess_42", Created: time.Unix(-5, 0)},
	} {
		v, err := appendSession(nil, rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v)
	}
	f.Add([]byte{sessionV1, flagsKnown, 0x80})
	f.Fuzz(func(t *testing.T, v []byte) {
		rec, err := decodeSession(v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeSession(%x) = %v, want an ErrCorrupt", v, err)
			}
			return
		}
		again, err := appendSession(nil, rec)
		if err != nil {
			t.Fatalf("appendSession(decodeSession(%x) = %+v) = %v", v, rec, err)
		}
		rec2, err := decodeSession(again)
		if err != nil || !sameSession(rec, rec2) {
			t.Fatalf("decodeSession(appendSession(%+v)) = %+v, %v", rec, rec2, err)
		}
	})
}

func FuzzSessionRoundTrip(f *testing.F) {
	f.Add("helper", "0190f5a2-7c1e-7abc-8def-0123456789ab", int64(1716212345000000100), int64(0))
	f.Add("", "x", int64(-1), int64(1))
	f.Fuzz(func(t *testing.T, agent, sessionID string, created, lastUsed int64) {
		rec := Session{Agent: agent, SessionUUID: sessionID}
		// Zero means "absent": time.Unix(0, 0) is not the zero Time.
		if created != 0 {
			rec.Created = time.Unix(0, created)
		}
		if lastUsed != 0 {
			rec.LastUsed = time.Unix(0, lastUsed)
		}
		v, err := appendSession(nil, rec)
		if err != nil {
			t.Fatalf("appendSession(%+v) = %v", rec, err)
		}
		got, err := decodeSession(v)
		if err != nil || !sameSession(got, rec) {
			t.Fatalf("decodeSession(appendSession(%+v)) = %+v, %v", rec, got, err)
		}
	})
}

func FuzzDecodeAudit(f *testing.F) {
	key := binary.BigEndian.AppendUint64(nil, 1<<63|1700000000000000000)
	key = binary.BigEndian.AppendUint64(key, 7)
	v, err := encodeAudit(AuditEntry{Flow: "healthcheck", Params: map[string]string{"host": "web1"}, Outcome: "ok", Duration: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(key, v)
	f.Add(key, []byte{auditV1, '{', '}'})
	f.Add(key[:8], []byte{auditV1})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		e, err := decodeAudit(k, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeAudit(%x, %q) = %v, want an ErrCorrupt", k, v, err)
			}
			return
		}
		again, err := encodeAudit(e)
		if err != nil {
			t.Fatalf("encodeAudit(%+v) = %v", e, err)
		}
		e2, err := decodeAudit(k, again)
		if err != nil || !sameAudit(e, e2) {
			t.Fatalf("decodeAudit(encodeAudit(%+v)) = %+v, %v", e, e2, err)
		}
	})
}
