package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioDrainTimeout bounds how long ServeStdio, once its input has ended,
// waits for the answers to the requests it has read.
const StdioDrainTimeout = 2 * time.Minute

// maxCountedLine bounds the line the stdio transport's counting keeps
// while it waits for its end; a longer one is passed on uncounted.
const maxCountedLine = 1 << 20

// ServeStdio serves one MCP session over in and out, newline-delimited
// JSON-RPC, until in ends or ctx is done. When in ends it first answers
// the requests it has read (up to StdioDrainTimeout), so that a client
// that writes its requests and closes its end, such as a shell pipe,
// gets every answer.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	d := &drain{quiet: make(chan struct{}, 1)}
	r := &countingReader{r: in, d: d, ctx: ctx}
	w := &countingWriter{w: out, d: d, log: s.opts.Logger}
	return s.sdk.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(r), Writer: w})
}

// drain counts the requests read and not yet answered.
type drain struct {
	mu      sync.Mutex
	pending int
	quiet   chan struct{} // signalled when pending falls to 0
}

func (d *drain) add(n int) {
	d.mu.Lock()
	d.pending += n
	zero := d.pending <= 0
	d.mu.Unlock()
	if zero {
		select {
		case d.quiet <- struct{}{}:
		default:
		}
	}
}

func (d *drain) idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pending <= 0
}

// lines calls f with every complete line of p, keeping the incomplete rest
// in *partial (up to maxCountedLine).
func lines(partial *[]byte, p []byte, f func([]byte)) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(*partial)+len(p) <= maxCountedLine {
				*partial = append(*partial, p...)
			} else {
				*partial = (*partial)[:0]
			}
			return
		}
		line := p[:i]
		if len(*partial) > 0 {
			line = append(*partial, line...)
			*partial = (*partial)[:0]
		}
		f(line)
		p = p[i+1:]
	}
}

// message is what the counting reads of a JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func parse(line []byte) (m message, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &m) != nil {
		return m, false
	}
	return m, len(m.ID) > 0 && string(m.ID) != "null"
}

// countingReader counts the requests (messages with a method and an id)
// it reads, and holds back the end of its input until they are answered.
type countingReader struct {
	r       io.Reader
	d       *drain
	ctx     context.Context
	partial []byte
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	lines(&c.partial, p[:n], func(line []byte) {
		if m, ok := parse(line); ok && m.Method != "" {
			c.d.add(1)
		}
	})
	if err == io.EOF && n == 0 {
		t := time.NewTimer(StdioDrainTimeout)
		defer t.Stop()
		for !c.d.idle() {
			select {
			case <-c.d.quiet:
			case <-t.C:
				return 0, err
			case <-c.ctx.Done():
				return 0, err
			}
		}
	}
	return n, err
}

// countingWriter counts the answers (messages with an id and no method)
// it writes.
type countingWriter struct {
	w       io.Writer
	log     *slog.Logger
	d       *drain
	partial []byte
}

func (c *countingWriter) Write(p []byte) (int, error) {
	// The SDK writes each message, and its newline, in one Write.
	if msg, ok := bytes.CutSuffix(p, []byte("\n")); ok && len(c.partial) == 0 && len(msg) > 0 && msg[0] == '{' {
		if safe, ok := safeReply(msg, c.log); ok {
			if _, err := c.w.Write(append(safe, '\n')); err != nil {
				return 0, err
			}
			if m, ok := parse(safe); ok && m.Method == "" {
				c.d.add(-1)
			}
			return len(p), nil
		}
	}
	n, err := c.w.Write(p)
	lines(&c.partial, p[:n], func(line []byte) {
		if m, ok := parse(line); ok && m.Method == "" {
			c.d.add(-1)
		}
	})
	return n, err
}

func (c *countingWriter) Close() error { return nil }
