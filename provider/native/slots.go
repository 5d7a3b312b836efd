package native

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
)

// Every box maps its uids and gids 0..65535 onto a host range of its own:
// slot n owns [slotBase + n*slotSize, slotBase + (n+1)*slotSize).
const (
	slotBase  = 1 << 20
	slotSize  = 1 << 16
	slotCount = 16000
)

// allocSlot reserves a free uid-range slot for id. A slot is a directory
// under DataDir/slots created with mkdir, which is atomic, so two boxes
// never share one even across processes.
func (p *Provider) allocSlot(id string) (int, error) {
	h := fnv.New32a()
	h.Write([]byte(id))
	start := int(h.Sum32() % slotCount)
	for i := 0; i < slotCount; i++ {
		n := (start + i) % slotCount
		dir := p.slotDir(n)
		err := os.Mkdir(dir, 0o700)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("allocate uid range: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "id"), []byte(id), 0o600); err != nil {
			os.RemoveAll(dir)
			return 0, fmt.Errorf("allocate uid range: %w", err)
		}
		return n, nil
	}
	return 0, errors.New("allocate uid range: all slots are in use")
}

func (p *Provider) slotDir(n int) string {
	return filepath.Join(p.cfg.DataDir, dirSlots, strconv.Itoa(n))
}

// slotOwner returns the id of the box holding slot n ("" when free).
func (p *Provider) slotOwner(n int) string {
	b, err := os.ReadFile(filepath.Join(p.slotDir(n), "id"))
	if err != nil {
		return ""
	}
	return string(b)
}

// freeSlot releases slot n if it belongs to id.
func (p *Provider) freeSlot(n int, id string) {
	if p.slotOwner(n) == id {
		_ = os.RemoveAll(p.slotDir(n))
	}
}

// freeSlotsOf releases every slot held by id (after a crash mid-create).
func (p *Provider) freeSlotsOf(id string) {
	entries, _ := os.ReadDir(filepath.Join(p.cfg.DataDir, dirSlots))
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			p.freeSlot(n, id)
		}
	}
}

func hostUID(slot int) int { return slotBase + slot*slotSize }
