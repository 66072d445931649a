package discord

import (
	"context"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
)

// ChannelResponder returns a responder that posts in channel, for runs of
// [[schedules]], and the channel's conversation key (its guild as the
// gateway state knows it, or Discord tells).
func (a *Adapter) ChannelResponder(ctx context.Context, channel string) (string, bridge.Responder, error) {
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
	if guild == "" {
		ch, err := a.session.Channel(channel, discordgo.WithContext(ctx))
		if err != nil {
			return "", nil, fmt.Errorf("channel %s: %w", channel, err)
		}
		guild = ch.GuildID
	}
	if guild == "" {
		return dmKey(channel), &messageResponder{a: a, channel: channel}, nil
	}
	return channelKey(guild, channel), &messageResponder{a: a, channel: channel}, nil
}
