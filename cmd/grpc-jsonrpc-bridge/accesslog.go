package main

import (
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// accessFlushEvery bounds how long an access log line waits in the buffer.
const accessFlushEvery = 100 * time.Millisecond

// accessBufferBytes is the most the access log holds before writing.
const accessBufferBytes = 32 << 10

// newAccessLog returns the logger of one line per call, in the format and
// level of s, or nil when the access log is off. Its lines are buffered and
// written at least every accessFlushEvery, so that a busy bridge makes one
// write system call per batch of lines rather than one per call. close
// writes what is left; call it once the HTTP server has stopped.
func newAccessLog(s config.Settings, w io.Writer) (log *slog.Logger, close func(), err error) {
	if !s.AccessLog {
		return nil, func() {}, nil
	}
	fw := newFlushWriter(w, accessFlushEvery)
	log, err = newLogger(s, fw)
	if err != nil {
		fw.Close()
		return nil, nil, err
	}
	return log, fw.Close, nil
}

// flushWriter buffers writes to w and writes them out when accessBufferBytes
// are waiting, every interval, and on Close.
type flushWriter struct {
	w    io.Writer
	mu   sync.Mutex
	buf  []byte
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newFlushWriter(w io.Writer, every time.Duration) *flushWriter {
	f := &flushWriter{w: w, stop: make(chan struct{}), done: make(chan struct{})}
	go f.loop(every)
	return f
}

func (f *flushWriter) loop(every time.Duration) {
	defer close(f.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			f.flush()
		case <-f.stop:
			f.flush()
			return
		}
	}
}

// Write keeps p (slog writes one whole line per call) for the next flush.
func (f *flushWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(f.buf, p...)
	if len(f.buf) >= accessBufferBytes {
		f.flushLocked()
	}
	return len(p), nil
}

func (f *flushWriter) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushLocked()
}

func (f *flushWriter) flushLocked() {
	if len(f.buf) == 0 {
		return
	}
	_, _ = f.w.Write(f.buf) // nowhere to report a failing log
	f.buf = f.buf[:0]
}

// Close stops the flusher and writes what is left. It is safe to call
// twice.
func (f *flushWriter) Close() {
	f.once.Do(func() { close(f.stop) })
	<-f.done
}
