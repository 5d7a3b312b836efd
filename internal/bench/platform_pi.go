package bench

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/astrabox/astrabox/image"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform/engine/pi"
	"github.com/astrabox/astrabox/platform/wire"
)

// piProfile is the runtime profile of the bench's pi Agent (no pool).
const piProfile = "bench-pi"

// importPi imports the pi image's rootfs tarball into a fresh image store
// under dir, named as the pi adapter expects, and returns its resolver.
// The import is setup, outside every measured span.
func importPi(ctx context.Context, rootfs, dir string, log *slog.Logger) (func(string) (string, error), error) {
	st, err := image.Open(dir, log)
	if err != nil {
		return nil, fmt.Errorf("bench: image store: %w", err)
	}
	if _, err := st.Import(ctx, pi.Image, rootfs, image.ImportOptions{}); err != nil {
		return nil, fmt.Errorf("bench: import the pi image %s: %w", rootfs, err)
	}
	return st.Resolve, nil
}

// setupPi stores the pi profile and an Agent of engine kind pi on it.
func (e *platformEnv) setupPi(ctx context.Context) (string, error) {
	_, err := e.srv.Catalog.PutRuntimeProfile(ctx, lifecycle.Profile{Name: piProfile, Backend: e.backend, Image: pi.Image,
		EngineKinds: []string{pi.Kind},
		Model:       &lifecycle.ModelEndpoint{BaseURL: e.model.URL(), APIKey: benchModelKey, Models: []string{"bench-1"}}})
	if err != nil {
		return "", fmt.Errorf("bench: runtime profile %s: %w", piProfile, err)
	}
	a, err := e.srv.Catalog.CreateAgent(ctx, wire.AgentRequest{Name: piProfile, EngineKind: pi.Kind, RuntimeProfile: piProfile,
		Model: "bench-1", Instructions: "Be brief.", PermissionMode: "auto"})
	if err != nil {
		return "", fmt.Errorf("bench: pi agent: %w", err)
	}
	return a.ID, nil
}

// measurePi is pi's first token, warm and cold (no pool), measured as the
// built-in agent's rows are, so the two kinds read side by side.
func (e *platformEnv) measurePi(ctx context.Context, n int) ([]PlatformRow, error) {
	warm, err := e.warmFirstToken(ctx, n, e.piAgent)
	if err != nil {
		return nil, fmt.Errorf("warm Session: %w", err)
	}
	warm.Scenario = "first token, warm Session, pi"
	warm.Aim = ""
	warm.Note = "pi " + pi.Version + " in the pi image; POST turn-inputs → first text-delta"
	cold, err := e.coldFirstToken(ctx, n, e.piAgent, 0)
	if err != nil {
		return []PlatformRow{warm}, fmt.Errorf("cold Session: %w", err)
	}
	cold.Scenario = "first token, cold Session, no pool, pi"
	cold.Note = "clock from POST conversations: box created, Node and pi started"
	return []PlatformRow{warm, cold}, nil
}
