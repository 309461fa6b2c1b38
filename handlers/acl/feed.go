package acl

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/feed"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// feedPublisher makes the live feed's items of what the ACL records. The
// recorder publishes each with its activity item, before the raw event's
// commands are sent, so the feed shows what the agent did before what it
// caused. The message id derives from the raw event's session and
// sequence: a redelivered raw event publishes nothing new.
type feedPublisher struct {
	owners *queries.Store
	// owner caches each session's owner, which never changes; the feed of
	// all of a caller's sessions filters on it.
	owner sync.Map
}

func newFeedPublisher(pool *pgxpool.Pool) *feedPublisher {
	return &feedPublisher{owners: queries.New(pool, domain.SessionPool{})}
}

func (f *feedPublisher) ownerOf(ctx context.Context, sessionID uuid.UUID) (string, error) {
	if o, ok := f.owner.Load(sessionID); ok {
		return o.(string), nil
	}
	o, err := f.owners.Owner(ctx, sessionID)
	if err != nil {
		return "", err
	}
	f.owner.Store(sessionID, o)
	return o, nil
}

// message makes the feed item of kind, made from the raw event at seq,
// for agents.evt.activity.<sessionId>.<kind>.
func (f *feedPublisher) message(ctx context.Context, sessionID uuid.UUID, seq uint64, kind string, at time.Time, data any) (*nats.Msg, error) {
	owner, err := f.ownerOf(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("acl: owner of %s: %w", sessionID, err)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, bus.Permanent(err)
	}
	env := bus.Envelope{
		ID:          uuid.NewSHA1(commandNamespace, []byte(sessionID.String()+"/feed/"+strconv.FormatUint(seq, 10))).String(),
		Type:        kind,
		Aggregate:   feed.Aggregate,
		AggregateID: sessionID.String(),
		OwnerID:     owner,
		OccurredAt:  at,
		Data:        raw,
	}
	msg, err := bus.NewMsg(ctx, bus.EventSubject(feed.Aggregate, sessionID.String(), kind), env)
	if err != nil {
		return nil, bus.Permanent(err)
	}
	return msg, nil
}

// feedItem is the feed's view of a recorded activity item: the tool calls,
// their results and the assistant's text get their own kinds, with what a
// live view needs (a call's input as an object); everything else is the
// item as recorded.
func feedItem(ev protocol.RawEvent, a domain.ActivityItem, toolUseID string) (string, any) {
	sub := ""
	if a.SubAgentID != nil {
		sub = a.SubAgentID.String()
	}
	switch {
	case ev.Type == protocol.EventAssistantMessage && a.Type == domain.ActivityMessage:
		var d protocol.AssistantMessage
		if json.Unmarshal(ev.Data, &d) == nil && d.BlockType == "text" {
			return feed.KindAssistantText, feed.LiveAssistantText{SessionID: a.SessionID.String(), ItemID: a.ID.String(),
				MessageID: d.MessageID, Text: d.Text, SubAgentID: sub, OccurredAt: a.Timestamp}
		}
	case ev.Type == protocol.EventAssistantMessage && a.Type != domain.ActivityUnknownEvent:
		// Every tool_use block is a call, the special tools (TodoWrite,
		// AskUserQuestion, plan mode) too: a live view pairs it with its
		// result.
		var d protocol.AssistantMessage
		if json.Unmarshal(ev.Data, &d) == nil && d.BlockType == "tool_use" {
			input := map[string]any{}
			_ = json.Unmarshal(d.Input, &input)
			return feed.KindToolCall, feed.LiveToolCall{SessionID: a.SessionID.String(), ItemID: a.ID.String(), MessageID: d.MessageID,
				ToolUseID: d.ToolUseID, ToolName: d.ToolName, Input: input, SubAgentID: sub, OccurredAt: a.Timestamp}
		}
	case ev.Type == protocol.EventToolResult && a.Type == domain.ActivityToolCallEnd:
		var d protocol.ToolResult
		if json.Unmarshal(ev.Data, &d) == nil {
			return feed.KindToolResult, feed.LiveToolResult{SessionID: a.SessionID.String(), ItemID: a.ID.String(), ToolUseID: toolUseID,
				ToolName: a.ToolName, Content: d.Content, IsError: d.IsError, SubAgentID: sub, OccurredAt: a.Timestamp}
		}
	}
	return feed.KindActivity, feed.LiveActivity{SessionID: a.SessionID.String(), ItemID: a.ID.String(), Type: string(a.Type), RawType: ev.Type,
		Summary: a.Summary, Detail: a.Detail, ToolName: a.ToolName, SubAgentID: sub, OccurredAt: a.Timestamp}
}

// textDelta is the feed item of a text_delta raw event, which is not
// recorded: the finished assistant_message is the record.
func textDelta(ev protocol.RawEvent, sessionID uuid.UUID, at time.Time) (feed.LiveTextDelta, error) {
	d, err := decode[protocol.TextDelta](ev)
	if err != nil {
		return feed.LiveTextDelta{}, err
	}
	return feed.LiveTextDelta{SessionID: sessionID.String(), MessageID: d.MessageID, Index: d.Index, Text: d.Text, OccurredAt: at}, nil
}
