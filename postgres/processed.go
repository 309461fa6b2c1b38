package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// MarkProcessed records, inside the transaction of its effects, that
// consumer handled the message id, with the result to give any repeat.
func MarkProcessed(ctx context.Context, tx pgx.Tx, consumer, messageID string, result any) error {
	body, err := json.Marshal(result)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, markProcessed, consumer, messageID, body)
	return err
}

// QueueMarkProcessed is MarkProcessed as a statement queued on b.
func QueueMarkProcessed(b *pgx.Batch, consumer, messageID string, result any) error {
	body, err := json.Marshal(result)
	if err != nil {
		return err
	}
	QueueMarkProcessedJSON(b, consumer, messageID, body)
	return nil
}

// QueueMarkProcessedJSON is QueueMarkProcessed with the result already
// encoded as JSON, for a caller that sends the same bytes elsewhere too.
func QueueMarkProcessedJSON(b *pgx.Batch, consumer, messageID string, result []byte) {
	b.Queue(markProcessed, consumer, messageID, result)
}

const markProcessed = "INSERT INTO processed_messages (consumer, message_id, result) VALUES ($1, $2, $3)"

// ProcessedResult returns the result recorded for a handled message and
// whether there is one, decoding it into T.
func ProcessedResult[T any](ctx context.Context, q Querier, consumer, messageID string) (T, bool, error) {
	var out T
	var body []byte
	err := q.QueryRow(ctx,
		"SELECT result FROM processed_messages WHERE consumer = $1 AND message_id = $2",
		consumer, messageID).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, false, nil
	}
	if err != nil {
		return out, false, err
	}
	if body != nil {
		if err := json.Unmarshal(body, &out); err != nil {
			return out, false, err
		}
	}
	return out, true, nil
}

// Querier is what both a pool and a transaction offer for reading.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// IsUniqueViolation reports whether err is Postgres's unique_violation.
func IsUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// RefusedData returns Postgres's error when err is Postgres refusing the
// data itself: SQLSTATE class 22 (data exception: a NUL character in text
// or jsonb, a value out of range) or 23 (integrity constraint violation).
// Such a statement fails the same way however often it is tried.
func RefusedData(err error) (*pgconn.PgError, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return nil, false
	}
	switch pgErr.Code[:2] {
	case "22", "23":
		return pgErr, true
	}
	return nil, false
}
