package slacktest_test

import (
	"fmt"

	"github.com/slack-go/slack"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

func Example() {
	srv := slacktest.NewServer(slacktest.Options{Channels: []slacktest.Channel{{ID: "C1", Name: "general"}}})
	defer srv.Close()

	api := slack.New(srv.BotToken(), slack.OptionAPIURL(srv.APIURL()), slack.OptionHTTPClient(srv.Client()))
	if _, _, err := api.PostMessage("C1", slack.MsgOptionText("hello", false)); err != nil {
		fmt.Println(err)
	}
	_, _, err := api.PostMessage("C404", slack.MsgOptionText("hello", false))
	fmt.Println(err)

	for _, m := range srv.Messages() {
		fmt.Println(m.Op, m.Channel, m.Text)
	}
	// Output:
	// channel_not_found
	// chat.postMessage C1 hello
}
