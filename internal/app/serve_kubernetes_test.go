package app

import (
	"log/slog"
	"strings"
	"testing"
)

// TestKubernetesConfig checks the strict decoding of the "kubernetes"
// section: known keys pass, bad values are refused naming their key.
func TestKubernetesConfig(t *testing.T) {
	for _, tt := range []struct {
		name, json, err string
	}{
		{"full", `{"kubernetes": {"kubeconfig": "/k", "namespace": "boxes", "execdImage": "x/execd:1", "pullPolicy": "Never",
			"runtimeClasses": [{"name": "gvisor", "isolation": "sandboxed", "nodeSelector": {"pool": "g"},
			"tolerations": [{"key": "g", "operator": "Exists", "effect": "NoSchedule"}]}], "requestPercent": 50, "startTimeout": 60}}`, ""},
		{"unknown key", `{"kubernetes": {"kubeconfigPath": "/k"}}`, "kubeconfigPath"},
		{"pull policy", `{"kubernetes": {"pullPolicy": "Always"}}`, "kubernetes.pullPolicy"},
		{"request percent", `{"kubernetes": {"requestPercent": 101}}`, "kubernetes.requestPercent"},
		{"isolation", `{"kubernetes": {"runtimeClasses": [{"name": "x", "isolation": "strong"}]}}`, "kubernetes.runtimeClasses[0].isolation"},
		{"class name", `{"kubernetes": {"runtimeClasses": [{}]}}`, "kubernetes.runtimeClasses[0].name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var cfg serveConfig
			err := decodeConfig([]byte(tt.json), &cfg)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("decode: %v, want an error naming %q", err, tt.err)
			}
		})
	}
}

// TestKubernetesBackendNeedsExecdImage refuses the backend without its
// execd image, before any cluster is contacted.
func TestKubernetesBackendNeedsExecdImage(t *testing.T) {
	if _, err := newKubernetesBackend(kubernetesConfig{Kubeconfig: "/nonexistent"}, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "execdImage") {
		t.Fatalf("got %v, want an error naming execdImage", err)
	}
}
