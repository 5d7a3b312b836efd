package native

import (
	"fmt"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// allowedSyscalls is the seccomp allow-list of a box, for x86-64. Anything
// not listed fails with EPERM: kernel-module, mount, namespace, keyring,
// clock, BPF, perf, io_uring, userfaultfd, kexec, reboot, swap, quota and
// handle-based open calls among them. 32-bit and x32 entry points are
// refused by the architecture check.
var allowedSyscalls = []string{
	"accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk", "capget", "capset",
	"chdir", "chmod", "chown", "clock_getres", "clock_gettime", "clock_nanosleep", "close",
	"close_range", "connect", "copy_file_range", "creat", "dup", "dup2", "dup3",
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2",
	"epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "execve", "execveat", "exit",
	"exit_group", "faccessat", "faccessat2", "fadvise64", "fallocate", "fanotify_mark",
	"fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat", "fcntl", "fdatasync",
	"fgetxattr", "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat",
	"fstatfs", "fsync", "ftruncate", "futex", "futex_requeue", "futex_wait", "futex_waitv",
	"futex_wake", "futimesat", "get_robust_list", "get_thread_area", "getcpu", "getcwd",
	"getdents", "getdents64", "getegid", "geteuid", "getgid", "getgroups", "getitimer",
	"getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority", "getrandom",
	"getresgid", "getresuid", "getrlimit", "getrusage", "getsid", "getsockname",
	"getsockopt", "gettid", "gettimeofday", "getuid", "getxattr", "inotify_add_watch",
	"inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel", "io_destroy",
	"io_getevents", "io_pgetevents", "io_setup", "io_submit", "ioctl", "ioprio_get",
	"ioprio_set", "kill", "landlock_add_rule", "landlock_create_ruleset",
	"landlock_restrict_self", "lchown", "lgetxattr", "link", "linkat", "listen", "listxattr",
	"llistxattr", "lremovexattr", "lseek", "lsetxattr", "lstat", "madvise", "membarrier",
	"memfd_create", "memfd_secret", "mincore", "mkdir", "mkdirat", "mknod", "mknodat", "mlock",
	"mlock2", "mlockall", "mmap", "mprotect", "mq_getsetattr", "mq_notify", "mq_open",
	"mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "msgctl", "msgget", "msgrcv",
	"msgsnd", "msync", "munlock", "munlockall", "munmap", "nanosleep",
	"newfstatat", "open", "openat", "openat2", "pause", "pidfd_getfd", "pidfd_open",
	"pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free", "pkey_mprotect", "poll",
	"ppoll", "prctl", "pread64", "preadv", "preadv2", "prlimit64", "process_madvise",
	"process_mrelease", "pselect6", "ptrace", "pwrite64", "pwritev", "pwritev2", "read",
	"readahead", "readlink", "readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg",
	"remap_file_pages", "removexattr", "rename", "renameat", "renameat2", "restart_syscall",
	"rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo",
	"rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo",
	"sched_get_priority_max", "sched_get_priority_min", "sched_getaffinity", "sched_getattr",
	"sched_getparam", "sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity",
	"sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield", "seccomp",
	"select", "semctl", "semget", "semop", "semtimedop", "sendfile", "sendmmsg", "sendmsg",
	"sendto", "set_robust_list", "set_thread_area", "set_tid_address", "setfsgid",
	"setfsuid", "setgid", "setgroups", "setitimer", "setpgid", "setpriority", "setregid",
	"setresgid", "setresuid", "setreuid", "setrlimit", "setsid", "setsockopt", "setuid",
	"setxattr", "shmat", "shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd",
	"signalfd4", "splice", "stat", "statfs", "statx", "symlink",
	"symlinkat", "sync", "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill", "time",
	"timer_create", "timer_delete", "timer_getoverrun", "timer_gettime", "timer_settime",
	"timerfd_create", "timerfd_gettime", "timerfd_settime", "times", "tkill", "truncate",
	"umask", "uname", "unlink", "unlinkat", "utime", "utimensat", "utimes", "vfork",
	"vmsplice", "wait4", "waitid", "write", "writev",
}

// namespaceFlags are the clone flags that would create namespaces.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// boxPolicy is the seccomp policy of a box: the allow-list, clone without
// namespace flags, sockets of the allowed families, and clone3
// reported as absent so that C libraries fall back to clone.
func boxPolicy() seccomp.Policy {
	return seccomp.Policy{
		DefaultAction: seccomp.ActionErrno,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionAllow, Names: allowedSyscalls},
			{Action: seccomp.ActionAllow, NamesWithCondtions: []seccomp.NameWithConditions{
				{Name: "clone", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.BitsNotSet, Value: namespaceFlags},
				}},
				// Socket families are an allow-list: unix, inet and inet6 (the
				// network namespace decides where they reach), and netlink
				// for the route protocol (a box reads and sets its own
				// interfaces) and audit. The rest are refused (EPERM, the
				// filter's default: the filter library compares syscall
				// numbers only before it loads arguments, so a group after
				// these conditions cannot answer another errno for socket).
				// Packet sockets see and
				// forge raw frames, vsock is not network-namespaced (it
				// reaches the hypervisor's side), and the others are kernel
				// surface no workload needs.
				{Name: "socket", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_UNIX},
				}},
				{Name: "socket", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_INET},
				}},
				{Name: "socket", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_INET6},
				}},
				{Name: "socket", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_NETLINK},
					{Argument: 2, Operation: seccomp.Equal, Value: unix.NETLINK_ROUTE},
				}},
				// Audit too: shadow's tools (useradd, passwd) give up when
				// they cannot open it; writing to it needs CAP_AUDIT_WRITE in
				// the host's user namespace, which no box has.
				{Name: "socket", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_NETLINK},
					{Argument: 2, Operation: seccomp.Equal, Value: unix.NETLINK_AUDIT},
				}},
				{Name: "socketpair", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_UNIX},
				}},
				// personality(2) only to query or set the default.
				{Name: "personality", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.Equal, Value: 0},
				}},
				{Name: "personality", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.Equal, Value: 0xffffffff},
				}},
			}},
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}
}

// loadSeccomp sets no_new_privs and installs the box policy on every
// thread of the calling process; it is inherited by all descendants.
func loadSeccomp() error {
	err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: boxPolicy()})
	if err != nil {
		return fmt.Errorf("load seccomp filter: %w", err)
	}
	return nil
}
