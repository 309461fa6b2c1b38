package acl

// Writes is how many writes the worker's recorder made.
func (w *Worker) Writes() int64 { return w.rec.writes.Load() }
