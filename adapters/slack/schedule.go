package slack

import (
	"context"
	"encoding/json"
	"fmt"
)

// ChannelRoute returns the conversation key of channel and the route that
// posts in it through the Web API, for runs of [[schedules]]: the core
// keeps the route with the run in its inbox and asks Responder for the
// responder, after a restart as on the run's first try. The bot must be a
// member of the channel (chat:write); Slack answers not_in_channel
// otherwise, which the run's log shows.
func (a *Adapter) ChannelRoute(_ context.Context, channel string) (string, json.RawMessage, error) {
	if !isID(channel) {
		return "", nil, fmt.Errorf("%q is not a Slack channel ID", channel)
	}
	raw, err := json.Marshal(route{Kind: kindChat, Channel: channel})
	if err != nil {
		return "", nil, fmt.Errorf("route: %w", err)
	}
	return conversationKey(a.identity().teamID, channel, ""), raw, nil
}
