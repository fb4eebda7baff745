// Package config turns command-line flags, BRIDGE_* environment variables
// and an optional YAML file into a plain, validated Settings value.
//
// Precedence, highest first: flag, environment, file, default. Unknown keys
// in the file and bad values anywhere are refused with an error naming the
// key. Other packages receive Settings values; none of them sees viper.
package config
