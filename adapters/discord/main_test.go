package discord

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

// endToEndParallel is how many tests run at once unless -parallel says
// otherwise. The end-to-end tests mostly wait (discordgo's Session.Close
// sleeps a second, and so does every reconnection), so the default of
// GOMAXPROCS, meant for tests that compute, leaves the machine idle.
const endToEndParallel = 16

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", fmt.Sprint(max(endToEndParallel, runtime.GOMAXPROCS(0)))); err != nil {
			fmt.Fprintln(os.Stderr, "keeping the default -parallel:", err)
		}
	}
	goleak.VerifyTestMain(m)
}
