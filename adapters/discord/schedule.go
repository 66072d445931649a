package discord

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
)

// ChannelRoute returns the conversation key of channel (its guild as the
// gateway state knows it, or Discord tells) and the route that posts in
// it, for runs of [[schedules]]: the core keeps the route with the run in
// its inbox and asks Responder for the responder, after a restart as on
// the run's first try.
func (a *Adapter) ChannelRoute(ctx context.Context, channel string) (string, json.RawMessage, error) {
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
	var ev bridge.Event
	if err := a.complete(&ev, route{Channel: channel, Guild: guild}); err != nil {
		return "", nil, err
	}
	if guild == "" {
		return dmKey(channel), ev.Route, nil
	}
	return channelKey(guild, channel), ev.Route, nil
}
