package config

import (
	"errors"
	"fmt"
)

var (
	// ErrUnknownKey is wrapped by a *KeyError for a file key no setting has.
	ErrUnknownKey = errors.New("unknown key")
	// ErrInvalidValue is wrapped by a *KeyError for a value that does not
	// parse or is out of range.
	ErrInvalidValue = errors.New("invalid value")
)

// KeyError is a problem with one configuration key.
type KeyError struct {
	// Key is the snake_case key, as written in the YAML file.
	Key string
	// File is the configuration file the key came from; empty when the
	// value may have come from a flag, the environment or a default.
	File string
	// Reason says what is wrong, for people.
	Reason string
	// Err is ErrUnknownKey or ErrInvalidValue.
	Err error
}

func (e *KeyError) Error() string {
	msg := "config: "
	if e.File != "" {
		msg += e.File + ": "
	}
	msg += fmt.Sprintf("%s %q", e.Err, e.Key)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

func (e *KeyError) Unwrap() error { return e.Err }
