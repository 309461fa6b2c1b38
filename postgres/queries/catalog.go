package queries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ownedDoc reads the document of the owner's row id in table into T; a
// missing row and another owner's are both a *NotFoundError of entity.
func ownedDoc[T any](ctx context.Context, db DB, table, entity string, owner, id uuid.UUID) (T, int64, error) {
	var (
		out     T
		raw     []byte
		version int64
	)
	err := db.QueryRow(ctx, "SELECT doc, version FROM "+table+" WHERE id = $1 AND owner_id = $2", id, owner).
		Scan(&raw, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, 0, &NotFoundError{Entity: entity, ID: id.String()}
	}
	if err != nil {
		return out, 0, fmt.Errorf("queries: %s %s: %w", entity, id, err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, 0, fmt.Errorf("queries: stored %s %s unreadable: %w", entity, id, err)
	}
	return out, version, nil
}

// docPage counts the rows of table matching where and returns one page
// of their documents in order, each decoded into D and turned into a T by
// row. The document's version is given to row beside it.
func docPage[D, T any](ctx context.Context, db DB, table, where, order string, args []any, paging Paging, row func(D, int64) T) (Page[T], error) {
	paging = paging.normalize()
	page := Page[T]{Items: []T{}, Page: paging.Page, PageSize: paging.PageSize}
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE "+where, args...).Scan(&page.Total); err != nil {
		return page, fmt.Errorf("queries: count %s: %w", table, err)
	}
	if page.Total <= paging.offset() {
		return page, nil
	}
	n := len(args)
	sql := fmt.Sprintf("SELECT doc, version FROM %s WHERE %s ORDER BY %s LIMIT $%d OFFSET $%d", table, where, order, n+1, n+2)
	rows, err := db.Query(ctx, sql, append(args, paging.PageSize, paging.offset())...)
	if err != nil {
		return page, fmt.Errorf("queries: list %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			raw     []byte
			version int64
			doc     D
		)
		if err := rows.Scan(&raw, &version); err != nil {
			return page, fmt.Errorf("queries: list %s: %w", table, err)
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return page, fmt.Errorf("queries: stored %s row unreadable: %w", table, err)
		}
		page.Items = append(page.Items, row(doc, version))
	}
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("queries: list %s: %w", table, err)
	}
	return page, nil
}

// activeFilter adds "AND is_active = $n" to where when isActive is set.
func activeFilter(where string, args []any, isActive *bool) (string, []any) {
	if isActive == nil {
		return where, args
	}
	args = append(args, *isActive)
	return fmt.Sprintf("%s AND is_active = $%d", where, len(args)), args
}
