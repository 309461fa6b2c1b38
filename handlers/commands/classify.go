package commands

import (
	"errors"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/postgres"
)

// Classify turns the errors that refuse a command — the domain's typed
// errors, a missing aggregate, undecodable parameters — into the result's
// error. It returns nil for any other error, which is then retried.
func Classify(err error) *command.Error {
	if errors.Is(err, postgres.ErrNotFound) {
		return &command.Error{Kind: command.KindNotFound, Message: err.Error()}
	}
	var kinded interface{ Kind() string }
	if !errors.As(err, &kinded) {
		return nil
	}
	e := &command.Error{Kind: kinded.Kind(), Message: err.Error()}
	var field interface{ Field() string }
	if errors.As(err, &field) {
		e.Field = field.Field()
	}
	var status interface{ CurrentStatus() string }
	if errors.As(err, &status) {
		e.CurrentStatus = status.CurrentStatus()
	}
	return e
}

// badData is a command whose parameters do not decode.
type badData struct{ err error }

func (e badData) Error() string { return "invalid command data: " + e.err.Error() }
func (e badData) Kind() string  { return command.KindValidation }
func (e badData) Unwrap() error { return e.err }

// notOwner hides another owner's aggregate: to its caller it does not exist.
type notOwner struct{ what string }

func (e notOwner) Error() string { return e.what + " not found" }
func (e notOwner) Kind() string  { return command.KindNotFound }
