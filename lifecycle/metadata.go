package lifecycle

import (
	"strings"

	"github.com/astrabox/astrabox/sandbox"
)

// The bounds of a sandbox's metadata record. They hold on every path that
// writes metadata (a create, a claim from a warm pool, a metadata patch):
// a patch is checked entry by entry and then as the record it would leave,
// so many small patches cannot build a record a create would refuse.
const (
	MaxMetadataEntries    = 64
	MaxMetadataKeyBytes   = 128
	MaxMetadataValueBytes = 1024
	// MaxMetadataBytes bounds the sum of a record's key and value lengths.
	MaxMetadataBytes = 16 << 10
)

// ValidateMetadata checks a whole metadata record: every entry
// (ValidateMetadataEntry), the entry count and the total size. Errors
// carry sandbox.CodeInvalidRequest and name the bound.
func ValidateMetadata(md map[string]string) error {
	if len(md) > MaxMetadataEntries {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "metadata has %d entries; at most %d are allowed", len(md), MaxMetadataEntries)
	}
	total := 0
	for k, v := range md {
		if err := ValidateMetadataEntry(k, v); err != nil {
			return err
		}
		total += len(k) + len(v)
	}
	if total > MaxMetadataBytes {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "metadata is %d bytes (keys and values); at most %d are allowed", total, MaxMetadataBytes)
	}
	return nil
}

// ValidateMetadataEntry checks one entry: a key of 1 to
// MaxMetadataKeyBytes bytes without '=', '&' or NUL (they would break the
// list filter's key=value&... syntax) and a value of at most
// MaxMetadataValueBytes bytes without NUL.
func ValidateMetadataEntry(k, v string) error {
	if k == "" || len(k) > MaxMetadataKeyBytes || len(v) > MaxMetadataValueBytes || strings.ContainsAny(k, "=&\x00") || strings.IndexByte(v, 0) >= 0 {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid metadata entry %q (keys 1-%d bytes without '=', '&' or NUL; values up to %d bytes)",
			truncate(k, 64), MaxMetadataKeyBytes, MaxMetadataValueBytes)
	}
	return nil
}

// truncate shortens s to at most n bytes for a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
