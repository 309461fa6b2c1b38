package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"

	"github.com/agentbus/agentbus/api"
)

// runOpenAPI prints the API's OpenAPI 3.1 document (JSON) to stdout.
func runOpenAPI(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("openapi", flag.ExitOnError)
	_ = fs.Parse(args)
	doc, err := api.OpenAPIDocument(api.Config{})
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = out.WriteTo(os.Stdout)
	return err
}
