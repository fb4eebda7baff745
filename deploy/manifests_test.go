// Package deploy holds the container image and Kubernetes manifests; its
// tests check them against the bridge's configuration rules.
package deploy

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type container struct {
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string         `yaml:"name"`
		Value     *string        `yaml:"value"`
		ValueFrom map[string]any `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom   []any `yaml:"envFrom"`
	Lifecycle struct {
		PreStop struct {
			Sleep struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	LivenessProbe   probe `yaml:"livenessProbe"`
	ReadinessProbe  probe `yaml:"readinessProbe"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
}

type deployment struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int  `yaml:"terminationGracePeriodSeconds"`
				AutomountServiceAccountToken  bool `yaml:"automountServiceAccountToken"`
				SecurityContext               struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				Volumes    []any       `yaml:"volumes"`
				Containers []container `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type service struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

func decode(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestDeployment(t *testing.T) {
	var d deployment
	decode(t, "kubernetes/deployment.yaml", &d)
	if d.Kind != "Deployment" || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("got kind %q with %d containers, want one Deployment container", d.Kind, len(d.Spec.Template.Spec.Containers))
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]

	// Every setting is a BRIDGE_* value that the bridge accepts.
	for _, e := range c.Env {
		t.Setenv(e.Name, "")
	}
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "BRIDGE_") || e.Value == nil || e.ValueFrom != nil {
			t.Errorf("env %s: want a plain BRIDGE_* value", e.Name)
			continue
		}
		t.Setenv(e.Name, *e.Value)
	}
	if len(c.EnvFrom) != 0 || len(pod.Volumes) != 0 {
		t.Errorf("got envFrom or volumes, want settings only in env and no secrets")
	}
	fs := pflag.NewFlagSet("deploy", pflag.ContinueOnError)
	config.Register(fs)
	s, err := config.Load(fs)
	if err != nil {
		t.Fatalf("the deployment's settings do not load: %v", err)
	}
	if s.Backend == "" || !strings.HasSuffix(s.Listen, ":8080") {
		t.Errorf("got backend %q listen %q, want a backend and port 8080", s.Backend, s.Listen)
	}

	grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if grace <= preStop+s.ShutdownTimeout {
		t.Errorf("got grace period %s, want more than preStop %s + shutdown timeout %s", grace, preStop, s.ShutdownTimeout)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("got ports %+v, want http on 8080", c.Ports)
	}
	if p := c.LivenessProbe.HTTPGet; p.Path != "/healthz" || p.Port != "http" {
		t.Errorf("got liveness %+v, want GET /healthz on http", p)
	}
	if p := c.ReadinessProbe.HTTPGet; p.Path != "/readyz" || p.Port != "http" {
		t.Errorf("got readiness %+v, want GET /readyz on http", p)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("got args %v, want serve", c.Args)
	}

	sc := c.SecurityContext
	if !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser == 0 || !sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 ||
		sc.Capabilities.Drop[0] != "ALL" || pod.AutomountServiceAccountToken {
		t.Errorf("got pod %+v container %+v, want non-root, read-only, no privileges, no token", pod.SecurityContext, sc)
	}

	var svc service
	decode(t, "kubernetes/service.yaml", &svc)
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Metadata.Labels[k] != v || d.Spec.Selector.MatchLabels[k] != v {
			t.Errorf("service selects %s=%s, which the pods do not carry", k, v)
		}
	}
	if svc.Kind != "Service" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != "http" {
		t.Errorf("got service %+v, want one port targeting http", svc)
	}
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	for _, want := range []string{
		"FROM golang:1.26 AS build",
		"CGO_ENABLED=0",
		"./cmd/grpc-jsonrpc-bridge",
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"USER 65532:65532",
		`ENTRYPOINT ["/usr/local/bin/grpc-jsonrpc-bridge"]`,
		`CMD ["serve"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}
