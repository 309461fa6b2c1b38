package api

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTheDashboardsCopyOfTheDocumentIsCurrent fails when the API changed
// and the dashboard was not rebuilt from it: the dashboard's client types
// (ui/web/src/schema.d.ts) are generated from ui/web/openapi.json by
// `make ui`, so a stale copy means a dashboard that does not know a field.
func TestTheDashboardsCopyOfTheDocumentIsCurrent(t *testing.T) {
	doc, err := OpenAPIDocument(Config{})
	require.NoError(t, err)
	var want bytes.Buffer
	require.NoError(t, json.Indent(&want, doc, "", "  "))
	want.WriteByte('\n')
	got, err := os.ReadFile("../ui/web/openapi.json")
	require.NoError(t, err)
	require.True(t, bytes.Equal(want.Bytes(), got), "ui/web/openapi.json differs from the API's document: run `make ui`")
}
