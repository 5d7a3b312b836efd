package native

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/internal/procfs"
	"golang.org/x/sys/unix"
)

// Every box maps its uids and gids 0..65535 onto a host range of its own:
// slot n owns [slotBase + n*slotSize, slotBase + (n+1)*slotSize). The slot
// also names the box's host interface (abx<n>, abl<n>) and picks its /30
// of the backend's network (network.go).
//
// Host uids and interface names are host-wide, so slots are too: every
// native backend on the host, whatever its data dir, allocates them in one
// registry (Config.SlotDir, default DefaultSlotDir). A slot is a directory
// there, created with mkdir, which is atomic, so two boxes never share
// one, even across servers; its file "owner" names the data dir and the
// box. The registry's lock (slotsLock) orders slot allocation against
// the removal of the host firewall when the last box of the host goes
// (cleanup.go).
const (
	slotBase  = 1 << 20
	slotSize  = 1 << 16
	slotCount = 16000
)

// DefaultSlotDir is the host-wide slot registry. It is on a tmpfs: slots,
// like boxes, do not outlive a reboot.
const DefaultSlotDir = "/run/astrabox/native-slots"

const (
	slotOwnerFile = "owner"
	slotLockFile  = ".lock"
)

// allocSlot reserves a free slot for box id of this data dir; with none
// free, the slots of removed data dirs are reclaimed and looked at again.
func (p *Provider) allocSlot(id string) (int, error) {
	n, err := p.findSlot(id)
	if err != nil && p.reclaimAbandoned() > 0 {
		return p.findSlot(id)
	}
	return n, err
}

// findSlot claims the first free slot for id, from one its id picks.
func (p *Provider) findSlot(id string) (int, error) {
	h := fnv.New32a()
	h.Write([]byte(id))
	start := int(h.Sum32() % slotCount)
	for i := 0; i < slotCount; i++ {
		n := (start + i) % slotCount
		ok, err := p.claimSlot(n, id)
		if err != nil {
			return 0, err
		}
		if ok {
			return n, nil
		}
	}
	return 0, errors.New("allocate uid range: all slots of the host are in use")
}

// claimSlot takes slot n for id unless it is taken.
func (p *Provider) claimSlot(n int, id string) (bool, error) {
	dir := p.slotDir(n)
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("allocate uid range: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, slotOwnerFile), []byte(p.dataDir+"\n"+id+"\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return false, fmt.Errorf("allocate uid range: %w", err)
	}
	return true, nil
}

func (p *Provider) slotDir(n int) string {
	return filepath.Join(p.cfg.SlotDir, strconv.Itoa(n))
}

// slotHolder returns the data dir and box id holding slot n ("" when
// free, or while its owner is being written).
func (p *Provider) slotHolder(n int) (dataDir, id string) {
	b, err := os.ReadFile(filepath.Join(p.slotDir(n), slotOwnerFile))
	if err != nil {
		return "", ""
	}
	dataDir, id, _ = strings.Cut(strings.TrimSuffix(string(b), "\n"), "\n")
	return dataDir, id
}

// slotOwner returns the id of this data dir's box holding slot n ("" when
// free or another data dir's).
func (p *Provider) slotOwner(n int) string {
	if dir, id := p.slotHolder(n); dir == p.dataDir {
		return id
	}
	return ""
}

// freeSlot releases slot n if it belongs to id.
func (p *Provider) freeSlot(n int, id string) {
	if p.slotOwner(n) == id {
		_ = os.RemoveAll(p.slotDir(n))
	}
}

// slotsInUse returns the slots of the host's registry.
func (p *Provider) slotsInUse() []int {
	entries, _ := os.ReadDir(p.cfg.SlotDir)
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// foreignBoxes returns the ids of boxes of other data dirs that hold a
// slot: a cgroup of one of them under this backend's cgroup parent (two
// data dirs configured with one parent) is never this backend's orphan.
func (p *Provider) foreignBoxes() map[string]bool {
	out := map[string]bool{}
	for _, n := range p.slotsInUse() {
		if dir, id := p.slotHolder(n); dir != p.dataDir && id != "" {
			out[id] = true
		}
	}
	return out
}

// reclaimAbandoned frees the slots held for a data dir that no longer
// exists whose uids run no process (a backend whose data dir was removed
// left them, and nothing else would ever free them), and returns how
// many it freed. A slot whose owner is being written, or whose uids still
// run a process, is kept.
func (p *Provider) reclaimAbandoned() int {
	var uids map[int]bool // read once, when a slot needs it
	freed := 0
	for _, n := range p.slotsInUse() {
		dir, id := p.slotHolder(n)
		if dir == "" {
			continue
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if uids == nil {
			uids = procfs.UIDs()
		}
		if slotRuns(uids, n) {
			p.log.Warn("uid slot of a removed data dir still runs processes; kept", "slot", n, "data_dir", dir, "sandbox_id", id)
			continue
		}
		if err := os.RemoveAll(p.slotDir(n)); err == nil {
			freed++
		}
	}
	if freed > 0 {
		p.log.Info("uid slots of removed data dirs reclaimed", "slots", freed)
	}
	return freed
}

// slotRuns reports whether a uid of slot n is among uids.
func slotRuns(uids map[int]bool, n int) bool {
	lo := hostUID(n)
	for uid := range uids {
		if uid >= lo && uid < lo+slotSize {
			return true
		}
	}
	return false
}

// freeSlotsOf releases every slot held by id (after a crash mid-create).
func (p *Provider) freeSlotsOf(id string) {
	for _, n := range p.slotsInUse() {
		p.freeSlot(n, id)
	}
}

func hostUID(slot int) int { return slotBase + slot*slotSize }

// slotsLock takes the registry's lock, shared or exclusive, and returns
// its release. Creates hold it shared from before they set up the host
// firewall until their slot is taken; removing the firewall holds it
// exclusive, seeing no slot taken.
func (p *Provider) slotsLock(exclusive bool) (func(), error) {
	f, err := os.OpenFile(filepath.Join(p.cfg.SlotDir, slotLockFile), os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock slot registry: %w", err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock slot registry: %w", err)
	}
	return func() { f.Close() }, nil
}

// legacySlots is where slots were kept before the registry was host-wide:
// DataDir/slots.
const legacySlots = "slots"

// adoptLegacySlots moves the slots of this data dir's running boxes from
// DataDir/slots into the host registry, so that no box of another data
// dir is given their uids or interfaces; a slot another data dir holds
// already is logged (the two boxes share a uid range: delete one).
func (p *Provider) adoptLegacySlots() {
	dir := filepath.Join(p.cfg.DataDir, legacySlots)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		b, rerr := os.ReadFile(filepath.Join(dir, e.Name(), "id"))
		if err != nil || rerr != nil || n < 0 || n >= slotCount {
			continue
		}
		id := string(b)
		if ok, err := p.claimSlot(n, id); err != nil || (!ok && p.slotOwner(n) != id) {
			p.log.Error("uid slot of a running box is another's", "sandbox_id", id, "slot", n, "err", err)
			continue
		}
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
	_ = os.Remove(dir)
}
