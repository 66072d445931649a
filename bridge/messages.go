package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowbridge/flowbridge/bridge/workspace"
)

// What users read. Short sentences that say what happened and what to do; the
// details go to the log.
const (
	msgQueueFull      = "I'm still working on your earlier messages here (%d waiting). Please wait for those replies, then try again."
	msgQueueFullMore  = "I'm still working on your earlier messages here (%d waiting), so I did not take the %d you sent since. Please wait for those replies, then send again what still matters."
	msgInFlight       = "flowbridge is busy with many requests right now. Please try again in a moment."
	msgTooLong        = "That message is too long for me (%d bytes; the limit is %d). Please shorten it."
	msgStoreFailed    = "flowbridge could not read its session store. Please tell an admin."
	msgNoAgent        = "No agent is configured. Please tell an admin."
	msgAgentChannel   = "The agent *%s* is not available in this channel."
	msgChatRate       = "You're sending messages faster than I can take them. Please try again in %s."
	msgFlowRate       = "You're running flows faster than allowed. Please try again in %s."
	msgSessionRenewed = "_The previous conversation had expired, so a new one was started._"
	msgEmptyReply     = "_The agent sent an empty reply._"
	msgCutOff         = "flowbridge is shutting down and your request was cut off before it finished. Please send it again in a minute."
	msgNotSaved       = "flowbridge cannot save anything right now, so it did not take this. Please try again in a few minutes; if it keeps happening, tell an admin."
	msgRestartedChat  = "flowbridge restarted while it was answering your message, so there is no answer to it. Please send it again."
	msgRestartedFlow  = "flowbridge restarted while %s was running. It may or may not have run: check before running it again."
	// msgRestartedSchedule is msgRestartedFlow for a scheduled run, told in
	// its channel: nobody there ran it.
	msgRestartedSchedule = "flowbridge restarted while the schedule *%s* was running *%s*. It may or may not have run: check before running it by hand; the schedule goes on at its next time."
	msgNotDelivered      = "flowbridge could not post the answer to your message (the platform kept refusing it). Please send it again."
	msgGreeting          = "Hi! I'm *%s*. Ask me anything, or pick a suggestion."
	// msgContextLead tells the agent what the user has open beside the conversation.
	msgContextLead = "[Context: %s]\n\n"
	// The earlier messages of the thread a conversation starts in, as the
	// agent reads them before the first message (thread.go).
	msgThreadLead    = "[Earlier in this thread, oldest first:]\n"
	msgThreadLeftOut = "- (%d earlier messages left out)\n"
	msgThreadEnd     = "[End of the earlier messages. The new message follows.]\n\n"
	msgThreadSelf    = "%s (you, an earlier answer)"
	msgThreadFiles   = "[files: %s]"
	msgThreadUnknown = "someone"

	// msgHelpTalk opens /agent help on chat platforms (see Talker).
	msgHelpTalk     = "Mention me, DM me or write in a thread I'm in; each thread is its own conversation."
	msgHelpInThread = "In a thread, write `!agent …` or `!flow …` instead of the slash command."

	msgThinking     = "_Thinking… %s so far._"
	msgVoteThanks   = "Thanks for the feedback: you rated this answer %s."
	msgVoteSame     = "You rated this answer %s already."
	msgVoteChanged  = "Changed your rating of this answer to %s."
	msgVoteNotSaved = "Your feedback could not be saved. Please try again in a moment."
	msgVoteUnknown  = "That answer can no longer be rated."

	// A flow's request for approval (approval.go): asked in the
	// conversation, answered by an approver, told to its requester.
	msgApprovalAsk     = "%s asks to run *%s*"
	msgApprovalWho     = "May approve: %s. This request stays open for %s."
	msgApprovalOthers  = "Only these may approve or refuse this run of *%s*: %s."
	msgApprovalOwn     = "You asked for this run of *%s*, so someone else must approve it: %s."
	msgApprovalGone    = "This request has expired or was already answered. Ask for the flow again if it is still needed."
	msgApprovalLate    = "This request expired before it was answered: *%s* was not run."
	msgApprovedNote    = "Approved by %s at %s. "
	msgApprovedTold    = "Your request to run *%s* was approved by %s. It runs now; its result is posted in the conversation."
	msgRefusedNote     = "Refused by %s at %s: *%s* was not run."
	msgRefusedTold     = "Your request to run *%s* was refused by %s, so it was not run."
	msgExpiredTold     = "Nobody approved your request to run *%s* within %s, so it was not run. Run the flow again to ask anew."
	msgApprovalNoFlow  = "The flow *%s* is no longer offered, so it was not run."
	msgApprovalNoRight = "%s may no longer run *%s*, so it was not run."

	msgScheduleNoFlow  = "The schedule *%s* could not run: the flow *%s* is no longer configured. Please tell an admin."
	msgScheduleInvalid = "The schedule *%s* could not run: %s Please tell an admin."
	msgScheduleBusy    = "The schedule *%s* did not run this time: all %d runs that schedules may have at once were still under way until its next run was due. Please tell an admin (bridge.max_scheduled_in_flight)."
	msgScheduleLate    = "The schedule *%s* did not make its run of %s: flowbridge was down until after its next run was due, and a run is not made late. The schedule goes on at its next time."
	msgScheduleMissed  = "The schedule *%s* missed its run at %s while flowbridge was down%s; it was not run late. The next run is at %s."
)

// msgBadAddressTail ends the sentence for a workspace address that leads
// nowhere (no such host, connection refused): waiting does not help.
const msgBadAddressTail = "Most likely a configuration problem (no such host, or nothing listening) that trying again will not fix: please tell an admin (`flowbridge check-config -online` shows why)."

// chatErrorText is the user's sentence for a failed chat message.
func chatErrorText(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return msgCutOff
	}
	var se *sessionError
	switch {
	case errors.As(err, &se) && errors.Is(err, workspace.ErrNotFound):
		return "The agent could not be found in the AI workspace (its UUID may be wrong). Please tell an admin."
	case errors.Is(err, workspace.ErrNotFound):
		return "The agent's conversation could not be found, even after starting a new one. Please try again."
	case errors.Is(err, context.DeadlineExceeded):
		return "The agent did not answer in time. Your message may still have reached it; ask again in a moment."
	}
	if errors.Is(err, workspace.ErrRateLimited) || errors.Is(err, workspace.ErrUnavailable) {
		return "The AI workspace is busy and did not answer." + retryNote(err)
	}
	if errors.Is(err, workspace.ErrChatFailed) {
		return "The AI workspace did not take your message. Please try again."
	}
	return commonErrorText(err, "the agent")
}

// retryNote says when to try again, when the API said.
func retryNote(err error) string {
	var apiErr *workspace.APIError
	if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
		return fmt.Sprintf(" Please try again in %s.", humanWait(apiErr.RetryAfter))
	}
	return " Please try again in a moment."
}

// notRunNote qualifies a flow the API refused: a 429 says it did not take
// the request; a 503 proves nothing.
func notRunNote(err error) string {
	if errors.Is(err, workspace.ErrRateLimited) {
		return ", so it was not run"
	}
	return " (it most likely did not run; check before running it again)"
}

func statusOf(err error) string {
	var ff *workspace.FlowFailedError
	if errors.As(err, &ff) {
		return ff.Status
	}
	return "unknown"
}

// flowErrorText is the user's sentence for a failed flow run.
func flowErrorText(ctx context.Context, err error, flow string, timeout time.Duration) string {
	if ctx.Err() != nil {
		return msgCutOff
	}
	switch {
	case errors.Is(err, workspace.ErrTimeout):
		return fmt.Sprintf("The flow *%s* did not finish within %s. It may still be running in the AI workspace; check there before running it again.", flow, humanDuration(timeout))
	case errors.Is(err, workspace.ErrNotFound):
		return fmt.Sprintf("The flow *%s* was not found in the AI workspace (its UUID may be wrong). Please tell an admin.", flow)
	case errors.Is(err, workspace.ErrBadAddress):
		return fmt.Sprintf("The AI workspace could not be reached at its configured address, so *%s* was not run. "+msgBadAddressTail, flow)
	case errors.Is(err, workspace.ErrNotSent):
		return fmt.Sprintf("The AI workspace could not be reached, so *%s* was not run. Please try again in a moment.", flow)
	case errors.Is(err, workspace.ErrUnreachable):
		return fmt.Sprintf("The AI workspace could not be reached, or stopped answering, while running *%s*. It may or may not have run; check before running it again.", flow)
	case errors.Is(err, workspace.ErrFlowFailed):
		var ff *workspace.FlowFailedError
		if errors.As(err, &ff) && ff.Message != "" {
			return fmt.Sprintf("The flow *%s* failed (%s): %s", flow, ff.Status, ff.Message)
		}
		return fmt.Sprintf("The flow *%s* failed in the AI workspace (status %s).", flow, statusOf(err))
	case errors.Is(err, workspace.ErrRateLimited), errors.Is(err, workspace.ErrUnavailable):
		return fmt.Sprintf("The AI workspace is busy and did not take *%s*%s.%s", flow, notRunNote(err), retryNote(err))
	}
	return commonErrorText(err, "the flow "+flow)
}

func commonErrorText(err error, what string) string {
	var apiErr *workspace.APIError
	switch {
	case errors.Is(err, workspace.ErrUnauthorized):
		return "The AI workspace rejected flowbridge's API token. Please tell an admin."
	case errors.Is(err, workspace.ErrBadRequest):
		return fmt.Sprintf("The AI workspace refused the request to %s as invalid.", what)
	case errors.Is(err, workspace.ErrTimeout):
		return fmt.Sprintf("The AI workspace took too long to answer for %s. Please try again.", what)
	case errors.Is(err, workspace.ErrBadAddress):
		return "The AI workspace could not be reached at its configured address. " + msgBadAddressTail
	case errors.Is(err, workspace.ErrUnreachable):
		return "The AI workspace could not be reached. Please try again in a moment."
	case errors.Is(err, workspace.ErrBadResponse):
		return fmt.Sprintf("The AI workspace sent an answer for %s that flowbridge could not read. Please tell an admin.", what)
	case errors.As(err, &apiErr):
		return fmt.Sprintf("The AI workspace answered with an error (HTTP %d) for %s. Please try again later.", apiErr.Status, what)
	}
	return fmt.Sprintf("Something went wrong with %s. Please try again; if it keeps happening, tell an admin.", what)
}

// humanDuration writes a duration as people say it: "45 seconds",
// "5 minutes", "2 minutes 30 seconds", "1 hour".
func humanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Second {
		d = time.Second
	}
	unit := func(n int64, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %ss", n, one)
	}
	h, m, s := int64(d/time.Hour), int64(d%time.Hour/time.Minute), int64(d%time.Minute/time.Second)
	var parts []string
	if h > 0 {
		parts = append(parts, unit(h, "hour"))
	}
	if m > 0 {
		parts = append(parts, unit(m, "minute"))
	}
	if s > 0 && h == 0 {
		parts = append(parts, unit(s, "second"))
	}
	return strings.Join(parts, " ")
}

// humanWait is humanDuration for a wait, rounded up: "1 second" rather than
// "0 seconds" for 300 ms.
func humanWait(d time.Duration) string {
	return humanDuration((d + time.Second - 1).Truncate(time.Second))
}

// What a Stop press is told (stop.go), in one short line.
const (
	msgStopped     = "Stopped. Nothing more of that answer will be posted."
	msgStoppedFlow = "Stopped *%s*. The flow may still finish inside the workspace; its result will not be posted here."
	msgStoppedHere = "Stopped."
	msgStopAgain   = "That was stopped already."
	msgStopLate    = "That has finished already; there is nothing to stop."
	msgStopNothing = "Nothing of yours is running here."
	msgStopRefused = "Only the person who asked, or a flowbridge admin, can stop that."
)
