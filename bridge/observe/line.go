package observe

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// NewLineHandler is a slog handler that writes what slog.NewTextHandler
// (json false) or slog.NewJSONHandler (json true) with opts writes, byte
// for byte, for a fraction of the cost on the records of the access log:
// records without groups whose attributes are strings, integers, finite
// floats or booleans. It hands every other record to slog's handler. opts
// with AddSource or ReplaceAttr make it slog's handler.
func NewLineHandler(w io.Writer, json bool, opts *slog.HandlerOptions) slog.Handler {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	var std slog.Handler
	if json {
		std = slog.NewJSONHandler(w, opts)
	} else {
		std = slog.NewTextHandler(w, opts)
	}
	if opts.AddSource || opts.ReplaceAttr != nil {
		return std
	}
	level := opts.Level
	if level == nil {
		level = slog.LevelInfo
	}
	return &lineHandler{std: std, w: w, json: json, level: level}
}

type lineHandler struct {
	std   slog.Handler
	mu    sync.Mutex // as slog's handlers: one Write a record, whole
	w     io.Writer
	json  bool
	level slog.Leveler
}

var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler { return h.std.WithAttrs(as) }

func (h *lineHandler) WithGroup(name string) slog.Handler { return h.std.WithGroup(name) }

func (h *lineHandler) Handle(ctx context.Context, r slog.Record) error {
	simple := true
	r.Attrs(func(a slog.Attr) bool {
		switch a.Value.Kind() {
		case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindBool:
		case slog.KindFloat64:
			f := a.Value.Float64()
			simple = !math.IsNaN(f) && !math.IsInf(f, 0)
		default:
			simple = false
		}
		if a.Key == "" {
			simple = false
		}
		return simple
	})
	if !simple || h.json && r.Time.Year() >= 10000 || h.json && r.Time.Year() < 0 {
		return h.std.Handle(ctx, r)
	}
	bp := linePool.Get().(*[]byte)
	b := (*bp)[:0]
	if h.json {
		b = h.appendJSON(b, r)
	} else {
		b = h.appendText(b, r)
	}
	h.mu.Lock()
	_, err := h.w.Write(b)
	h.mu.Unlock()
	if cap(b) <= 16<<10 {
		*bp = b
		linePool.Put(bp)
	}
	return err
}

func (h *lineHandler) appendText(b []byte, r slog.Record) []byte {
	if !r.Time.IsZero() {
		b = append(b, "time="...)
		b = appendRFC3339Millis(b, r.Time.Round(0))
		b = append(b, ' ')
	}
	b = append(b, "level="...)
	b = appendText(b, r.Level.String())
	b = append(b, " msg="...)
	b = appendText(b, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b = append(b, ' ')
		b = appendText(b, a.Key)
		b = append(b, '=')
		b = h.appendValue(b, a.Value)
		return true
	})
	return append(b, '\n')
}

func (h *lineHandler) appendJSON(b []byte, r slog.Record) []byte {
	b = append(b, '{')
	if !r.Time.IsZero() {
		b = append(b, `"time":"`...)
		b = r.Time.Round(0).AppendFormat(b, time.RFC3339Nano)
		b = append(b, `",`...)
	}
	b = append(b, `"level":`...)
	b = appendJSONString(b, r.Level.String())
	b = append(b, `,"msg":`...)
	b = appendJSONString(b, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b = append(b, ',')
		b = appendJSONString(b, a.Key)
		b = append(b, ':')
		b = h.appendValue(b, a.Value)
		return true
	})
	return append(b, "}\n"...)
}

// appendValue appends v, of one of the kinds Handle takes, as the text or
// the JSON handler writes it.
func (h *lineHandler) appendValue(b []byte, v slog.Value) []byte {
	switch v.Kind() {
	case slog.KindString:
		if h.json {
			return appendJSONString(b, v.String())
		}
		return appendText(b, v.String())
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindFloat64:
		if h.json {
			return appendJSONFloat(b, v.Float64())
		}
		return strconv.AppendFloat(b, v.Float64(), 'g', -1, 64)
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	}
	return b
}

// appendRFC3339Millis is slog's time format for text: RFC 3339 with
// exactly three digits of milliseconds.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...) // drop the 4th digit
}

// appendText appends s as slog's text handler does: as it is, or quoted
// when it is empty or holds a space, '=', '"', a control character, or a
// rune that is not printable or not valid.
func appendText(b []byte, s string) []byte {
	if textNeedsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

func textNeedsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == ' ' || c == '=' || c == '"' || c < 0x20 {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string as slog's JSON handler
// does: no HTML escaping; control characters, invalid UTF-8 (as
// \ufffd), U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, '\\')
			switch c {
			case '\\', '"':
				b = append(b, c)
			case '\n':
				b = append(b, 'n')
			case '\r':
				b = append(b, 'r')
			case '\t':
				b = append(b, 't')
			default:
				b = append(b, 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONFloat appends a finite f as encoding/json writes a float64.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	n := len(b)
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if m := len(b) - n; m >= 4 && b[len(b)-4] == 'e' && b[len(b)-3] == '-' && b[len(b)-2] == '0' {
			b[len(b)-2] = b[len(b)-1]
			b = b[:len(b)-1]
		}
	}
	return b
}
