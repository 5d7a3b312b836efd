package app

import (
	"context"

	"github.com/astrabox/astrabox/image"
	"github.com/astrabox/astrabox/provider/native"
)

// nativeSnapshots keeps the native backend's snapshots in the image
// store, as images derived from the box's image.
func nativeSnapshots(images *image.Store) *native.SnapshotStore {
	return &native.SnapshotStore{
		Derive: func(ctx context.Context, name, base string, upper int, uidBase uint32, maxBytes int64, labels map[string]string) error {
			_, err := images.Derive(ctx, name, base, upper, image.DeriveOptions{UIDBase: uidBase, MaxBytes: maxBytes, Labels: labels})
			return err
		},
		Labels: func(ctx context.Context) (map[string]map[string]string, error) {
			list, err := images.List(ctx)
			if err != nil {
				return nil, err
			}
			out := map[string]map[string]string{}
			for _, info := range list {
				if len(info.Labels) > 0 {
					out[info.Name] = info.Labels
				}
			}
			return out, nil
		},
		Remove: images.Remove,
	}
}
