package redislimit

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ParseURL checks a store URL as New reads it and returns go-redis's
// options for it. Its errors never repeat the URL, which may hold a
// password.
func ParseURL(raw string) (*redis.Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a URL; want redis://HOST:PORT/DB or rediss://HOST:PORT/DB")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("scheme %q: want redis:// or rediss:// (TLS)", u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, errors.New("no host; want redis://HOST:PORT/DB")
	}
	if p := u.Port(); p != "" {
		if _, err := net.LookupPort("tcp", p); err != nil {
			return nil, fmt.Errorf("port %q is not a port number", p)
		}
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "redis: "))
	}
	return o, nil
}

// Redacted is the URL raw without its password, for logs and /readyz.
func Redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(malformed)"
	}
	return u.Redacted()
}
