package config

import (
	"net/url"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// masked replaces the value of a secret setting in Settings.YAML.
const masked = "********"

// YAML renders s as a configuration file, every key in the order of the
// docs, with the values of secret settings masked. Loading it again gives
// s back, except for masked values.
func (s Settings) YAML() ([]byte, error) {
	return renderYAML(s, keys())
}

func renderYAML(s Settings, ks []key) ([]byte, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range ks {
		var val any
		switch p := k.field(&s).(type) {
		case *time.Duration:
			val = p.String()
		case *string:
			val = *p
			if k.secret && *p != "" {
				val = masked
			}
			if k.secretURL && *p != "" {
				val = maskURL(*p)
			}
		case *[]string:
			val = *p
			if *p == nil {
				val = []string{}
			}
		case *[]Backend:
			val = *p
			if *p == nil {
				val = []Backend{}
			}
		case *[]JWT:
			val = *p
			if *p == nil {
				val = []JWT{}
			}
		case *map[string]string:
			val = *p
			if *p == nil {
				val = map[string]string{}
			}
		case *int:
			val = *p
		case *int64:
			val = *p
		case *float64:
			val = *p
		case *bool:
			val = *p
		}
		node := new(yaml.Node)
		if err := node.Encode(val); err != nil {
			return nil, err
		}
		parent := root
		path := strings.Split(k.name, ".")
		for _, section := range path[:len(path)-1] {
			parent = child(parent, section)
		}
		parent.Content = append(parent.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: path[len(path)-1]}, node)
	}
	return yaml.Marshal(root)
}

// child finds or adds the mapping under key in the mapping m.
func child(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	c := &yaml.Node{Kind: yaml.MappingNode}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, c)
	return c
}

// maskURL is raw with its password, if any, masked.
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return masked // unparsable: it may hold anything
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), masked)
	}
	return u.String()
}
