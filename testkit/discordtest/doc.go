// Package discordtest is a fake Discord, REST API and gateway on loopback, for tests with the real discordgo v0.29 client.
//
// # Wiring a *discordgo.Session to the fake
//
// discordgo's endpoint variables are package globals computed once, so do not change them:
// route the session's HTTP client instead, and let the fake's GET /gateway answer send the
// websocket to the fake:
//
//	fake := discordtest.NewServer(discordtest.Options{})
//	defer fake.Close()
//	s, _ := discordgo.New("Bot " + fake.Token())
//	s.Client = fake.Client() // rewrites https://discord.com/... to fake.URL; refuses other hosts
//	s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages
//	_ = s.Open() // GET /api/v9/gateway returns ws://127.0.0.1:PORT/gw; s.Dialer is left as is
//	...
//	s.Lock() // discordgo reads the flag without a lock when the fake echoes Close's close frame
//	s.ShouldReconnectOnError = false // else that echo starts a reconnect loop after Close
//	s.Unlock()
//	_ = s.Close() // sleeps one second inside discordgo
//
// An adapter configured with an api_url does the same with its own http.RoundTripper: send
// every request for discord.com to api_url (the fake serves /api/v9/... at fake.URL), keep
// path and query. See ExampleServer.
//
// # Rules the fake enforces (all answered like Discord, with a JSON error and code)
//
//   - Authorization must be "Bot <token>" (401, code 0); interaction callbacks and webhook
//     routes take no bot token, but a wrong one is still refused.
//   - Interactions: the first callback more than 3 s (of Options.Now) after dispatch gets
//     404/10062, a second callback 400/40060; webhook edits, follow-ups and deletes more
//     than 15 minutes after dispatch get 401/50027; a follow-up or @original edit before the
//     first callback gets 404/10015 or 404/10008; callback types must fit the interaction.
//   - Messages: content at most 2,000 characters (runes), embed and component limits, no
//     empty message (50006), no ephemeral flag on channel messages, message_reference to a
//     known message. Every body with content or embeds must carry allowed_mentions, or it is
//     rejected with 400/50035 naming allowed_mentions: a stricter rule than Discord's (which
//     would ping with its defaults), so a missing one fails loudly. Message.Pings records what
//     a message would ping on Discord.
//   - Commands: names and option names match ^[-_'\p{L}\p{N}\p{Devanagari}\p{Thai}]{1,32}$
//     and are lower case, descriptions 1 to 100, at most 25 options, subcommands and choices,
//     required options first, choices and autocomplete exclusive, 8,000 characters per
//     command; SendInteraction refuses commands and option values Discord's client would not send.
//   - Gateway: a bad token closes with 4004, a privileged intent the application lacks
//     (Options.DenyMessageContent) with 4014. Dispatches need their intents (SendMessage
//     returns an error otherwise); without the message content intent guild messages that do
//     not mention the bot arrive with blank content. A client close with 1000 or 1001
//     invalidates the session, so a later RESUME is answered with op 9; not one answering
//     the fake's own close frame (discordgo answers every close with 1000).
//   - Scripted 429s (RateLimit) carry Retry-After, X-RateLimit-* headers and a JSON body.
//   - Shards: IDENTIFY's shard [id, count] routes each guild's events (GUILD_CREATE,
//     MESSAGE_CREATE, INTERACTION_CREATE…) only to the session of shard ShardOf(guild,
//     count), (guild_id >> 22) % count, and DMs to shard 0; READY and the GUILD_CREATEs after
//     it list the shard's guilds only; a shard id outside [0, count) closes with 4010. A
//     session without shard is shard 0 of 1. Faults act on the newest session; DropShard
//     drops one shard's connection, as a network failure on one replica would.
//
// # Payloads
//
// Dispatches and REST answers are rendered as Discord documents them, not by marshalling
// discordgo's structs (which send null for absent arrays): what Discord always sends is
// there (channel_type, and member in guilds, on MESSAGE_CREATE; authorizing_integration_owners,
// entitlements, app_permissions, locale, context on interactions; the guild object and its
// extras on GUILD_CREATE; recipients on DM channels, permission_overwrites on guild channels),
// arrays are [] and documented nullable fields null. TestPayloadsAsDocumented checks every
// frame and answer of a session against a table of the documented fields.
//
// Faults (Reconnect, InvalidateSession, DropConnection, CloseConnection) wait for the
// connection's first heartbeat: discordgo writes it right after Open, and a connection that
// breaks under that write makes two discordgo goroutines reconnect at once. Every Wait
// method blocks on the fake's state, never on a timer; pass a context with a deadline.
package discordtest
