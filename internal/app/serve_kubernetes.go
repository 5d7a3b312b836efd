package app

import (
	"log/slog"

	"github.com/astrabox/astrabox/internal/backends"
	"github.com/astrabox/astrabox/sandbox"
)

// kubernetesConfig is the "kubernetes" section of the config file: the
// cluster that the kubernetes backend runs boxes on.
type kubernetesConfig = backends.KubernetesConfig

// newKubernetesBackend makes the kubernetes backend of section c; it
// refuses a section without execdImage before any cluster is contacted.
func newKubernetesBackend(c kubernetesConfig, log *slog.Logger) (sandbox.Provider, error) {
	return backends.Config{Kubernetes: c}.Open("kubernetes", backends.Env{Logger: log})
}
