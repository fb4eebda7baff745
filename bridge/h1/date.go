package h1

import (
	"net/http"
	"sync/atomic"
	"time"
)

// date is the Date header's value for one second.
type date struct {
	unix int64
	text []byte
}

var lastDate atomic.Pointer[date]

// appendDate appends the time in the format of the Date header, formatted
// once a second.
func appendDate(b []byte) []byte {
	now := time.Now()
	d := lastDate.Load()
	if d == nil || d.unix != now.Unix() {
		d = &date{unix: now.Unix(), text: now.UTC().AppendFormat(nil, http.TimeFormat)}
		lastDate.Store(d)
	}
	return append(b, d.text...)
}
