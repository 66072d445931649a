package main

import (
	"strings"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
)

// TestConfigProgressInterval: bridge.progress_interval is 15s by default,
// 0s turns progress off (the core's zero, too), and anything faster than
// 15s is refused.
func TestConfigProgressInterval(t *testing.T) {
	if got, want := mustParse(t, testConfig("", "")).bridgeConfig().ProgressInterval, bridge.DefaultConfig().ProgressInterval; got != want || want != 15*time.Second {
		t.Errorf("default progress interval = %v, want the core's default %v (15s)", got, want)
	}
	if got := mustParse(t, testConfig("", "[bridge]\nprogress_interval = \"0s\"\n")).bridgeConfig().ProgressInterval; got != 0 {
		t.Errorf("progress_interval = \"0s\" gives the core %v, want 0 (off)", got)
	}
	if got := mustParse(t, testConfig("", "[bridge]\nprogress_interval = \"1m\"\n")).bridgeConfig().ProgressInterval; got != time.Minute {
		t.Errorf("progress_interval = \"1m\" gives %v", got)
	}
	for _, bad := range []string{"5s", "11m", "-15s"} {
		_, err := parseConfig([]byte(testConfig("", "[bridge]\nprogress_interval = \""+bad+"\"\n")), mapEnv(nil))
		if err == nil || !strings.Contains(err.Error(), "bridge.progress_interval") || !strings.Contains(err.Error(), "0s (off) or 15s to 10m") {
			t.Errorf("progress_interval = %q: %v, want it refused with the allowed range", bad, err)
		}
	}
}
