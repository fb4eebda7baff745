package bridge

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Headers by which a client asks for a call timeout other than
// Options.CallTimeout, for every call of one HTTP request. The bridge
// honours up to Options.MaxCallTimeout; when both are sent, the shorter
// wins.
const (
	// GRPCTimeoutHeader takes gRPC's wire format: up to 8 digits and a
	// unit, H, M, S, m (milliseconds), u (microseconds) or n
	// (nanoseconds), such as "500m" or "2S".
	GRPCTimeoutHeader = "Grpc-Timeout"
	// TimeoutHeader takes a Go duration such as "250ms" or "1m30s", or a
	// number of seconds such as "1.5".
	TimeoutHeader = "X-Request-Timeout"
)

var errBadTimeout = errors.New("want a positive timeout")

// askedTimeout reads the timeout h asks for, uncapped: the engine holds
// it to MaxCallTimeout (dispatch's deadline). ok is false when h asks for
// none; err names the bad header.
func (s *Server) askedTimeout(h http.Header) (d time.Duration, ok bool, err error) {
	for _, hd := range [...]struct {
		name  string
		parse func(string) (time.Duration, error)
	}{{GRPCTimeoutHeader, ParseGRPCTimeout}, {TimeoutHeader, parseDuration}} {
		v := h.Get(hd.name)
		if v == "" {
			continue
		}
		got, err := hd.parse(v)
		if err != nil {
			return 0, false, errors.New("the " + hd.name + " header is not a valid timeout: " + err.Error())
		}
		if !ok || got < d {
			d, ok = got, true
		}
	}
	return d, ok, nil
}

// ParseGRPCTimeout parses a timeout in gRPC's wire format: 1 to 8 digits
// followed by H, M, S, m, u or n.
func ParseGRPCTimeout(v string) (time.Duration, error) {
	if len(v) < 2 || len(v) > 9 {
		return 0, errors.New("want 1 to 8 digits and a unit (H, M, S, m, u, n)")
	}
	n, err := strconv.ParseUint(v[:len(v)-1], 10, 64)
	if err != nil || v[0] == '+' {
		return 0, errors.New("want 1 to 8 digits and a unit (H, M, S, m, u, n)")
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, errors.New("unknown unit " + strconv.Quote(v[len(v)-1:]) + "; want H, M, S, m, u or n")
	}
	if n > uint64(math.MaxInt64/unit) {
		return math.MaxInt64, nil // 8 digits of hours overflow: as good as no deadline
	}
	return time.Duration(n) * unit, nil
}

// parseDuration parses the value of TimeoutHeader.
func parseDuration(v string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if !(f > 0) || f > float64(1<<62)/float64(time.Second) { // NaN too
			return 0, errBadTimeout
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New(`want a duration such as "250ms" or a number of seconds`)
	}
	if d <= 0 {
		return 0, errBadTimeout
	}
	return d, nil
}
