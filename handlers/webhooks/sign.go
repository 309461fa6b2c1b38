package webhooks

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The headers of the Standard Webhooks specification.
const (
	HeaderID        = standardwebhooks.HeaderWebhookID
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	HeaderSignature = standardwebhooks.HeaderWebhookSignature
)

// sign sets the Standard Webhooks headers of a delivery of body with the
// event id id at at: one v1 signature per secret, space-separated, so a
// receiver holding either secret of a rotation accepts it.
func sign(h http.Header, id string, at time.Time, body []byte, secrets []string) error {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return err
		}
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			return err
		}
		sigs = append(sigs, sig)
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
	return nil
}
