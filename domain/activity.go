package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// MaxActivitySummaryChars bounds the one-line summary of an activity item.
const MaxActivitySummaryChars = 200

// ActivityItemType classifies an entry of the activity stream.
type ActivityItemType string

// The activity item types. ToolPermission and UnknownEvent go beyond the
// first model: permission requests are part of the timeline, and raw
// events the translation layer does not know are recorded, never dropped.
const (
	ActivityMessage          ActivityItemType = "Message"
	ActivityToolCallStart    ActivityItemType = "ToolCallStart"
	ActivityToolCallEnd      ActivityItemType = "ToolCallEnd"
	ActivitySubAgentSpawn    ActivityItemType = "SubAgentSpawn"
	ActivitySubAgentComplete ActivityItemType = "SubAgentComplete"
	ActivityPlanModeEnter    ActivityItemType = "PlanModeEnter"
	ActivityPlanModeExit     ActivityItemType = "PlanModeExit"
	ActivityUserQuestion     ActivityItemType = "UserQuestion"
	ActivityUserAnswer       ActivityItemType = "UserAnswer"
	ActivityTodoUpdate       ActivityItemType = "TodoUpdate"
	ActivityStatusChange     ActivityItemType = "StatusChange"
	ActivityMetricsUpdate    ActivityItemType = "MetricsUpdate"
	ActivitySkillEnabled     ActivityItemType = "SkillEnabled"
	ActivityHandoffInitiated ActivityItemType = "HandoffInitiated"
	ActivityToolPermission   ActivityItemType = "ToolPermission"
	ActivityUnknownEvent     ActivityItemType = "UnknownEvent"
)

var activityTypes = []ActivityItemType{
	ActivityMessage, ActivityToolCallStart, ActivityToolCallEnd, ActivitySubAgentSpawn, ActivitySubAgentComplete,
	ActivityPlanModeEnter, ActivityPlanModeExit, ActivityUserQuestion, ActivityUserAnswer, ActivityTodoUpdate,
	ActivityStatusChange, ActivityMetricsUpdate, ActivitySkillEnabled, ActivityHandoffInitiated,
	ActivityToolPermission, ActivityUnknownEvent,
}

// IsValid reports whether t is a known type.
func (t ActivityItemType) IsValid() bool { return slices.Contains(activityTypes, t) }

// ActivityItem is one line of a session's activity timeline: a short
// summary, expandable to the detail. Items are append-only values.
type ActivityItem struct {
	ID         uuid.UUID        `json:"id"`
	SessionID  uuid.UUID        `json:"sessionId"`
	SubAgentID *uuid.UUID       `json:"subAgentId,omitempty"`
	Type       ActivityItemType `json:"type"`
	Summary    string           `json:"summary"`
	Detail     string           `json:"detail,omitempty"`
	ToolName   string           `json:"toolName,omitempty"`
	Timestamp  time.Time        `json:"timestamp"`
}

// NewActivityItem validates item: ids set, known type, summary of
// 1-200 characters, tool name present for tool call items.
func NewActivityItem(item ActivityItem) (ActivityItem, error) {
	if err := requireID("id", item.ID); err != nil {
		return ActivityItem{}, err
	}
	if err := requireID("sessionId", item.SessionID); err != nil {
		return ActivityItem{}, err
	}
	if item.SubAgentID != nil {
		if err := requireID("subAgentId", *item.SubAgentID); err != nil {
			return ActivityItem{}, err
		}
	}
	if !item.Type.IsValid() {
		return ActivityItem{}, invalid("type", "unknown activity type %q", item.Type)
	}
	summary, err := requireText("summary", item.Summary, 1, MaxActivitySummaryChars)
	if err != nil {
		return ActivityItem{}, err
	}
	if (item.Type == ActivityToolCallStart || item.Type == ActivityToolCallEnd) && item.ToolName == "" {
		return ActivityItem{}, invalid("toolName", "must be set for tool call items")
	}
	item.Summary = summary
	item.SubAgentID = clonePtr(item.SubAgentID)
	item.Timestamp = item.Timestamp.UTC()
	return item, nil
}

// Summarize shortens text to a valid one-line summary: the first line,
// cut to MaxActivitySummaryChars with an ellipsis.
func Summarize(text string) string {
	return firstLine(text, MaxActivitySummaryChars)
}
