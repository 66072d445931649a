package slack

import "testing"

func TestTSOrder(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ts   string
		want int64
	}{
		{"1716212345.000100", 1716212345_000100},
		{"1716212345.999999", 1716212345_999999},
		{"0.000001", 1},
		{"1716212345", 0},
		{"1716212345.1", 0},
		{"x.000100", 0},
		{"-1.000100", 0},
		{"99999999999999999.000000", 0},
	} {
		if got := tsOrder(tt.ts); got != tt.want {
			t.Errorf("tsOrder(%q) = %d, want %d", tt.ts, got, tt.want)
		}
	}
	if tsOrder("1716212345.000099") >= tsOrder("1716212345.000100") {
		t.Error("tsOrder does not follow the ts' order")
	}
}
