/* fork(2) and clone without CLONE_VM: the child has a copy of its
 * parent's memory at the same addresses, shares its open file descriptions,
 * and is a process like any other (wait, signals, exec, its own crash).
 * Under nomu it runs in a host process of its own (issue 18). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int global = 1;

/* Waits for `pid`; its exit code, or 128 + the signal that ended it. */
static int wait_status(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -2;
}

static void fork_exit_wait(void)
{
	pid_t p = fork();
	if (p == 0)
		_exit(42);
	CHECK(p > 0);
	CHECK_EQ(wait_status(p), 42);
	/* The raw syscalls too: fork, and clone with only an exit signal. */
	long r = syscall(SYS_fork);
	if (r == 0)
		syscall(SYS_exit_group, 7);
	CHECK_EQ(wait_status((pid_t)r), 7);
	r = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		syscall(SYS_exit_group, 8);
	CHECK_EQ(wait_status((pid_t)r), 8);
	CHECK_ERR(waitpid(-1, NULL, WNOHANG), ECHILD);
}

/* Writes on each side after the fork are the writer's alone. */
static void memory_is_copied(void)
{
	int local = 10;
	char *heap = malloc(64);
	strcpy(heap, "parent");
	size_t big = 4 << 20;
	char *m = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	memset(m, 'p', big);
	int pipefd[2], back[2];
	CHECK_OK(pipe(pipefd));
	CHECK_OK(pipe(back));
	pid_t p = fork();
	if (p == 0) {
		int ok = global == 1 && local == 10 && !strcmp(heap, "parent") && m[0] == 'p' && m[big - 1] == 'p';
		global = 2;
		local = 20;
		strcpy(heap, "child");
		memset(m, 'c', big);
		char c;
		/* Tell the parent to write, then look: its writes are not ours. */
		if (write(back[1], "w", 1) != 1 || read(pipefd[0], &c, 1) != 1)
			_exit(3);
		ok = ok && global == 2 && local == 20 && !strcmp(heap, "child") && m[4096] == 'c';
		_exit(ok ? 0 : 1);
	}
	char c;
	CHECK_EQ(read(back[0], &c, 1), 1);
	/* The child has written everything: none of it shows here. */
	CHECK_EQ(global, 1);
	CHECK_EQ(local, 10);
	CHECK(!strcmp(heap, "parent"));
	CHECK(m[0] == 'p' && m[big - 1] == 'p');
	global = 3;
	memset(m, 'q', big);
	CHECK_EQ(write(pipefd[1], "g", 1), 1);
	CHECK_EQ(wait_status(p), 0);
	global = 1;
	munmap(m, big);
	free(heap);
	close(pipefd[0]);
	close(pipefd[1]);
	close(back[0]);
	close(back[1]);
}

/* MAP_SHARED mappings stay shared with the child (anonymous, and a
 * file's), both ways; a private one does not. */
static void shared_mappings(void)
{
	int *anon = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(anon != MAP_FAILED);
	anon[0] = 1;
	char path[] = "/tmp/nomu-fork-shared-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK_OK(ftruncate(fd, 4096));
	int *file = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(file != MAP_FAILED);
	file[0] = 10;
	int *priv = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	priv[0] = 100;
	int go[2], back[2];
	CHECK_OK(pipe(go));
	CHECK_OK(pipe(back));
	pid_t p = fork();
	if (p == 0) {
		int ok = anon[0] == 1 && file[0] == 10 && priv[0] == 100;
		anon[0] = 2;
		anon[1024] = 3;
		file[0] = 11;
		priv[0] = 101;
		char c;
		if (write(back[1], "w", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(3);
		ok = ok && anon[0] == 4 && file[0] == 12 && priv[0] == 101;
		_exit(ok ? 0 : 1);
	}
	char c;
	CHECK_EQ(read(back[0], &c, 1), 1);
	CHECK_EQ(anon[0], 2);
	CHECK_EQ(anon[1024], 3);
	CHECK_EQ(file[0], 11);
	CHECK_EQ(priv[0], 100);
	anon[0] = 4;
	file[0] = 12;
	CHECK_EQ(write(go[1], "g", 1), 1);
	CHECK_EQ(wait_status(p), 0);
	/* What both wrote reaches the file. */
	CHECK_OK(munmap(file, 4096));
	int v = 0;
	CHECK_EQ(pread(fd, &v, sizeof v, 0), (long)sizeof v);
	CHECK_EQ(v, 12);
	close(fd);
	unlink(path);
	munmap(anon, 8192);
	munmap(priv, 4096);
	close(go[0]);
	close(go[1]);
	close(back[0]);
	close(back[1]);
}

/* A process-shared semaphore in a MAP_SHARED mapping: a wait in one
 * process ends on a post in the other (futexes on the shared page). */
static void shared_futex(void)
{
	sem_t *sem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sem != MAP_FAILED);
	CHECK_OK(sem_init(&sem[0], 1, 0));
	CHECK_OK(sem_init(&sem[1], 1, 0));
	pid_t p = fork();
	if (p == 0) {
		for (int i = 0; i < 100; i++)
			if (sem_wait(&sem[0]) != 0 || sem_post(&sem[1]) != 0)
				_exit(1);
		_exit(0);
	}
	int ok = 1;
	for (int i = 0; i < 100; i++)
		ok = ok && sem_post(&sem[0]) == 0 && sem_wait(&sem[1]) == 0;
	CHECK(ok);
	CHECK_EQ(wait_status(p), 0);
	munmap(sem, 4096);
}

/* A child's own mappings: mmap, mprotect, munmap, brk (malloc), mremap. */
static void child_maps_memory(void)
{
	pid_t p = fork();
	if (p == 0) {
		int ok = 1;
		for (int i = 0; i < 50; i++) {
			char *q = malloc(1000 + i * 5000);
			ok = ok && q;
			memset(q, i, 1000 + i * 5000);
		}
		char *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		ok = ok && m != MAP_FAILED;
		m[0] = 1;
		m[8192] = 2;
		ok = ok && mprotect(m, 4096, PROT_READ) == 0 && m[0] == 1;
		char *r = mremap(m + 4096, 8192, 5 * 4096, MREMAP_MAYMOVE);
		ok = ok && r != MAP_FAILED && r[4096] == 2;
		r[5 * 4096 - 1] = 3;
		ok = ok && munmap(m, 4096) == 0 && munmap(r, 5 * 4096) == 0;
		_exit(ok ? 0 : 1);
	}
	CHECK_EQ(wait_status(p), 0);
	/* Memory the child unmapped is gone for it: touching it kills it. */
	p = fork();
	if (p == 0) {
		char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		m[0] = 1;
		munmap(m, 4096);
		*(volatile char *)m = 2;
		_exit(0);
	}
	CHECK_EQ(wait_status(p), 128 + SIGSEGV);
	/* And memory it made read-only. */
	p = fork();
	if (p == 0) {
		char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		m[0] = 1;
		mprotect(m, 4096, PROT_READ);
		*(volatile char *)m = 2;
		_exit(0);
	}
	CHECK_EQ(wait_status(p), 128 + SIGSEGV);
}

/* Both share the open file description: one offset. */
static void shared_offsets(void)
{
	char path[] = "/tmp/nomu-fork-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	CHECK_EQ(write(fd, "ab", 2), 2);
	pid_t p = fork();
	if (p == 0)
		_exit(write(fd, "cd", 2) == 2 ? 0 : 1);
	CHECK_EQ(wait_status(p), 0);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 4);
	CHECK_EQ(write(fd, "ef", 2), 2);
	char buf[8] = { 0 };
	CHECK_EQ(pread(fd, buf, 6, 0), 6);
	CHECK(!strcmp(buf, "abcdef"));
	close(fd);
}

/* A pipeline of two forked children, as a shell makes one. */
static void pipeline(void)
{
	int fds[2];
	CHECK_OK(pipe(fds));
	pid_t w = fork();
	if (w == 0) {
		close(fds[0]);
		for (int i = 0; i < 1000; i++)
			if (write(fds[1], "0123456789", 10) != 10)
				_exit(1);
		_exit(0);
	}
	int out[2];
	CHECK_OK(pipe(out));
	pid_t r = fork();
	if (r == 0) {
		close(fds[1]);
		close(out[0]);
		char buf[4096];
		long total = 0, n;
		while ((n = read(fds[0], buf, sizeof buf)) > 0)
			total += n;
		_exit(write(out[1], &total, sizeof total) == sizeof total ? 0 : 1);
	}
	close(fds[0]);
	close(fds[1]);
	close(out[1]);
	long total = 0;
	CHECK_EQ(read(out[0], &total, sizeof total), (long)sizeof total);
	CHECK_EQ(total, 10000);
	close(out[0]);
	CHECK_EQ(wait_status(w), 0);
	CHECK_EQ(wait_status(r), 0);
}

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static int holder_ready[2], holder_go[2];

static void *holder(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&held);
	char c = 'r';
	if (write(holder_ready[1], &c, 1) != 1 || read(holder_go[0], &c, 1) != 1)
		return NULL;
	pthread_mutex_unlock(&held);
	return NULL;
}

/* Only the calling thread is copied: a mutex another thread holds stays
 * held in the child. */
static void multithreaded_parent(void)
{
	CHECK_OK(pipe(holder_ready));
	CHECK_OK(pipe(holder_go));
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, holder, NULL), 0);
	char c;
	CHECK_EQ(read(holder_ready[0], &c, 1), 1);
	pid_t p = fork();
	if (p == 0)
		_exit(pthread_mutex_trylock(&held) == EBUSY ? 0 : 1);
	CHECK_EQ(wait_status(p), 0);
	CHECK_EQ(write(holder_go[1], "g", 1), 1);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(pthread_mutex_trylock(&held), 0);
	pthread_mutex_unlock(&held);
}

/* fork + execve of this same program (argv[1] = "exec": exit 33). */
static void fork_exec(const char *self)
{
	pid_t p = fork();
	if (p == 0) {
		char *argv[] = { (char *)self, "exec", NULL };
		execve(self, argv, environ);
		_exit(1);
	}
	CHECK_EQ(wait_status(p), 33);
	/* posix_spawn and vfork from a forked child, and a failing exec. */
	p = fork();
	if (p == 0) {
		char *argv[] = { (char *)self, "exec", NULL };
		pid_t q;
		if (posix_spawn(&q, self, NULL, NULL, argv, environ) != 0 || wait_status(q) != 33)
			_exit(1);
		q = vfork();
		if (q == 0) {
			execve(self, argv, environ);
			_exit(2);
		}
		if (wait_status(q) != 33)
			_exit(3);
		char *bad[] = { "/nonexistent/nomu", NULL };
		execve(bad[0], bad, environ);
		_exit(errno == ENOENT ? 0 : 4);
	}
	CHECK_EQ(wait_status(p), 0);
}

/* A child forks again: three generations, each with its own copy. */
static void nested(void)
{
	pid_t p = fork();
	if (p == 0) {
		global = 2;
		pid_t q = fork();
		if (q == 0) {
			int ok = global == 2;
			global = 3;
			pid_t r = fork();
			if (r == 0)
				_exit(global == 3 ? 5 : 1);
			_exit(ok && wait_status(r) == 5 ? 6 : 1);
		}
		_exit(wait_status(q) == 6 && global == 2 ? 7 : 1);
	}
	CHECK_EQ(wait_status(p), 7);
	CHECK_EQ(global, 1);
}

static volatile sig_atomic_t got;

static void on_signal(int sig)
{
	got = sig;
}

/* Signals: the parent's handlers are the child's; a signal kills a child
 * blocked in a syscall; SIGCHLD reaches the parent; sigsuspend ends on one. */
static void signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
	CHECK_OK(sigaction(SIGCHLD, &sa, NULL));
	int fds[2];
	CHECK_OK(pipe(fds));
	/* The child waits with SIGUSR1 blocked and sigsuspend: a signal that
	 * came between its look at `got` and pause() would leave pause
	 * waiting for good (seen under nomu, where a kick can land there). */
	sigset_t usr1, unblocked;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	CHECK_OK(sigprocmask(SIG_BLOCK, &usr1, &unblocked));
	sigdelset(&unblocked, SIGUSR1);
	pid_t p = fork();
	if (p == 0) {
		close(fds[0]);
		got = 0;
		if (write(fds[1], "r", 1) != 1)
			_exit(1);
		while (!got)
			sigsuspend(&unblocked);
		_exit(got == SIGUSR1 ? 11 : 1);
	}
	CHECK_OK(sigprocmask(SIG_SETMASK, &unblocked, NULL));
	char c;
	CHECK_EQ(read(fds[0], &c, 1), 1);
	CHECK_OK(kill(p, SIGUSR1));
	CHECK_EQ(wait_status(p), 11);
	CHECK_EQ(got, SIGCHLD);
	/* A child blocked in read is killed by SIGTERM. */
	p = fork();
	if (p == 0) {
		close(fds[1]);
		char b;
		(void)!read(fds[0], &b, 1);
		_exit(1);
	}
	close(fds[0]);
	CHECK_OK(kill(p, SIGTERM));
	CHECK_EQ(wait_status(p), 128 + SIGTERM);
	close(fds[1]);
	signal(SIGUSR1, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	/* A child that crashes dies of its own signal. */
	p = fork();
	if (p == 0) {
		volatile int *volatile bad = (int *)8;
		*bad = 1;
		_exit(0);
	}
	CHECK_EQ(wait_status(p), 128 + SIGSEGV);
	p = fork();
	if (p == 0) {
		abort();
	}
	CHECK_EQ(wait_status(p), 128 + SIGABRT);
}

/* Process groups: a forked child in a group of its own, signalled as one. */
static void process_groups(void)
{
	pid_t p = fork();
	if (p == 0) {
		if (setpgid(0, 0) != 0)
			_exit(1);
		for (;;)
			pause();
	}
	/* Natively too the parent sets it, so it is in place either way. */
	setpgid(p, p);
	CHECK_EQ(getpgid(p), p);
	CHECK_OK(kill(-p, SIGKILL));
	CHECK_EQ(wait_status(p), 128 + SIGKILL);
	/* getpid and getppid in the child. */
	pid_t me = getpid();
	p = fork();
	if (p == 0)
		_exit(getppid() == me && getpid() != me ? 0 : 1);
	CHECK_EQ(wait_status(p), 0);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "exec"))
		return 33;
	setvbuf(stdout, NULL, _IONBF, 0);
	fork_exit_wait();
	memory_is_copied();
	shared_mappings();
	shared_futex();
	child_maps_memory();
	shared_offsets();
	pipeline();
	multithreaded_parent();
	fork_exec(argv[0]);
	nested();
	signals();
	process_groups();
	return checks_done();
}
