package slack

import (
	"context"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
)

const (
	nameTTL      = time.Hour
	groupsTTL    = 5 * time.Minute
	lookupBudget = 5 * time.Second
	maxCached    = 10_000
	// notThreadTTL is how long "the bot is not in this thread" is believed; a
	// mention or a reply of the bot there makes it the bot's at once.
	notThreadTTL = 10 * time.Minute
	// repliesPage is how many messages of a thread are read to find the bot's.
	repliesPage = 200
)

// userCache resolves user IDs to display names (users.info) and, when
// enabled, to user group IDs (usergroups.list, one call for the whole team).
type userCache struct {
	api        *slackgo.Client
	wantGroups bool
	now        func() time.Time
	log        *zap.Logger

	mu       sync.Mutex
	names    map[string]cachedName
	groups   map[string][]string
	groupsAt time.Time
}

type cachedName struct {
	name string
	at   time.Time
}

func newUserCache(api *slackgo.Client, wantGroups bool, now func() time.Time, log *zap.Logger) *userCache {
	return &userCache{api: api, wantGroups: wantGroups, now: now, log: log, names: make(map[string]cachedName)}
}

// lookup builds the event's user; name, when the payload carries one, saves
// the users.info call. Lookups that fail leave the field empty: the event
// still reaches the core.
func (c *userCache) lookup(ctx context.Context, id, name string) bridge.User {
	u := bridge.User{ID: id, Name: name}
	if id == "" {
		return u
	}
	ctx, cancel := context.WithTimeout(ctx, lookupBudget)
	defer cancel()
	if u.Name == "" {
		u.Name = c.name(ctx, id)
	}
	if c.wantGroups {
		u.Groups = c.userGroups(ctx, id)
	}
	return u
}

func (c *userCache) name(ctx context.Context, id string) string {
	now := c.now()
	c.mu.Lock()
	e, ok := c.names[id]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < nameTTL {
		return e.name
	}
	info, err := c.api.GetUserInfoContext(ctx, id)
	if err != nil {
		c.log.Debug("users.info failed", zap.String("user", id), zap.Error(err))
		return e.name
	}
	n := info.Profile.DisplayName
	if n == "" {
		n = info.RealName
	}
	if n == "" {
		n = info.Name
	}
	c.mu.Lock()
	if len(c.names) >= maxCached {
		clear(c.names)
	}
	c.names[id] = cachedName{name: n, at: now}
	c.mu.Unlock()
	return n
}

// nameAll resolves the display names of ids: those cached at no cost, the
// others by users.info, at most lookups calls; an ID it could not resolve
// is missing from the map.
func (c *userCache) nameAll(ctx context.Context, ids []string, lookups int) map[string]string {
	out := make(map[string]string, len(ids))
	now := c.now()
	for _, id := range ids {
		if _, done := out[id]; done || id == "" {
			continue
		}
		c.mu.Lock()
		e, ok := c.names[id]
		c.mu.Unlock()
		switch {
		case ok && now.Sub(e.at) < nameTTL:
			out[id] = e.name
		case lookups > 0:
			lookups--
			out[id] = c.name(ctx, id)
		}
	}
	return out
}

func (c *userCache) userGroups(ctx context.Context, id string) []string {
	now := c.now()
	c.mu.Lock()
	fresh := c.groups != nil && now.Sub(c.groupsAt) < groupsTTL
	groups := c.groups[id]
	c.mu.Unlock()
	if fresh {
		return groups
	}
	list, err := c.api.GetUserGroupsContext(ctx, slackgo.GetUserGroupsOptionIncludeUsers(true))
	if err != nil {
		// Stale membership beats none for access rules; it is refreshed on the next event.
		c.log.Warn("usergroups.list failed", zap.Error(err))
		return groups
	}
	byUser := make(map[string][]string)
	for _, g := range list {
		if g.DateDelete != 0 {
			continue
		}
		for _, u := range g.Users {
			byUser[u] = append(byUser[u], g.ID)
		}
	}
	c.mu.Lock()
	c.groups, c.groupsAt = byUser, now
	c.mu.Unlock()
	return byUser[id]
}

// threadCache remembers which threads the bot is part of. It is in memory
// and bounded; after a restart, or for a thread it forgot, it asks Slack
// (conversations.replies) whether the bot has posted in the thread, as
// ChatGPT-in-Slack does, so a restart does not make the bot deaf in its threads.
type threadCache struct {
	now func() time.Time

	mu   sync.Mutex
	mine map[string]time.Time // channel/thread → when last seen
	not  map[string]time.Time // channel/thread → when found not to be the bot's
}

func newThreadCache(now func() time.Time) *threadCache {
	return &threadCache{now: now, mine: make(map[string]time.Time), not: make(map[string]time.Time)}
}

func (t *threadCache) add(channel, thread string) {
	if thread == "" {
		return
	}
	k := channel + "/" + thread
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.mine) >= maxCached {
		t.evictOldest()
	}
	t.mine[k] = t.now()
	delete(t.not, k)
}

// evictOldest drops the threads idle for the longest tenth of the span
// between the stalest entry and now.
func (t *threadCache) evictOldest() {
	now := t.now()
	oldest := now
	for _, at := range t.mine {
		if at.Before(oldest) {
			oldest = at
		}
	}
	limit := oldest.Add(now.Sub(oldest) / 10)
	for k, at := range t.mine {
		if !at.After(limit) {
			delete(t.mine, k)
		}
	}
}

// knownNotBots reports whether the thread was found not to be the bot's a
// short while ago, with no mention or reply of the bot there since.
func (t *threadCache) knownNotBots(channel, thread string) bool {
	k := channel + "/" + thread
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, mine := t.mine[k]; mine {
		return false
	}
	at, not := t.not[k]
	return not && t.now().Sub(at) < notThreadTTL
}

func (t *threadCache) isBots(ctx context.Context, api *slackgo.Client, self identity, channel, thread string, log *zap.Logger) bool {
	k := channel + "/" + thread
	now := t.now()
	t.mu.Lock()
	_, mine := t.mine[k]
	if mine {
		t.mine[k] = now
	}
	at, not := t.not[k]
	t.mu.Unlock()
	switch {
	case mine:
		return true
	case not && now.Sub(at) < notThreadTTL:
		return false
	}

	ctx, cancel := context.WithTimeout(ctx, lookupBudget)
	defer cancel()
	msgs, _, _, err := api.GetConversationRepliesContext(ctx, &slackgo.GetConversationRepliesParameters{
		ChannelID: channel, Timestamp: thread, Limit: repliesPage,
	})
	if err != nil {
		log.Warn("conversations.replies failed; not answering in the thread", zap.Error(err))
		return false
	}
	for _, m := range msgs {
		if m.User != "" && m.User == self.userID || m.BotID != "" && m.BotID == self.botID {
			t.add(channel, thread)
			return true
		}
	}
	t.mu.Lock()
	if len(t.not) >= maxCached {
		clear(t.not)
	}
	t.not[k] = now
	t.mu.Unlock()
	return false
}
