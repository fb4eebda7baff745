package await

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	Until(t, 5*time.Second, "three counts", func() bool { return n.Load() == 3 })
	i := 0
	NoError(t, 5*time.Second, "a third try", func() error {
		i++
		if i < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	j := 0
	if err := Try(5*time.Second, func() error {
		j++
		if j < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("Try = %v", err)
	}
	if err := Try(5*time.Millisecond, func() error { return errors.New("never") }); err == nil || err.Error() != "never" {
		t.Fatalf("Try = %v, want never", err)
	}
	ch := make(chan int, 1)
	ch <- 7
	if got := Receive(t, time.Second, "a seven", ch); got != 7 {
		t.Fatalf("Receive = %d", got)
	}
	Holds(t, 10*time.Millisecond, "true", func() bool { return true })
}
