package domain

import (
	"encoding/base64"
	"slices"
	"time"
)

// WebhookTestEventType is the type of the event a webhook's owner sends
// to check their receiver ("send test event"); no aggregate raises it.
const WebhookTestEventType = "webhook_test"

// WebhookSecretPrefix starts every webhook signing secret, as the Standard
// Webhooks specification writes them (whsec_<base64 key>).
const WebhookSecretPrefix = "whsec_"

// WebhookSecretBytes is how many random bytes a signing secret's key has.
const WebhookSecretBytes = 32

// DefaultWebhookDisableAfter is how many deliveries in a row may fail (each
// after its last retry) before their webhook is disabled.
const DefaultWebhookDisableAfter = 5

// DefaultWebhookRotationGrace is how long the previous secret of a rotated
// webhook still signs its deliveries, beside the new one.
const DefaultWebhookRotationGrace = 24 * time.Hour

// DefaultWebhookRetrySchedule is the wait before each retry of a failed
// delivery: the first attempt is at once, then these, about 28 hours in
// all; after the last one the delivery has failed.
var DefaultWebhookRetrySchedule = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// webhookJitter is the share of a retry's wait that is random, so that the
// deliveries that failed together do not all come back at once.
const webhookJitter = 0.2

// WebhookEventTypes are the event types a webhook may subscribe to: every
// event of a session.
func WebhookEventTypes() []string {
	var out []string
	for _, t := range EventTypes() {
		if AggregateTypeOf(t) == AggregateSession {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// ValidateWebhookEventTypes checks the event types a webhook subscribes
// to: each a session's event type, once. None means every one.
func ValidateWebhookEventTypes(types []string) error {
	known := WebhookEventTypes()
	for i, t := range types {
		if !slices.Contains(known, t) {
			return invalid("eventTypes", "%q is not an event type of a session", t)
		}
		if slices.Contains(types[:i], t) {
			return invalid("eventTypes", "%q is named twice", t)
		}
	}
	return nil
}

// WebhookWants reports whether a webhook subscribed to types wants an
// event of type t (no types: every event).
func WebhookWants(types []string, t string) bool {
	return len(types) == 0 || slices.Contains(types, t)
}

// WebhookRetryDelay is how long to wait after the attempts-th failed
// attempt of a delivery before the next one, with schedule's waits and
// random (in [0, 1)) spreading each by ±20%; ok is false when the schedule
// is exhausted and the delivery has failed.
func WebhookRetryDelay(schedule []time.Duration, attempts int, random float64) (delay time.Duration, ok bool) {
	if attempts < 1 || attempts > len(schedule) {
		return 0, false
	}
	base := schedule[attempts-1]
	spread := float64(base) * webhookJitter * (2*random - 1)
	return base + time.Duration(spread), true
}

// NewWebhookSecret writes a signing secret from WebhookSecretBytes random
// bytes.
func NewWebhookSecret(random []byte) string {
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(random)
}
