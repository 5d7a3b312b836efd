package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/internal/hostpath"
)

// buildRoot assembles the box's root file system under cfg.Root in init's
// mount namespace, then pivots into it. Nothing of the host remains
// visible except what is bound read-only on purpose.
func buildRoot(cfg *initConfig) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	root := cfg.Root
	if err := mountTmpfs(root, cfg.DiskBytes, 0o755, 0); err != nil {
		return fmt.Errorf("root tmpfs: %w", err)
	}
	if !cfg.HostImage {
		lower, upper, work, merged := filepath.Join(root, ".lower"), filepath.Join(root, ".upper"), filepath.Join(root, ".work"), filepath.Join(root, ".merged")
		for _, d := range []string{lower, upper, work, merged} {
			if err := os.Mkdir(d, 0o755); err != nil {
				return fmt.Errorf("overlay dirs: %w", err)
			}
		}
		if err := attachImage(lower); err != nil {
			return err
		}
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work)
		if err := unix.Mount("overlay", merged, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount overlay: %w", err)
		}
		if err := keepLayer(root); err != nil {
			return err
		}
		root = merged
	}
	for _, d := range []string{"usr", "etc", "proc", "sys", "dev", "tmp", "run", "root", "workspace", ".astrabox", ".oldroot"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return fmt.Errorf("create /%s: %w", d, err)
		}
	}
	if cfg.HostImage {
		if err := hostImage(root, cfg); err != nil {
			return err
		}
	} else if err := writeEtc(filepath.Join(root, "etc"), cfg.Etc); err != nil {
		return err
	}
	if err := bindFile(cfg.Binary, filepath.Join(root, boxBinary), true); err != nil {
		return fmt.Errorf("bind astrabox binary: %w", err)
	}
	if err := unix.Mount("proc", filepath.Join(root, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := unix.Mount("sysfs", filepath.Join(root, "sys"), "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /sys: %w", err)
	}
	if err := bindCgroups(filepath.Join(root, "sys", "fs", "cgroup"), cfg.CgroupDirs); err != nil {
		return err
	}
	if err := buildDev(filepath.Join(root, "dev"), cfg.ShmBytes); err != nil {
		return err
	}
	if err := mountTmpfs(filepath.Join(root, "tmp"), cfg.TmpBytes, 0o1777, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	if err := mountTmpfs(filepath.Join(root, "run"), 16<<20, 0o755, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return fmt.Errorf("mount /run: %w", err)
	}
	if err := os.Chmod(filepath.Join(root, "root"), 0o700); err != nil {
		return fmt.Errorf("chmod /root: %w", err)
	}
	if err := attachVolumes(root, cfg.Volumes); err != nil {
		return err
	}
	closeMountSocket()
	if err := pivot(root); err != nil {
		return err
	}
	return maskProc()
}

// bindCgroups binds the box's own cgroup directories read-only at dst (a
// tmpfs holding one directory per v1 controller; the v2 group directly).
func bindCgroups(dst string, dirs map[string]string) error {
	if len(dirs) == 0 {
		return nil
	}
	if v2, ok := dirs[""]; ok {
		if err := bindDir(v2, dst, true); err != nil {
			return fmt.Errorf("bind cgroup: %w", err)
		}
		return nil
	}
	if err := mountTmpfs(dst, 64<<10, 0o755, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
		return fmt.Errorf("cgroup mount point: %w", err)
	}
	for ctrl, dir := range dirs {
		target := filepath.Join(dst, ctrl)
		if err := os.Mkdir(target, 0o755); err != nil {
			return fmt.Errorf("cgroup mount point: %w", err)
		}
		if err := bindDir(dir, target, true); err != nil {
			return fmt.Errorf("bind cgroup %s: %w", ctrl, err)
		}
	}
	return remountReadOnly(dst)
}

// hostRootDirs are the directories of a Debian root a box on the host
// image gets, empty and its own (the root is the box's tmpfs), with their
// modes: programs expect them (a session command with cwd /var, mktemp in
// /var/tmp).
var hostRootDirs = []struct {
	path string
	mode uint32
}{
	{"var", 0o755}, {"var/tmp", 0o1777}, {"var/lib", 0o755}, {"var/log", 0o755}, {"var/cache", 0o755},
	{"var/spool", 0o755}, {"home", 0o755}, {"opt", 0o755}, {"srv", 0o755}, {"mnt", 0o755}, {"media", 0o755},
}

// hostImage binds the host's /usr read-only, links /bin, /lib, /lib64 and
// /sbin into it, makes the rest of a Debian root's directories, and
// writes /etc (os-release a link into /usr, as Debian has it).
func hostImage(root string, cfg *initConfig) error {
	for _, d := range hostRootDirs {
		dir := filepath.Join(root, d.path)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create /%s: %w", d.path, err)
		}
		if err := unix.Chmod(dir, d.mode); err != nil { // not subject to the umask; keeps the sticky bit
			return fmt.Errorf("chmod /%s: %w", d.path, err)
		}
	}
	if err := bindDir("/usr", filepath.Join(root, "usr"), true); err != nil {
		return fmt.Errorf("bind /usr: %w", err)
	}
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		if _, err := os.Stat(filepath.Join("/usr", l)); err != nil {
			continue
		}
		if err := os.Symlink("usr/"+l, filepath.Join(root, l)); err != nil {
			return fmt.Errorf("link /%s: %w", l, err)
		}
	}
	etc := filepath.Join(root, "etc")
	if err := writeEtc(etc, cfg.Etc); err != nil {
		return err
	}
	if _, err := os.Stat("/usr/lib/os-release"); err == nil {
		if err := os.Symlink("../usr/lib/os-release", filepath.Join(etc, "os-release")); err != nil {
			return fmt.Errorf("link /etc/os-release: %w", err)
		}
	}
	for _, src := range cfg.HostEtc {
		fi, err := os.Stat(src)
		if err != nil {
			continue
		}
		dst := filepath.Join(etc, filepath.Base(src))
		if fi.IsDir() {
			err = os.Mkdir(dst, 0o755)
			if err == nil {
				err = bindDir(src, dst, true)
			}
		} else {
			err = bindFile(src, dst, true)
		}
		if err != nil {
			return fmt.Errorf("bind %s: %w", src, err)
		}
	}
	return nil
}

// writeEtc writes the generated files into etc, replacing what is there
// (a symbolic link included: an image's /etc/resolv.conf often is one).
func writeEtc(etc string, files map[string]string) error {
	for name, content := range files {
		path := filepath.Join(etc, name)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("replace /etc/%s: %w", name, err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write /etc/%s: %w", name, err)
		}
	}
	return nil
}

// buildDev makes a minimal /dev: the harmless character devices bound from
// the host, a private devpts, and a size-limited /dev/shm.
func buildDev(dev string, shmBytes int64) error {
	if err := mountTmpfs(dev, 1<<20, 0o755, unix.MS_NOSUID|unix.MS_NOEXEC); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, name := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if err := bindFile("/dev/"+name, filepath.Join(dev, name), false); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", name, err)
		}
	}
	pts := filepath.Join(dev, "pts")
	if err := os.Mkdir(pts, 0o755); err != nil {
		return fmt.Errorf("create /dev/pts: %w", err)
	}
	if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount devpts: %w", err)
	}
	links := map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return fmt.Errorf("link /dev/%s: %w", name, err)
		}
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return fmt.Errorf("create /dev/shm: %w", err)
	}
	if err := mountTmpfs(shm, shmBytes, 0o1777, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	return nil
}

// pivot makes root the root of the mount namespace and detaches the old one.
func pivot(root string) error {
	old := filepath.Join(root, ".oldroot")
	if err := unix.PivotRoot(root, old); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	if err := unix.Unmount("/.oldroot", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := os.Remove("/.oldroot"); err != nil {
		return fmt.Errorf("remove /.oldroot: %w", err)
	}
	return nil
}

// maskedProcFiles are hidden behind /dev/null; readOnlyProc are remounted
// read-only.
var (
	maskedProcFiles = []string{"/proc/kcore", "/proc/keys", "/proc/key-users", "/proc/timer_list",
		"/proc/sched_debug", "/proc/latency_stats", "/proc/sysrq-trigger", "/proc/kallsyms", "/proc/kmsg",
		"/proc/vmallocinfo", "/proc/slabinfo", "/proc/pagetypeinfo", "/proc/buddyinfo", "/proc/zoneinfo"}
	maskedProcDirs = []string{"/proc/acpi", "/proc/scsi", "/proc/asound", "/proc/firmware", "/proc/driver"}
	readOnlyProc   = []string{"/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/sysvipc"}
)

func maskProc() error {
	for _, f := range maskedProcFiles {
		if err := unix.Mount("/dev/null", f, "", unix.MS_BIND, ""); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("mask %s: %w", f, err)
		}
	}
	for _, d := range maskedProcDirs {
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0"); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("mask %s: %w", d, err)
		}
	}
	for _, d := range readOnlyProc {
		if err := bindDir(d, d, true); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("read-only %s: %w", d, err)
		}
	}
	return nil
}

// mountTmpfs mounts a tmpfs of at most size bytes (0: the kernel default)
// with the octal permission bits mode on dir.
func mountTmpfs(dir string, size int64, mode uint32, flags uintptr) error {
	opts := "mode=" + strconv.FormatUint(uint64(mode), 8)
	if size > 0 {
		opts += ",size=" + strconv.FormatInt(size, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// bindDir bind-mounts src on dst (recursively), read-only when ro.
func bindDir(src, dst string, ro bool) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dst, err)
	}
	if !ro {
		return nil
	}
	return remountReadOnly(dst)
}

// bindFile bind-mounts the file src on dst, creating dst.
func bindFile(src, dst string, ro bool) error {
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create mount point %s: %w", dst, err)
	}
	f.Close()
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dst, err)
	}
	if !ro {
		return nil
	}
	return remountReadOnly(dst)
}

// remountReadOnly makes the bind mount at dst read-only, nosuid and nodev,
// keeping flags the kernel locked (a remount may not clear them).
func remountReadOnly(dst string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dst, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	for _, f := range []struct{ st, ms uintptr }{{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME}} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", dst, err)
	}
	return nil
}

// attachVolumes receives the mount of each volume from the host, in
// order, and attaches it on its mount path beneath root. The mount point
// is made (mode 0755) where missing, one component at a time, and found
// without following a link (an image or snapshot may hold any): a path
// through one is refused rather than resolved, so a volume lands exactly
// at its mount path and nowhere else of the box or the host.
func attachVolumes(root string, vols []initVolume) error {
	if len(vols) == 0 {
		return nil
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open root: %w", err)
	}
	defer unix.Close(rootFD)
	for _, v := range vols {
		mnt, err := recvMount()
		if err != nil {
			return fmt.Errorf("receive mount of volume %s: %w", v.Name, err)
		}
		err = attachVolume(rootFD, mnt, v)
		unix.Close(mnt)
		if err != nil {
			return err
		}
	}
	return nil
}

func attachVolume(rootFD, mnt int, v initVolume) error {
	target, err := hostpath.MkdirBeneath(rootFD, strings.TrimPrefix(v.MountPath, "/"))
	if err != nil {
		return fmt.Errorf("mount point of volume %s (%s): %w", v.Name, v.MountPath, err)
	}
	defer unix.Close(target)
	if err := unix.MoveMount(mnt, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach volume %s on %s: %w", v.Name, v.MountPath, err)
	}
	return nil
}

// keepLayer keeps a descriptor of the box's root tmpfs (the overlay's
// upper layer is its .upper) open in init at fdLayer, for the host to take
// (pidfd_getfd) when it snapshots the box: once init pivots, nothing else
// reaches it. Init is not dumpable and box processes lack CAP_SYS_PTRACE,
// so no process of the box can take it.
func keepLayer(root string) error {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open root layer: %w", err)
	}
	defer unix.Close(fd)
	if _, err := unix.FcntlInt(uintptr(fdLayer), unix.F_GETFD, 0); err == nil {
		return fmt.Errorf("keep root layer: descriptor %d is taken", fdLayer)
	}
	if err := unix.Dup3(fd, fdLayer, unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("keep root layer: %w", err)
	}
	return nil
}
