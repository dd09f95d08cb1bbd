/* Every partial note of nomu's syscall table (`nomu syscalls`), as a check.
 *
 *   partial_notes           under nomu: each note's stated difference holds
 *   partial_notes --linux   natively: Linux does what the note says nomu
 *                           does not (so each note is a real difference)
 *   partial_notes --list    the notes checked, as "SYSCALL: NOTE" lines
 *
 * tests/cli.rs compares --list with the table, so a note added, changed or
 * dropped without its check here fails; and once nomu provides what a note
 * says it lacks, the run under nomu fails until the note goes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Built against musl, without the kernel's headers. */
#define FIGETBSZ 2 /* _IO(0x00, 2), linux/fs.h */
#define FUTEX_LOCK_PI 6
#define FUTEX_UNLOCK_PI 7
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

static int on_linux;
static int failed;

/* Checks `cond`, which is what the current mode expects. */
#define EXPECT(cond, what)                                                     \
	do {                                                                   \
		if (!(cond)) {                                                 \
			printf("  FAIL (%s): %s [%s, errno %d %s]\n",          \
			       on_linux ? "Linux" : "nomu", what, #cond, errno, \
			       strerror(errno));                               \
			failed++;                                              \
		}                                                              \
	} while (0)

/* Whether a call returned -1 with `err`: nomu's answer for what it lacks. */
#define FAILS_WITH(r, err) ((r) == -1 && errno == (err))

static char scratch_path[64];

static int scratch_file(void)
{
	snprintf(scratch_path, sizeof(scratch_path), "/tmp/nomu-partial-notes-%d", (int)getpid());
	int fd = open(scratch_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		perror(scratch_path);
		exit(2);
	}
	unlink(scratch_path);
	return fd;
}

static void check_mmap(void)
{
	int fd = scratch_file();
	char page[4096];
	memset(page, 'a', sizeof(page));
	EXPECT(write(fd, page, sizeof(page)) == (ssize_t)sizeof(page), "a page of 'a'");
	char *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	EXPECT(m != MAP_FAILED, "MAP_PRIVATE of a file");
	if (m == MAP_FAILED)
		return;
	EXPECT(pwrite(fd, "b", 1, 0) == 1, "write()");
	/* Shared mappings see it on both (tests/guest/mmap_rw_coherent.c). */
	EXPECT(m[0] == (on_linux ? 'b' : 'a'), "write() shows in a private mapping only on Linux");
	munmap(m, 4096);
	close(fd);
}

static void check_ioctl(void)
{
	int fd = scratch_file();
	int block = 0;
	int r = ioctl(fd, FIGETBSZ, &block);
	if (on_linux)
		EXPECT(r == 0 && block > 0, "FIGETBSZ on a regular file");
	else
		EXPECT(FAILS_WITH(r, ENOTTY), "FIGETBSZ, neither a terminal query nor FIO*: ENOTTY");
	int n = -1;
	EXPECT(ioctl(fd, FIONREAD, &n) == 0 && n == 0, "FIONREAD works on both");
	close(fd);
}

static void check_mremap(void)
{
	char *a = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT(a != MAP_FAILED, "two anonymous pages");
	if (a == MAP_FAILED)
		return;
	a[0] = 'x';
	char *to = a + 4096;
	void *r = mremap(a, 4096, 4096, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	if (on_linux)
		EXPECT(r == to && to[0] == 'x', "MREMAP_FIXED moves the page");
	else
		EXPECT(r == MAP_FAILED && errno == EINVAL, "MREMAP_FIXED: EINVAL");
	char *b = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r = mremap(b, 4096, 4096, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
	if (on_linux)
		EXPECT(r != MAP_FAILED, "MREMAP_DONTUNMAP");
	else
		EXPECT(r == MAP_FAILED && errno == EINVAL, "MREMAP_DONTUNMAP: EINVAL");
}

/* Root may set the clock natively (to what it reads: a step back of
 * microseconds at most); the host's clock is never a guest's. */
static void check_clock_settime(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	long r = syscall(SYS_clock_settime, CLOCK_REALTIME, &now);
	EXPECT(on_linux ? geteuid() != 0 || r == 0 : FAILS_WITH(r, EPERM), "root sets CLOCK_REALTIME");
}

static void check_settimeofday(void)
{
	long r = syscall(SYS_settimeofday, NULL, NULL); /* sets nothing */
	EXPECT(on_linux ? geteuid() != 0 || r == 0 : FAILS_WITH(r, EPERM), "root may call it");
}

/* A child that exits at once, made by `r = <fork-like call>`: 1 when it
 * was made and reaped with status 0, 0 when none was made. */
static int reaped(long r)
{
	if (r == 0)
		_exit(0);
	if (r < 0)
		return 0;
	int st;
	return waitpid(r, &st, __WALL) == r && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int child_exits(void *arg)
{
	(void)arg;
	return 0;
}

static void check_clone(void)
{
	long r = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	EXPECT(reaped(r), "clone without CLONE_VM makes a process on both");
	static char stack[64 << 10];
	/* In a forked child: a thread on both (it was EAGAIN under nomu). */
	r = syscall(SYS_fork);
	if (r == 0) {
		static char tstack[64 << 10];
		int flags = CLONE_VM | CLONE_THREAD | CLONE_SIGHAND | CLONE_FS | CLONE_FILES | CLONE_SYSVSEM;
		errno = 0;
		long t = clone(child_exits, tstack + sizeof(tstack), flags, NULL);
		_exit(t > 0 ? 0 : 1);
	}
	EXPECT(reaped(r), "a thread in a forked child");
	int saved;
	const int shared[] = { CLONE_FILES, CLONE_FS, CLONE_SIGHAND, CLONE_PARENT };
	for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++) {
		int flags = CLONE_VM | CLONE_VFORK | shared[i] | (shared[i] == CLONE_PARENT ? 0 : SIGCHLD);
		r = clone(child_exits, stack + sizeof(stack), flags, NULL);
		saved = errno;
		if (on_linux) {
			/* CLONE_PARENT makes a sibling, which this process cannot reap. */
			EXPECT(shared[i] == CLONE_PARENT ? r > 0 : reaped(r), "a CLONE_VM process sharing more");
		} else {
			errno = saved;
			EXPECT(FAILS_WITH(r, EINVAL), "CLONE_FILES, CLONE_FS, CLONE_SIGHAND or CLONE_PARENT: EINVAL");
		}
	}
	r = clone(child_exits, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
	EXPECT(reaped(r), "a CLONE_VM|CLONE_VFORK child works on both");
	/* An exit signal other than SIGCHLD (here 0) makes a "clone" child,
	 * which waitpid without __WALL or __WCLONE does not see; under nomu
	 * it is a SIGCHLD one. */
	r = clone(child_exits, stack + sizeof(stack), CLONE_VM | CLONE_VFORK, NULL);
	EXPECT(r > 0, "a child with exit signal 0 works on both");
	if (r > 0) {
		int st;
		errno = 0;
		long w = waitpid((pid_t)r, &st, WNOHANG);
		EXPECT(on_linux ? FAILS_WITH(w, ECHILD) : w == r, "exit signal 0: a clone child only on Linux");
		if (on_linux)
			waitpid((pid_t)r, &st, __WALL);
	}
}

/* struct clone_args (linux/sched.h), and a clone3 whose child exits at
 * once with status 0, touching no memory. */
struct clone3_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
		set_tid_size, cgroup;
};

static long clone3_exit(struct clone3_args *a)
{
	long ret;
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "xor %%edi, %%edi\n\t"
			 "mov $60, %%eax\n\t"
			 "syscall\n\t"
			 "1:"
			 : "=a"(ret)
			 : "a"((long)SYS_clone3), "D"(a), "S"(sizeof(*a))
			 : "rcx", "r11", "memory");
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

static void check_clone3(void)
{
	/* An exit signal of 0 makes a "clone" child, which waitpid without
	 * __WALL or __WCLONE does not see; under nomu it is a SIGCHLD one. */
	struct clone3_args a = { .flags = CLONE_VM | CLONE_VFORK };
	long r = clone3_exit(&a);
	EXPECT(r > 0, "a CLONE_VM|CLONE_VFORK child works on both");
	if (r > 0) {
		int st;
		errno = 0;
		long w = waitpid((pid_t)r, &st, WNOHANG);
		EXPECT(on_linux ? FAILS_WITH(w, ECHILD) : w == r, "exit signal 0: a clone child only on Linux");
		if (on_linux)
			waitpid((pid_t)r, &st, __WALL);
	}
	/* CLONE_CLEAR_SIGHAND resets handlers. */
	int saved;
	struct clone3_args c = { .flags = CLONE_VM | CLONE_VFORK | 0x100000000ULL /* CLONE_CLEAR_SIGHAND */,
				 .exit_signal = SIGCHLD };
	r = clone3_exit(&c);
	saved = errno;
	EXPECT(reaped(r) == on_linux, "CLONE_CLEAR_SIGHAND makes a process only on Linux");
	errno = saved;
	if (!on_linux)
		EXPECT(FAILS_WITH(r, EINVAL), "CLONE_CLEAR_SIGHAND: EINVAL");
	/* set_tid (a pid of the caller's choosing, for root: this test runs
	 * natively as root in `make test`) and CLONE_INTO_CGROUP (a cgroup
	 * descriptor): nomu refuses both. */
	pid_t want = 32767; /* below pid_max (natively read; at least 32768) */
	FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
	if (f) {
		if (fscanf(f, "%d", &want) == 1)
			want--;
		fclose(f);
	}
	struct clone3_args d = { .flags = CLONE_VM | CLONE_VFORK,
				 .exit_signal = SIGCHLD,
				 .set_tid = (uintptr_t)&want,
				 .set_tid_size = 1 };
	/* (natively, the next lower pid while one is in use) */
	while ((r = clone3_exit(&d)) == -1 && errno == EEXIST && want > 1000)
		want--;
	saved = errno;
	if (on_linux && geteuid() == 0)
		EXPECT(r == want && reaped(r), "set_tid gives root the pid it asks for on Linux");
	else if (!on_linux)
		EXPECT(FAILS_WITH(r, EINVAL), "set_tid: EINVAL");
	else
		reaped(r);
	errno = saved;
	int cg = open("/sys/fs/cgroup", O_RDONLY | O_DIRECTORY);
	struct clone3_args e = { .flags = CLONE_VM | CLONE_VFORK | 0x200000000ULL /* CLONE_INTO_CGROUP */,
				 .exit_signal = SIGCHLD,
				 .cgroup = cg < 0 ? 0 : (uint64_t)cg };
	r = clone3_exit(&e);
	saved = errno;
	if (!on_linux) {
		errno = saved;
		EXPECT(FAILS_WITH(r, EINVAL), "CLONE_INTO_CGROUP: EINVAL");
	} else if (r > 0) {
		reaped(r);
	}
	if (cg >= 0)
		close(cg);
}

static void check_mincore(void)
{
	/* Pages a mapping wrote and gave back, mapped again and not touched:
	 * Linux has none resident; nomu zeroed them by writing, and they
	 * hold data. */
	size_t len = 16 * 4096;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT(m != MAP_FAILED, "mmap");
	memset(m, 1, len);
	munmap(m, len);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char vec[16];
	EXPECT(mincore(m, len, vec) == 0, "mincore");
	int resident = 0;
	for (int i = 0; i < 16; i++)
		resident += vec[i] & 1;
	EXPECT(on_linux ? resident == 0 : resident > 0, "untouched pages resident");
	munmap(m, len);
}

static void check_inotify_add_watch(void)
{
	int in = inotify_init1(IN_CLOEXEC);
	EXPECT(in >= 0, "inotify_init1");
	int wd = inotify_add_watch(in, "/proc/self", IN_ALL_EVENTS);
	EXPECT(on_linux ? wd > 0 : FAILS_WITH(wd, EACCES), "a watch in /proc");
	close(in);
}

static void check_vmsplice(void)
{
	/* A page of its own, stored to after the vmsplice: Linux's pipe holds
	 * the page itself and the reader sees the later store; nomu's holds a
	 * copy. */
	char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int p[2];
	EXPECT(page != MAP_FAILED && pipe(p) == 0, "a page and a pipe");
	memcpy(page, "before", 6);
	struct iovec iov = { page, 6 };
	EXPECT(vmsplice(p[1], &iov, 1, 0) == 6, "vmsplice");
	memcpy(page, "after!", 6);
	char got[7] = { 0 };
	EXPECT(read(p[0], got, 6) == 6, "read");
	EXPECT(on_linux ? !strcmp(got, "after!") : !strcmp(got, "before"), "what the reader sees");
	close(p[0]);
	close(p[1]);
	munmap(page, 4096);
}

static void check_getrusage(void)
{
	/* The vfork child shares this memory: 8 MiB of it touched, so that
	 * the kernel's (per-CPU, lazily summed) RSS count is well above 0. */
	static char touched[8 << 20];
	memset(touched, 1, sizeof(touched));
	EXPECT(reaped(vfork()), "a child to account for");
	struct rusage ru;
	EXPECT(getrusage(RUSAGE_CHILDREN, &ru) == 0, "getrusage");
	/* Linux counts the waited child's peak memory; nomu only CPU times. */
	EXPECT(on_linux ? ru.ru_maxrss > 0 : ru.ru_maxrss == 0, "ru_maxrss of children");
}

static void check_prctl(void)
{
	int r = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	EXPECT(on_linux ? r > 0 : FAILS_WITH(r, EINVAL), "PR_GET_TIMERSLACK, an option not provided");
	char name[16] = "";
	EXPECT(prctl(PR_SET_NAME, "partial", 0, 0, 0) == 0 && prctl(PR_GET_NAME, name, 0, 0, 0) == 0 &&
		       !strcmp(name, "partial"),
	       "PR_SET/GET_NAME works on both");
}

static int set_limit(int use_prlimit, int resource, rlim_t cur, struct rlimit *old)
{
	struct rlimit now;
	if (getrlimit(resource, &now))
		return -1;
	if (old)
		*old = now;
	now.rlim_cur = cur;
	return use_prlimit ? prlimit(0, resource, &now, NULL) : setrlimit(resource, &now);
}

/* Uses `depth` * 16 KiB of stack, a page at a time. */
static int deep(int depth)
{
	volatile char frame[16384];
	for (size_t i = 0; i < sizeof(frame); i += 4096)
		frame[i] = (char)depth;
	return depth ? deep(depth - 1) + frame[0] : frame[0];
}

/* "limits are recorded; NOFILE, NPROC, CPU, FSIZE, AS, DATA and MEMLOCK are
 * enforced, STACK at exec only", through setrlimit or prlimit64. */
static void check_limits(int use_prlimit)
{
	struct rlimit old, now;
	/* Recorded, but a lowered RLIMIT_STACK does not hold the running
	 * stack: on Linux the stack cannot grow past it (SIGSEGV); nomu's
	 * stack was made whole at exec. Its enforcement of RLIMIT_AS and
	 * DATA: tests/guest/rlimit_vm.c. */
	pid_t c = fork();
	if (c == 0) {
		if (set_limit(use_prlimit, RLIMIT_STACK, 256 << 10, NULL) != 0 || getrlimit(RLIMIT_STACK, &now) != 0 ||
		    now.rlim_cur != 256 << 10)
			_exit(2);
		_exit(deep(128) == -1 ? 3 : 0);
	}
	int st = 0;
	EXPECT(waitpid(c, &st, 0) == c, "a child");
	EXPECT(on_linux ? WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV : WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "a stack growing past RLIMIT_STACK");
	/* RLIMIT_NOFILE is enforced on both (RLIMIT_NPROC too: tests/guest/nproc.c;
	 * RLIMIT_CPU: tests/guest/cpu_timers.c; RLIMIT_FSIZE: fsize_limit.c). */
	EXPECT(set_limit(use_prlimit, RLIMIT_NOFILE, 16, &old) == 0, "RLIMIT_NOFILE = 16");
	int last = -1;
	for (;;) {
		int d = dup(0);
		if (d < 0)
			break;
		last = d;
	}
	EXPECT(errno == EMFILE && last == 15, "descriptors stop at RLIMIT_NOFILE");
	for (int d = 3; d <= last; d++)
		close(d);
	EXPECT(setrlimit(RLIMIT_NOFILE, &old) == 0, "RLIMIT_NOFILE back");
}

static void check_setrlimit(void)
{
	check_limits(0);
}

static void check_prlimit64(void)
{
	check_limits(1);
}

/* Two real-time waiters for a PI lock: the later one has the higher
 * priority. */
static volatile uint32_t pi_word;
static int pi_order[2], pi_served;

static void *pi_waiter(void *arg)
{
	syscall(SYS_futex, &pi_word, FUTEX_LOCK_PI, 0, NULL, NULL, 0);
	pi_order[pi_served++] = (int)(long)arg;
	syscall(SYS_futex, &pi_word, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0);
	return NULL;
}

static int start_rt_waiter(pthread_t *t, int prio, long who)
{
	pthread_attr_t a;
	struct sched_param p = { .sched_priority = prio };
	pthread_attr_init(&a);
	pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&a, SCHED_FIFO);
	pthread_attr_setschedparam(&a, &p);
	return pthread_create(t, &a, pi_waiter, (void *)who);
}

static void check_futex(void)
{
	pthread_t low, high;
	struct timespec pause = { 0, 50000000 };
	pi_word = 0;
	pi_served = 0;
	syscall(SYS_futex, &pi_word, FUTEX_LOCK_PI, 0, NULL, NULL, 0);
	int r = start_rt_waiter(&low, 1, 1);
	if (r == 0) {
		nanosleep(&pause, NULL);
		r = start_rt_waiter(&high, 50, 2);
		if (r == 0)
			nanosleep(&pause, NULL);
	}
	syscall(SYS_futex, &pi_word, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0);
	if (r != 0) {
		/* No real-time priorities for this user: nothing to compare. */
		printf("  (futex: SCHED_FIFO threads not allowed here, %s)\n", strerror(r));
		return;
	}
	pthread_join(low, NULL);
	pthread_join(high, NULL);
	if (on_linux)
		EXPECT(pi_order[0] == 2, "the higher-priority waiter gets the PI lock first");
	else
		EXPECT(pi_order[0] == 1, "the first waiter gets the PI lock first");
}

static volatile int thread_may_end;

static void *idle_thread(void *arg)
{
	(void)arg;
	while (!thread_may_end)
		sched_yield();
	return NULL;
}

static void check_close_range(void)
{
	pthread_t t;
	thread_may_end = 0;
	if (pthread_create(&t, NULL, idle_thread, NULL)) {
		EXPECT(0, "a thread to share the table with");
		return;
	}
	int fd = open("/dev/null", O_RDONLY);
	int r = syscall(SYS_close_range, fd, fd, 2 /* CLOSE_RANGE_UNSHARE */);
	int open_now = fcntl(fd, F_GETFD) != -1;
	if (on_linux)
		EXPECT(r == 0 && !open_now, "CLOSE_RANGE_UNSHARE with another thread: the caller's own table, closed");
	else
		EXPECT(FAILS_WITH(r, EINVAL) && open_now, "CLOSE_RANGE_UNSHARE with another thread: EINVAL");
	thread_may_end = 1;
	pthread_join(t, NULL);
	close(fd);
	r = syscall(SYS_close_range, fd, fd, 2);
	EXPECT(r == 0, "CLOSE_RANGE_UNSHARE alone works on both");
}

/* memfd_secret's pages are nomu's from ftruncate on: a mapping must lie
 * within the size. */
static void check_memfd_secret(void)
{
	int fd = syscall(447, 0);
	if (fd < 0) {
		EXPECT(0, "memfd_secret");
		return;
	}
	EXPECT(ftruncate(fd, 4096) == 0, "ftruncate sets the size");
	void *p = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (on_linux)
		EXPECT(p != MAP_FAILED, "a mapping past the size is made");
	else
		EXPECT(p == MAP_FAILED && errno == ENXIO, "a mapping past the size: ENXIO");
	if (p != MAP_FAILED)
		munmap(p, 2 * 4096);
	close(fd);
}

/* A segment has one address; its pages' protection is the segment's. */
static void check_shmat(void)
{
	int id = shmget(IPC_PRIVATE, 2 * 4096, 0600);
	EXPECT(id >= 0, "a private segment");
	if (id < 0)
		return;
	char *p = shmat(id, NULL, 0);
	EXPECT(p != (void *)-1, "attached anywhere");
	/* A second attach in one process. */
	char *q = shmat(id, NULL, 0);
	EXPECT(on_linux ? q != (void *)-1 && q != p : FAILS_WITH((long)q, EINVAL), "a second attach only on Linux");
	if (q != (void *)-1)
		shmdt(q);
	/* At an address of the caller's choosing (free: it was just unmapped). */
	char *free_at = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT(free_at != MAP_FAILED && munmap(free_at, 2 * 4096) == 0, "a free range");
	q = shmat(id, free_at, 0);
	EXPECT(on_linux ? q == free_at : FAILS_WITH((long)q, EINVAL), "another address only on Linux");
	if (q != (void *)-1)
		shmdt(q);
	/* mprotect of an attachment binds only syscalls under nomu: a store
	 * goes through where Linux faults. */
	EXPECT(mprotect(p, 4096, PROT_READ) == 0, "mprotect of an attachment");
	int fds[2];
	EXPECT(pipe(fds) == 0 && write(fds[1], "ab", 2) == 2, "a pipe");
	EXPECT(read(fds[0], p, 1) == -1 && errno == EFAULT, "read() into it is EFAULT on both");
	close(fds[0]);
	close(fds[1]);
	if (!on_linux) {
		p[0] = 'x';
		EXPECT(p[0] == 'x', "a store through a read-only attachment goes through under nomu");
	} else {
		pid_t c = vfork();
		if (c == 0) {
			p[0] = 'x';
			_exit(0);
		}
		int st = 0;
		EXPECT(waitpid(c, &st, 0) == c && WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
		       "a store through a read-only attachment faults on Linux");
	}
	shmdt(p);
	shmctl(id, IPC_RMID, NULL);
}

static void check_socket(void)
{
	int fd = socket(AF_NETLINK, SOCK_DGRAM, 15 /* NETLINK_KOBJECT_UEVENT */);
	if (on_linux)
		EXPECT(fd >= 0, "NETLINK_KOBJECT_UEVENT sockets exist");
	else
		EXPECT(FAILS_WITH(fd, EPROTONOSUPPORT), "NETLINK_KOBJECT_UEVENT: EPROTONOSUPPORT");
	close(fd);
	fd = socket(AF_NETLINK, SOCK_DGRAM, 0 /* NETLINK_ROUTE */);
	EXPECT(fd >= 0, "NETLINK_ROUTE works on both");
	close(fd);
	fd = socket(AF_NETLINK, SOCK_DGRAM, 4 /* NETLINK_SOCK_DIAG */);
	EXPECT(fd >= 0, "NETLINK_SOCK_DIAG works on both");
	close(fd);
}

/* A datagram with credentials from an unconnected sender: its pid. */
static void check_credentials(int use_recvmmsg)
{
	char name[64];
	int n = snprintf(name + 1, sizeof(name) - 1, "nomu-partial-creds-%d", getpid());
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	name[0] = 0;
	memcpy(a.sun_path, name, n + 1);
	socklen_t len = offsetof(struct sockaddr_un, sun_path) + n + 1;
	int r = socket(AF_UNIX, SOCK_DGRAM, 0), s = socket(AF_UNIX, SOCK_DGRAM, 0), one = 1;
	EXPECT(bind(r, (struct sockaddr *)&a, len) == 0, "bind works on both");
	setsockopt(r, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	EXPECT(sendto(s, "x", 1, 0, (struct sockaddr *)&a, len) == 1, "sendto works on both");
	char buf[4], cbuf[CMSG_SPACE(sizeof(struct ucred))];
	struct iovec iov = { buf, sizeof(buf) };
	struct mmsghdr mm = { .msg_hdr = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
					   .msg_controllen = sizeof(cbuf) } };
	int got = use_recvmmsg ? recvmmsg(r, &mm, 1, 0, NULL) == 1 : recvmsg(r, &mm.msg_hdr, 0) == 1;
	EXPECT(got, "the datagram arrives on both");
	struct cmsghdr *c = CMSG_FIRSTHDR(&mm.msg_hdr);
	struct ucred cr = { 0 };
	if (c && c->cmsg_type == SCM_CREDENTIALS)
		memcpy(&cr, CMSG_DATA(c), sizeof(cr));
	if (on_linux)
		EXPECT(cr.pid == getpid(), "the sender's pid");
	else
		EXPECT(cr.pid != getpid(), "a host pid, not the sender's");
	close(r);
	close(s);
}

/* Sends `msg` to the kernel on netlink socket `s`, by sendto or sendmsg. */
static long send_to_kernel(int s, void *msg, size_t len, int use_sendmsg)
{
	struct sockaddr_nl_ {
		unsigned short family, pad;
		uint32_t pid, groups;
	} kernel = { AF_NETLINK, 0, 0, 0 };
	struct iovec iov = { msg, len };
	struct msghdr m = { .msg_name = &kernel, .msg_namelen = sizeof(kernel), .msg_iov = &iov, .msg_iovlen = 1 };
	return use_sendmsg ? sendmsg(s, &m, 0) : sendto(s, msg, len, 0, (void *)&kernel, sizeof(kernel));
}

/* An rtnetlink request that changes something (RTM_NEWROUTE, with a
 * destination length no route can have, so Linux refuses it after its
 * permission check: nothing changes on the host either way) is sent on
 * Linux, which answers in an acknowledgement; nomu refuses to send it. */
static void check_netlink_change(int use_sendmsg)
{
	int s = socket(AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */);
	EXPECT(s >= 0, "a NETLINK_ROUTE socket on both");
	/* nlmsghdr (len, type 24 = RTM_NEWROUTE, flags NLM_F_REQUEST|NLM_F_ACK),
	 * then struct rtmsg: AF_INET, dst_len 33. */
	uint32_t msg[7] = { 28, 24 | (5u << 16), 1, 0, 2 | (33 << 8) | (0u << 16), 254 | (3 << 8), 1 << 24 };
	long r = send_to_kernel(s, msg, sizeof(msg), use_sendmsg);
	if (on_linux)
		EXPECT(r == (long)sizeof(msg), "sent, answered in an acknowledgement");
	else
		EXPECT(FAILS_WITH(r, EPERM), "RTM_NEWROUTE: EPERM");
	close(s);
}

/* iptables' table replacement on a raw socket: a root nomu's host would
 * take it (here it fails on its garbage, or for want of the module: not
 * for permission); nomu refuses it first. */
static void check_setsockopt(void)
{
	int s = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	EXPECT(s >= 0, "a raw socket (the tests run as root)");
	char garbage[8] = { 0 };
	int r = setsockopt(s, IPPROTO_IP, 64 /* IPT_SO_SET_REPLACE */, garbage, sizeof(garbage));
	if (on_linux)
		EXPECT(r == -1 && errno != EPERM, "refused for its garbage, not for permission");
	else
		EXPECT(FAILS_WITH(r, EPERM), "IPT_SO_SET_REPLACE: EPERM");
	close(s);
}

/* A sock_diag SOCK_DESTROY of a TCP socket no one has (all ports and
 * addresses zero, so Linux finds none to close: nothing changes either
 * way) is sent on Linux, which answers in an acknowledgement; nomu refuses
 * to send it. */
static void check_sock_destroy(int use_sendmsg)
{
	int s = socket(AF_NETLINK, SOCK_RAW, 4 /* NETLINK_SOCK_DIAG */);
	EXPECT(s >= 0, "a NETLINK_SOCK_DIAG socket on both");
	/* nlmsghdr (len 72, type 21 = SOCK_DESTROY, flags NLM_F_REQUEST|NLM_F_ACK),
	 * then struct inet_diag_req_v2: AF_INET, IPPROTO_TCP, every state, an
	 * all-zero inet_diag_sockid but for its cookie (INET_DIAG_NOCOOKIE). */
	uint32_t msg[18] = { 72, 21 | (5u << 16), 1, 0, 2 | (6 << 8), 0xffffffffu };
	msg[16] = msg[17] = 0xffffffffu;
	long r = send_to_kernel(s, msg, sizeof(msg), use_sendmsg);
	if (on_linux)
		EXPECT(r == (long)sizeof(msg), "sent, answered in an acknowledgement");
	else
		EXPECT(FAILS_WITH(r, EPERM), "SOCK_DESTROY: EPERM");
	close(s);
}

static void check_sendto(void)
{
	check_netlink_change(0);
	check_sock_destroy(0);
}

static void check_sendmsg(void)
{
	check_netlink_change(1);
	check_sock_destroy(1);
}

static void check_recvmsg(void)
{
	check_credentials(0);
}

static void check_recvmmsg(void)
{
	check_credentials(1);
}

static const struct note {
	const char *syscall;
	const char *note;
	void (*check)(void);
} notes[] = {
	{ "mmap",
	  "a MAP_PRIVATE mapping of a file shows the file as it was at mmap: a later write of the file does not show in it (Linux's shows it in pages not yet written)",
	  check_mmap },
	{ "ioctl", "terminal queries, FIO* and socket queries only", check_ioctl },
	{ "shmat",
	  "a segment has one address, the same in every process (no MMU): shmat at another address, or a second "
	  "attach in one process, is EINVAL; the pages' protection is the segment's (writable while any attachment "
	  "is), so SHM_RDONLY and mprotect bind only syscalls then",
	  check_shmat },
	{ "mremap", "MREMAP_FIXED and MREMAP_DONTUNMAP are EINVAL", check_mremap },
	{ "clock_settime", "the host's clock: EPERM, even for root", check_clock_settime },
	{ "settimeofday", "the host's clock: EPERM, even for root", check_settimeofday },
	{ "clone",
	  "a process with CLONE_FILES, CLONE_FS, CLONE_SIGHAND or CLONE_PARENT: EINVAL; the exit signal is always "
	  "SIGCHLD; in a forked child (a host process of its own) a CLONE_VM child gets a copy of its memory",
	  check_clone },
	{ "mincore", "a page counts as resident when nomu's physical memory holds data for it: untouched pages another mapping used before count",
	  check_mincore },
	{ "inotify_add_watch", "paths in nomu's /proc cannot be watched (EACCES)", check_inotify_add_watch },
	{ "vmsplice", "copies the data into the pipe (Linux's pipe holds the pages: later stores to them show in what is read)",
	  check_vmsplice },
	{ "clone3",
	  "what clone provides, with clone's limits; the exit signal is always SIGCHLD; "
	  "CLONE_CLEAR_SIGHAND, CLONE_INTO_CGROUP and set_tid: EINVAL",
	  check_clone3 },
	{ "socket",
	  "AF_UNIX, AF_INET, AF_INET6, AF_PACKET, NETLINK_ROUTE and NETLINK_SOCK_DIAG only: other families are "
	  "EAFNOSUPPORT, other netlink protocols EPROTONOSUPPORT",
	  check_socket },
	{ "setsockopt",
	  "netfilter table changes (iptables' IPT_SO_SET_*...), multicast routing (MRT_*) and IPVS settings are EPERM, "
	  "even for root",
	  check_setsockopt },
	{ "sendto",
	  "an rtnetlink request that would change the host's network (anything but RTM_GET*), or a sock_diag "
	  "SOCK_DESTROY, is EPERM, even for root; Linux answers it in an NLMSG_ERROR acknowledgement",
	  check_sendto },
	{ "sendmsg",
	  "an rtnetlink request that would change the host's network (anything but RTM_GET*), or a sock_diag "
	  "SOCK_DESTROY, is EPERM, even for root; Linux answers it in an NLMSG_ERROR acknowledgement",
	  check_sendmsg },
	{ "recvmsg", "SCM_CREDENTIALS from a datagram sender other than the socket's peer carry a host pid", check_recvmsg },
	{ "getrusage", "CPU times only for RUSAGE_CHILDREN", check_getrusage },
	{ "prctl", "PR_SET/GET_NAME, PDEATHSIG (recorded), DUMPABLE, NO_NEW_PRIVS, KEEPCAPS, CAPBSET_READ/DROP, CAP_AMBIENT, GET_SECUREBITS", check_prctl },
	{ "setrlimit", "limits are recorded; NOFILE, NPROC, CPU, FSIZE, AS, DATA and MEMLOCK are enforced, STACK at exec only", check_setrlimit },
	{ "futex", "PI futexes: no priority inheritance; waiters get the lock in the order they came, not by priority",
	  check_futex },
	{ "prlimit64", "limits are recorded; NOFILE, NPROC, CPU, FSIZE, AS, DATA and MEMLOCK are enforced, STACK at exec only", check_prlimit64 },
	{ "recvmmsg", "SCM_CREDENTIALS from a datagram sender other than the socket's peer carry a host pid",
	  check_recvmmsg },
	{ "close_range", "CLOSE_RANGE_UNSHARE in a process with other threads: EINVAL (threads share one table)",
	  check_close_range },
	{ "memfd_secret",
	  "pages are taken when ftruncate sets the size (charged to --mem: ENOMEM there); a mapping past that size is ENXIO (Linux maps it and an access there is SIGBUS)",
	  check_memfd_secret },
};

int main(int argc, char **argv)
{
	const size_t count = sizeof(notes) / sizeof(notes[0]);
	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (size_t i = 0; i < count; i++)
			printf("%s: %s\n", notes[i].syscall, notes[i].note);
		return 0;
	}
	on_linux = argc == 2 && !strcmp(argv[1], "--linux");
	if (argc > 1 && !on_linux) {
		fprintf(stderr, "usage: %s [--linux | --list]\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < count; i++) {
		int before = failed;
		notes[i].check();
		printf("%s: %s\n", notes[i].syscall, failed == before ? "holds" : "FAILED");
	}
	return failed ? 1 : 0;
}
