package api

import (
	"reflect"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentbus/agentbus/domain"
)

// streamEventSchemaName is StreamEvent's name among the document's schemas.
const streamEventSchemaName = "StreamEvent"

// schemaRef is where the document keeps its named schemas.
const schemaRef = "#/components/schemas/"

// Schema describes StreamEvent as a union of one variant per domain event,
// discriminated by type, each with its own data: a client generated from
// the document narrows on type and reads data without a cast. Variants and
// payloads are registered as named schemas, so the union stays readable.
func (StreamEvent) Schema(r huma.Registry) *huma.Schema {
	ref := schemaRef + streamEventSchemaName
	if _, done := r.Map()[streamEventSchemaName]; done {
		return &huma.Schema{Ref: ref}
	}
	// A USD amount is written as a decimal number (domain.USD.MarshalJSON).
	r.RegisterTypeAlias(reflect.TypeFor[domain.USD](), reflect.TypeFor[float64]())

	union := &huma.Schema{
		Description: "One domain event of a session, its queue or its chain. Its data depends on type.",
		Discriminator: &huma.Discriminator{
			PropertyName: "type",
			Mapping:      map[string]string{},
		},
	}
	// Registered first, so a recursive lookup while the variants are built
	// ends here.
	r.Map()[streamEventSchemaName] = union
	for _, typ := range domain.EventTypes() {
		ev, err := domain.DecodeEvent(typ, []byte("{}"))
		if err != nil {
			panic("api: domain event " + typ + " does not decode from {}: " + err.Error())
		}
		name := streamEventSchemaName + camel(typ)
		r.Map()[name] = &huma.Schema{
			Type:                 huma.TypeObject,
			Description:          "The domain event " + typ + ".",
			AdditionalProperties: false,
			Required:             []string{"type", "aggregate", "aggregateId", "version", "occurredAt", "data"},
			Properties: map[string]*huma.Schema{
				"type":        {Type: huma.TypeString, Enum: []any{typ}, Description: "The domain event's name.", Examples: []any{typ}},
				"aggregate":   {Type: huma.TypeString, Enum: []any{ev.AggregateType()}, Description: "The kind of aggregate the event is about.", Examples: []any{ev.AggregateType()}},
				"aggregateId": {Type: huma.TypeString, Description: "The aggregate's id; for a session's events, the session id.", Examples: []any{"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"}},
				"version":     {Type: huma.TypeInteger, Format: "int64", Description: "The aggregate's version after the event.", Examples: []any{7}},
				"occurredAt":  {Type: huma.TypeString, Format: "date-time", Description: "When the event happened.", Examples: []any{"2025-01-02T15:04:05Z"}},
				"data":        {Ref: r.Schema(reflect.TypeOf(ev), true, "").Ref, Description: "The event's payload."},
			},
		}
		variant := schemaRef + name
		union.OneOf = append(union.OneOf, &huma.Schema{Ref: variant})
		union.Discriminator.Mapping[typ] = variant
	}
	return &huma.Schema{Ref: ref}
}

// camel turns a snake_case name into CamelCase.
func camel(snake string) string {
	var b strings.Builder
	for part := range strings.SplitSeq(snake, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}
