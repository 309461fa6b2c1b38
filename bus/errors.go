package bus

import "errors"

// PermanentError marks a handler error that retrying cannot fix (a malformed
// message, a rule that will never pass). Run terminates the message and
// dead-letters it at once instead of redelivering it.
type PermanentError struct {
	Err error
}

// Permanent wraps err so that Run dead-letters the message without retrying.
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Error returns the wrapped error's message, marked as permanent.
func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// IsPermanent reports whether err or an error it wraps is a PermanentError.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}
