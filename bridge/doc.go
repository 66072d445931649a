// Package bridge is flowbridge's platform-neutral core: it routes chat events to
// AI Agent sessions and commands to AI Flows, in order per conversation.
package bridge
