package bridge

import (
	"encoding/json"
	"strings"
)

// withDetails adds the "details" member of Options.ReadinessDetails to the
// probe body, a JSON object.
func (s *Server) withDetails(body string) string {
	if s.opts.ReadinessDetails == nil {
		return body
	}
	d, err := json.Marshal(s.opts.ReadinessDetails())
	if err != nil {
		s.log.Error("cannot encode the readiness details", "error", err)
		return body
	}
	return body[:len(body)-1] + `,"details":` + string(d) + "}"
}

// keysPending is the reason /readyz gives, a JSON string, while an
// identity provider's keys have never loaded; "" when none is pending.
func (s *Server) keysPending() string {
	if s.opts.Auth == nil {
		return ""
	}
	pending := s.opts.Auth.Pending()
	if len(pending) == 0 {
		return ""
	}
	b, _ := json.Marshal("the keys of the identity provider " + strings.Join(pending, ", ") + " are not loaded yet")
	return string(b)
}
