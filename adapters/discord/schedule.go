package discord

import (
	"fmt"

	"github.com/flowbridge/flowbridge/bridge"
)

// ChannelResponder returns a responder that posts in channel, for runs of
// [[schedules]], and the channel's conversation key (its guild as the
// gateway state knows it).
func (a *Adapter) ChannelResponder(channel string) (string, bridge.Responder, error) {
	if !isSnowflake(channel) {
		return "", nil, fmt.Errorf("%q is not a Discord channel ID", channel)
	}
	guild := ""
	for _, sh := range a.shards {
		state := sh.session.State
		if ch, err := state.Channel(channel); err == nil {
			state.RLock()
			guild = ch.GuildID
			state.RUnlock()
			break
		}
	}
	return channelKey(guild, channel), &messageResponder{a: a, channel: channel}, nil
}
