package slack

import (
	"context"
	"fmt"

	"github.com/flowbridge/flowbridge/bridge"
)

// ChannelResponder returns a responder that posts in channel through the
// Web API, for runs of [[schedules]], and the channel's conversation key.
// The bot must be a member of the channel (chat:write); Slack answers
// not_in_channel otherwise, which the run's log shows.
func (a *Adapter) ChannelResponder(_ context.Context, channel string) (string, bridge.Responder, error) {
	if !isID(channel) {
		return "", nil, fmt.Errorf("%q is not a Slack channel ID", channel)
	}
	return conversationKey(a.identity().teamID, channel, ""), a.newResponder(route{Kind: kindChat, Channel: channel}), nil
}
