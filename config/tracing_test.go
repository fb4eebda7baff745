package config

import (
	"errors"
	goreflect "reflect"
	"strings"
	"testing"
)

// withTracingDefaults gives s, built from a literal, the default tracing
// settings.
func (s Settings) withTracingDefaults() Settings {
	s.Tracing = Defaults().Tracing
	return s
}

func TestLoadTracing(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want Tracing
	}{
		{name: "defaults: off", want: Tracing{Exporter: "none", SampleRatio: 1, ServiceName: "grpc-jsonrpc-bridge"}},
		{
			name: "flags",
			args: []string{"--tracing-exporter", "otlp", "--tracing-endpoint", "otel-collector:4317", "--tracing-insecure",
				"--tracing-sample-ratio", "0.25", "--tracing-service-name", "edge-bridge"},
			want: Tracing{Exporter: "otlp", Endpoint: "otel-collector:4317", Insecure: true, SampleRatio: 0.25, ServiceName: "edge-bridge"},
		},
		{
			name: "env",
			env: map[string]string{"BRIDGE_TRACING_EXPORTER": "otlp", "BRIDGE_TRACING_ENDPOINT": "10.0.0.1:4317",
				"BRIDGE_TRACING_INSECURE": "true", "BRIDGE_TRACING_SAMPLE_RATIO": "0.5", "BRIDGE_TRACING_SERVICE_NAME": "b"},
			want: Tracing{Exporter: "otlp", Endpoint: "10.0.0.1:4317", Insecure: true, SampleRatio: 0.5, ServiceName: "b"},
		},
		{
			name: "file",
			args: []string{"--config", "$FILE"},
			file: "tracing:\n  exporter: otlp\n  sample_ratio: 0\n",
			want: Tracing{Exporter: "otlp", SampleRatio: 0, ServiceName: "grpc-jsonrpc-bridge"},
		},
		{
			name: "whole-number ratio in the file",
			args: []string{"--config", "$FILE"},
			file: "tracing:\n  sample_ratio: 1\n",
			want: Tracing{Exporter: "none", SampleRatio: 1, ServiceName: "grpc-jsonrpc-bridge"},
		},
		{
			name: "flag over env over file",
			args: []string{"--config", "$FILE", "--tracing-sample-ratio", "0.1"},
			env:  map[string]string{"BRIDGE_TRACING_SAMPLE_RATIO": "0.2", "BRIDGE_TRACING_EXPORTER": "none"},
			file: "tracing:\n  exporter: otlp\n  sample_ratio: 0.3\n",
			want: Tracing{Exporter: "none", SampleRatio: 0.1, ServiceName: "grpc-jsonrpc-bridge"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := load(t, tt.args, tt.env, tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if !goreflect.DeepEqual(got.Tracing, tt.want) {
				t.Errorf("got %+v, want %+v", got.Tracing, tt.want)
			}
			if on := tt.want.Exporter == "otlp"; got.Tracing.Enabled() != on {
				t.Errorf("got Enabled() %v, want %v", got.Tracing.Enabled(), on)
			}
		})
	}
}

func TestLoadTracingErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		file     string
		wantKey  string
		want     string // in the message
		wantFile bool
	}{
		{name: "unknown exporter", args: []string{"--tracing-exporter", "jaeger"}, wantKey: "tracing.exporter", want: "[none otlp]"},
		{name: "empty exporter", env: map[string]string{"BRIDGE_TRACING_EXPORTER": " "}, wantKey: "tracing.exporter", want: "[none otlp]"},
		{name: "endpoint without port", args: []string{"--tracing-endpoint", "collector"}, wantKey: "tracing.endpoint", want: "HOST:PORT"},
		{name: "endpoint as URL", args: []string{"--tracing-endpoint", "http://collector:4317"}, wantKey: "tracing.endpoint", want: "HOST:PORT"},
		{name: "endpoint port zero", env: map[string]string{"BRIDGE_TRACING_ENDPOINT": "collector:0"}, wantKey: "tracing.endpoint", want: "HOST:PORT"},
		{name: "endpoint without host", args: []string{"--tracing-endpoint", ":4317"}, wantKey: "tracing.endpoint", want: "HOST:PORT"},
		{name: "ratio above 1", args: []string{"--tracing-sample-ratio", "1.5"}, wantKey: "tracing.sample_ratio", want: "from 0 to 1"},
		{name: "negative ratio", env: map[string]string{"BRIDGE_TRACING_SAMPLE_RATIO": "-0.1"}, wantKey: "tracing.sample_ratio", want: "from 0 to 1"},
		{name: "NaN ratio", env: map[string]string{"BRIDGE_TRACING_SAMPLE_RATIO": "NaN"}, wantKey: "tracing.sample_ratio", want: "from 0 to 1"},
		{name: "ratio not a number", env: map[string]string{"BRIDGE_TRACING_SAMPLE_RATIO": "half"}, wantKey: "tracing.sample_ratio", want: "a number"},
		{name: "ratio as percent in the file", args: []string{"--config", "$FILE"}, file: "tracing:\n  sample_ratio: 10%\n",
			wantKey: "tracing.sample_ratio", want: "a number", wantFile: true},
		{name: "bad insecure", env: map[string]string{"BRIDGE_TRACING_INSECURE": "perhaps"}, wantKey: "tracing.insecure", want: "true or false"},
		{name: "empty service name", args: []string{"--config", "$FILE"}, file: "tracing:\n  service_name: \"\"\n",
			wantKey: "tracing.service_name", want: "not be empty", wantFile: true},
		{name: "unknown key in the section", args: []string{"--config", "$FILE"}, file: "tracing:\n  sampler: always\n",
			wantKey: "tracing.sampler", want: "tracing.sample_ratio", wantFile: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := load(t, tt.args, tt.env, tt.file)
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != tt.wantKey {
				t.Fatalf("got %v, want an error about %s", err, tt.wantKey)
			}
			if !errors.Is(err, ErrInvalidValue) && !errors.Is(err, ErrUnknownKey) {
				t.Errorf("got %v, want ErrInvalidValue or ErrUnknownKey", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err, tt.want)
			}
			if tt.wantFile && ke.File != path {
				t.Errorf("got file %q, want %q", ke.File, path)
			}
		})
	}
}

func TestTracingYAMLRoundTrip(t *testing.T) {
	s := Defaults()
	s.Tracing = Tracing{Exporter: "otlp", Endpoint: "c:4317", Insecure: true, SampleRatio: 0.125, ServiceName: "x"}
	out, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := load(t, []string{"--config", "$FILE"}, nil, string(out))
	if err != nil {
		t.Fatal(err)
	}
	if got.Tracing != s.Tracing {
		t.Errorf("got %+v, want %+v", got.Tracing, s.Tracing)
	}
}
