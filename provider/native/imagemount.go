package native

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// An imported image is one root-owned directory tree shared by every box
// that uses it, never copied. The host clones it as a detached mount,
// read-only and idmapped to the box's user namespace (so the image's root
// is the box's root, and the box can copy files up into its own layer),
// and hands the mount to init over a unix socket; init attaches it in its
// own mount namespace as the overlay's lower layer. The image directory
// itself stays private to the host (its parents are mode 0700).

// sendImage clones dir as a detached recursive mount idmapped to the user
// namespace of process pid, read-only, nosuid and nodev, and sends it on
// sock. It needs a kernel and file system with idmapped mounts (Linux
// 5.12+; tmpfs since 6.3).
func sendImage(sock *os.File, dir string, pid int) error {
	mnt, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("clone image mount: %w", err)
	}
	defer unix.Close(mnt)
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		return fmt.Errorf("open box user namespace: %w", err)
	}
	defer ns.Close()
	attr := &unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(ns.Fd()),
	}
	if err := unix.MountSetattr(mnt, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("idmap image mount (needs idmapped mount support for the image store's file system): %w", err)
	}
	if err := unix.Sendmsg(int(sock.Fd()), []byte{1}, unix.UnixRights(mnt), nil, 0); err != nil {
		return fmt.Errorf("send image mount: %w", err)
	}
	return nil
}

// attachImage receives the image mount from the host on fdImage and
// attaches it at dir.
func attachImage(dir string) error {
	mnt, err := recvMount()
	if err != nil {
		return fmt.Errorf("receive image mount: %w", err)
	}
	defer unix.Close(mnt)
	if err := unix.MoveMount(mnt, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach image mount: %w", err)
	}
	return nil
}

// mountSock is init's end of the mount socket (fdImage), opened on first
// use and closed by closeMountSocket once the root is built.
var mountSock *os.File

// recvMount receives the next mount descriptor the host sends on fdImage.
func recvMount() (int, error) {
	if mountSock == nil {
		mountSock = os.NewFile(fdImage, "mounts")
	}
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(mountSock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, errors.New("no descriptor from the host")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, errors.New("want exactly one descriptor")
	}
	return fds[0], nil
}

// closeMountSocket closes the mount socket, if init opened it.
func closeMountSocket() {
	if mountSock != nil {
		mountSock.Close()
		mountSock = nil
	}
}
