package postgres

import "errors"

// ErrVersionConflict means the aggregate changed since it was loaded: the
// caller reloads it and tries again.
var ErrVersionConflict = errors.New("aggregate changed concurrently")

// ErrNotFound means no row has the requested id.
var ErrNotFound = errors.New("not found")
