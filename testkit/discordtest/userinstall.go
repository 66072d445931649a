package discordtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/bwmarrin/discordgo"
)

// MaxUserInstallFollowups is how many follow-ups an app may send per interaction when it is
// not installed where the interaction happened (change log, June 2024: user-installed apps).
const MaxUserInstallFollowups = 5

// CodeMissingAccess is Discord's 50001, the answer to a bot's REST call on a channel it
// cannot see.
const CodeMissingAccess = 50001

func errMissingAccess() *apiError {
	return newAPIError(http.StatusForbidden, CodeMissingAccess, "Missing Access")
}

// errTooManyFollowups is the refusal of a sixth follow-up; Discord documents the limit, not
// the code it answers with, so the fake sends the generic one.
func errTooManyFollowups() *apiError {
	return newAPIError(http.StatusBadRequest, CodeGeneral, fmt.Sprintf("Maximum number of follow-up messages reached (%d)", MaxUserInstallFollowups))
}

// userAppPermissions are an app's permissions in a DM or group DM and, for a user install,
// where the bot is not a member: Attach Files, Embed Links and Mention Everyone, with Use
// External Emojis in a DM with the app's bot user.
const userAppPermissions = discordgo.PermissionAttachFiles | discordgo.PermissionEmbedLinks | discordgo.PermissionMentionEveryone

// place is where an interaction happens, as the payload describes it.
type place struct {
	context        discordgo.InteractionContextType
	botPresent     bool // the app is installed there (the guild, or a DM with the bot)
	appPermissions string
}

// interactionPlace makes the interaction's channel known and says where it is. A user
// install in a guild the bot was not added to, and any group DM, leaves the bot outside: the
// channel is marked foreign and no guild membership is added.
func (s *Server) interactionPlace(ctx context.Context, in Interaction) (place, error) {
	switch {
	case in.PrivateChannel && (in.GuildID != "" || !in.UserInstall):
		return place{}, errors.New("discordtest: send interaction: a group DM (PrivateChannel) needs UserInstall and no GuildID")
	case in.PrivateChannel:
		s.addForeign(discordgo.Channel{ID: in.ChannelID, Type: discordgo.ChannelTypeGroupDM, Recipients: []*discordgo.User{&in.User}})
		return place{context: discordgo.InteractionContextPrivateChannel, appPermissions: strconv.FormatInt(userAppPermissions, 10)}, nil
	case in.GuildID == "":
		if err := s.ensureChannel(ctx, in.ChannelID, "", in.User); err != nil {
			return place{}, err
		}
		p := place{context: discordgo.InteractionContextBotDM, botPresent: !in.UserInstall, appPermissions: "2147483647"}
		if in.UserInstall {
			p.appPermissions = strconv.FormatInt(userAppPermissions|discordgo.PermissionUseExternalEmojis, 10)
		}
		return p, nil
	}
	s.mu.Lock()
	member := slices.Contains(s.guilds, in.GuildID)
	s.mu.Unlock()
	if in.UserInstall && !member {
		s.addForeign(discordgo.Channel{ID: in.ChannelID, GuildID: in.GuildID, Type: discordgo.ChannelTypeGuildText, Name: "channel-" + in.ChannelID})
		return place{context: discordgo.InteractionContextGuild, appPermissions: strconv.FormatInt(userAppPermissions, 10)}, nil
	}
	if err := s.ensureChannel(ctx, in.ChannelID, in.GuildID, in.User); err != nil {
		return place{}, err
	}
	return place{context: discordgo.InteractionContextGuild, botPresent: true, appPermissions: "2147483647"}, nil
}

// addForeign records a channel the bot cannot see, unless the fake knows it already.
func (s *Server) addForeign(ch discordgo.Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.channels[ch.ID]; !ok {
		s.addChannelLocked(&ch)
	}
	if s.foreign == nil {
		s.foreign = make(map[string]bool)
	}
	s.foreign[ch.ID] = true
}

func (s *Server) isForeign(channelID string) bool {
	if channelID == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.foreign[channelID]
}

// checkUserInstallLocked refuses what Discord's client would not offer: a command that is
// not global, not installable by users, or not allowed in the interaction's context.
func (s *Server) checkUserInstallLocked(in Interaction, ctx discordgo.InteractionContextType) error {
	name := ""
	switch d := in.Data.(type) {
	case discordgo.ApplicationCommandInteractionData:
		name = d.Name
	default:
		return nil // a component is on a message the command's answer made
	}
	var cmd *discordgo.ApplicationCommand
	for _, c := range s.commands[""] {
		if c.Name == name && c.Type == discordgo.ChatApplicationCommand {
			cmd = c
		}
	}
	switch {
	case cmd == nil:
		return fmt.Errorf("discordtest: send interaction: /%s is not a global command; only global commands can be user-installed", name)
	case cmd.IntegrationTypes == nil || !slices.Contains(*cmd.IntegrationTypes, discordgo.ApplicationIntegrationUserInstall):
		return fmt.Errorf("discordtest: send interaction: /%s is not registered for user installs (integration_types lacks 1)", name)
	case cmd.Contexts != nil && !slices.Contains(*cmd.Contexts, ctx):
		return fmt.Errorf("discordtest: send interaction: /%s is not registered for context %d", name, ctx)
	case cmd.Contexts == nil && ctx == discordgo.InteractionContextPrivateChannel:
		return fmt.Errorf("discordtest: send interaction: /%s has no contexts; group DMs need context 2", name)
	}
	return nil
}
