package bridge

import "encoding/json"

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
