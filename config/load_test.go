package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goreflect "reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// load runs Register, parses args and Load with only env set among the
// BRIDGE_* variables. "$FILE" in args and env values becomes the path of a
// file holding file, if file is not empty.
func load(t *testing.T, args []string, env map[string]string, file string) (Settings, string, error) {
	t.Helper()
	path := ""
	if file != "" {
		path = filepath.Join(t.TempDir(), "bridge.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range append(names(), FileFlag) {
		t.Setenv(envName(name), "")
	}
	for k, v := range env {
		t.Setenv(k, strings.ReplaceAll(v, "$FILE", path))
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	Register(fs)
	var expanded []string
	for _, a := range args {
		expanded = append(expanded, strings.ReplaceAll(a, "$FILE", path))
	}
	if err := fs.Parse(expanded); err != nil {
		t.Fatalf("parsing %v: %v", expanded, err)
	}
	s, err := Load(fs, testEngine)
	return s, path, err
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want func(*Settings)
	}{
		{name: "defaults", want: func(*Settings) {}},
		{
			name: "flags",
			args: []string{"--backend", "localhost:50051", "--listen", ":9000", "--max-body-bytes", "10",
				"--max-batch-size", "2", "--batch-parallelism", "1", "--call-timeout", "2s", "--emit-unpopulated",
				"--log-level", "debug", "--log-format", "json", "--shutdown-timeout", "1m", "--max-metadata-bytes", "4096"},
			want: func(s *Settings) {
				*s = Settings{Backend: "localhost:50051", Listen: ":9000", Limits: Limits{MaxBodyBytes: 10, MaxBatchSize: 2, BatchParallelism: 1, CallTimeout: 2 * time.Second, MaxMetadataBytes: 4096},
					EmitUnpopulated: true, LogLevel: "debug",
					LogFormat: "json", ShutdownTimeout: time.Minute, RefreshInterval: 5 * time.Minute}.withGuardDefaults().withStreamingDefaults().withTracingDefaults().withOpenRPCDefaults().withOutlierDefaults()
			},
		},
		{
			name: "env",
			env: map[string]string{"BRIDGE_BACKEND": "dns:///b:1", "BRIDGE_LISTEN": "0.0.0.0:80",
				"BRIDGE_MAX_BODY_BYTES": "1024", "BRIDGE_MAX_BATCH_SIZE": "7", "BRIDGE_BATCH_PARALLELISM": "3",
				"BRIDGE_CALL_TIMEOUT": "1m30s", "BRIDGE_EMIT_UNPOPULATED": "true", "BRIDGE_LOG_LEVEL": "warn",
				"BRIDGE_LOG_FORMAT": "json", "BRIDGE_SHUTDOWN_TIMEOUT": "5s", "BRIDGE_MAX_METADATA_BYTES": "100000"},
			want: func(s *Settings) {
				*s = Settings{Backend: "dns:///b:1", Listen: "0.0.0.0:80", Limits: Limits{MaxBodyBytes: 1024, MaxBatchSize: 7, BatchParallelism: 3, CallTimeout: 90 * time.Second, MaxMetadataBytes: 100000},
					EmitUnpopulated: true, LogLevel: "warn",
					LogFormat: "json", ShutdownTimeout: 5 * time.Second, RefreshInterval: 5 * time.Minute}.withGuardDefaults().withStreamingDefaults().withTracingDefaults().withOpenRPCDefaults().withOutlierDefaults()
			},
		},
		{
			name: "file by flag",
			args: []string{"--config", "$FILE"},
			file: "backend: b:1\nlisten: \":0\"\nmax_body_bytes: 99\nmax_batch_size: 4\nbatch_parallelism: 2\n" +
				"call_timeout: 250ms\nemit_unpopulated: true\nlog_level: error\nlog_format: json\nshutdown_timeout: 2s\n" +
				"max_metadata_bytes: 512\n",
			want: func(s *Settings) {
				*s = Settings{Backend: "b:1", Listen: ":0", Limits: Limits{MaxBodyBytes: 99, MaxBatchSize: 4, BatchParallelism: 2, CallTimeout: 250 * time.Millisecond, MaxMetadataBytes: 512},
					EmitUnpopulated: true, LogLevel: "error",
					LogFormat: "json", ShutdownTimeout: 2 * time.Second, RefreshInterval: 5 * time.Minute}.withGuardDefaults().withStreamingDefaults().withTracingDefaults().withOpenRPCDefaults().withOutlierDefaults()
			},
		},
		{
			name: "file by env",
			env:  map[string]string{"BRIDGE_CONFIG": "$FILE"},
			file: "backend: from-file:1\n",
			want: func(s *Settings) { s.Backend = "from-file:1" },
		},
		{
			name: "empty file",
			args: []string{"--config", "$FILE"},
			file: "# nothing here\n",
			want: func(*Settings) {},
		},
		{
			name: "flag over env over file over default",
			args: []string{"--config", "$FILE", "--listen", "flag:1"},
			env:  map[string]string{"BRIDGE_LISTEN": "env:1", "BRIDGE_MAX_BATCH_SIZE": "6"},
			file: "listen: file:1\nmax_batch_size: 5\nbatch_parallelism: 3\n",
			want: func(s *Settings) { s.Listen, s.MaxBatchSize, s.BatchParallelism = "flag:1", 6, 3 },
		},
		{
			name: "flag set to its default still wins",
			args: []string{"--config", "$FILE", "--max-batch-size", "100"},
			env:  map[string]string{"BRIDGE_MAX_BATCH_SIZE": "6"},
			want: func(*Settings) {},
			file: "max_batch_size: 5\n",
		},
		{name: "explorer on by default", want: func(s *Settings) { s.Explorer = true }},
		{name: "explorer off by flag", args: []string{"--explorer=false"}, want: func(s *Settings) { s.Explorer = false }},
		{name: "explorer off by env", env: map[string]string{"BRIDGE_EXPLORER": "false"}, want: func(s *Settings) { s.Explorer = false }},
		{name: "explorer off by file", args: []string{"--config", "$FILE"}, file: "explorer: false\n", want: func(s *Settings) { s.Explorer = false }},
		{
			name: "flag false over env true",
			args: []string{"--emit-unpopulated=false"},
			env:  map[string]string{"BRIDGE_EMIT_UNPOPULATED": "true"},
			want: func(*Settings) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := load(t, tt.args, tt.env, tt.file)
			if err != nil {
				t.Fatal(err)
			}
			want := Defaults()
			tt.want(&want)
			if !goreflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		file     string
		wantKey  string
		wantErr  error
		wantFile bool // the message names the file
	}{
		{name: "unknown key", args: []string{"--config", "$FILE"}, file: "lisen: x\n", wantKey: "lisen", wantErr: ErrUnknownKey, wantFile: true},
		{name: "unknown key by env file", env: map[string]string{"BRIDGE_CONFIG": "$FILE"}, file: "listen: a:1\nbackend_addr: x\n", wantKey: "backend_addr", wantErr: ErrUnknownKey, wantFile: true},
		{name: "config is no file key", args: []string{"--config", "$FILE"}, file: "config: other.yaml\n", wantKey: "config", wantErr: ErrUnknownKey, wantFile: true},
		{name: "zero batch size", args: []string{"--max-batch-size", "0"}, wantKey: "max_batch_size", wantErr: ErrInvalidValue},
		{name: "zero parallelism", env: map[string]string{"BRIDGE_BATCH_PARALLELISM": "0"}, wantKey: "batch_parallelism", wantErr: ErrInvalidValue},
		{name: "negative body", env: map[string]string{"BRIDGE_MAX_BODY_BYTES": "-1"}, wantKey: "max_body_bytes", wantErr: ErrInvalidValue},
		{name: "body not a number", env: map[string]string{"BRIDGE_MAX_BODY_BYTES": "4MiB"}, wantKey: "max_body_bytes", wantErr: ErrInvalidValue},
		{name: "zero metadata", args: []string{"--max-metadata-bytes", "0"}, wantKey: "max_metadata_bytes", wantErr: ErrInvalidValue},
		{name: "metadata not a number", env: map[string]string{"BRIDGE_MAX_METADATA_BYTES": "16KiB"}, wantKey: "max_metadata_bytes", wantErr: ErrInvalidValue},
		{name: "batch not a number", args: []string{"--config", "$FILE"}, file: "max_batch_size: many\n", wantKey: "max_batch_size", wantErr: ErrInvalidValue},
		{name: "fraction", args: []string{"--config", "$FILE"}, file: "max_batch_size: 1.5\n", wantKey: "max_batch_size", wantErr: ErrInvalidValue},
		{name: "unparsable duration", env: map[string]string{"BRIDGE_CALL_TIMEOUT": "soon"}, wantKey: "call_timeout", wantErr: ErrInvalidValue},
		{name: "duration without unit", args: []string{"--config", "$FILE"}, file: "call_timeout: 10\n", wantKey: "call_timeout", wantErr: ErrInvalidValue},
		{name: "negative shutdown", args: []string{"--shutdown-timeout", "-1s"}, wantKey: "shutdown_timeout", wantErr: ErrInvalidValue},
		{name: "zero call timeout", env: map[string]string{"BRIDGE_CALL_TIMEOUT": "0s"}, wantKey: "call_timeout", wantErr: ErrInvalidValue},
		{name: "bad log level", args: []string{"--config", "$FILE"}, file: "log_level: loud\n", wantKey: "log_level", wantErr: ErrInvalidValue},
		{name: "bad log format", env: map[string]string{"BRIDGE_LOG_FORMAT": "xml"}, wantKey: "log_format", wantErr: ErrInvalidValue},
		{name: "bad bool", env: map[string]string{"BRIDGE_EMIT_UNPOPULATED": "maybe"}, wantKey: "emit_unpopulated", wantErr: ErrInvalidValue},
		{name: "listen without port", args: []string{"--listen", "localhost"}, wantKey: "listen", wantErr: ErrInvalidValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := load(t, tt.args, tt.env, tt.file)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != tt.wantKey {
				t.Errorf("got %v, want a *KeyError for %s", err, tt.wantKey)
			}
			if !strings.Contains(err.Error(), tt.wantKey) {
				t.Errorf("got %q, want it to name %s", err, tt.wantKey)
			}
			if tt.wantFile && !strings.Contains(err.Error(), path) {
				t.Errorf("got %q, want it to name %s", err, path)
			}
		})
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	_, _, err := load(t, []string{"--config", "$FILE"}, map[string]string{"BRIDGE_MAX_BODY_BYTES": "4MiB"},
		"call_timeout: 10\nmax_batch_size: 0\nlog_level: loud\n")
	for _, key := range []string{"max_body_bytes", "call_timeout", "max_batch_size", "log_level"} {
		if !strings.Contains(fmt.Sprint(err), `"`+key+`"`) {
			t.Errorf("got %v, want it to name %s", err, key)
		}
	}
}

func TestLoadFileErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	tests := []struct {
		name string
		args []string
		file string
		want string
	}{
		{name: "missing file", args: []string{"--config", missing}, want: missing},
		{name: "bad yaml", args: []string{"--config", "$FILE"}, file: "listen: [\n", want: "bridge.yaml"},
		{name: "not a mapping", args: []string{"--config", "$FILE"}, file: "- listen\n", want: "bridge.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := load(t, tt.args, nil, tt.file)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

func TestRegisterExcept(t *testing.T) {
	for _, name := range append(names(), FileFlag) {
		t.Setenv(envName(name), "")
	}
	t.Setenv("BRIDGE_BACKEND", "env:1")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	RegisterExcept(fs, KeyBackend)
	if f := fs.Lookup("backend"); f != nil {
		t.Errorf("got flag --backend, want none")
	}
	if f := fs.Lookup("listen"); f == nil || f.DefValue != "127.0.0.1:8080" {
		t.Errorf("got --listen %v, want default 127.0.0.1:8080", f)
	}
	s, err := Load(fs, testEngine)
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend != "env:1" {
		t.Errorf("got backend %q, want env:1", s.Backend)
	}
}

func TestFlagsHaveDefaultsAndEnvInHelp(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	Register(fs)
	want := map[string]string{
		"max-body-bytes": "4194304", "max-batch-size": "100", "batch-parallelism": "100", "call-timeout": "30s",
		"emit-unpopulated": "false", "log-level": "info", "log-format": "text", "shutdown-timeout": "15s",
		"listen": "127.0.0.1:8080", "backend": "", "config": "",
	}
	for name, def := range want {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("no flag --%s", name)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s: got default %q, want %q", name, f.DefValue, def)
		}
		env := "BRIDGE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if !strings.Contains(f.Usage, env) {
			t.Errorf("--%s: got usage %q, want it to name %s", name, f.Usage, env)
		}
	}
}
