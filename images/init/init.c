/*
 * trapline guest /init: runs a list of commands on the console and powers off.
 *
 * Built static for each guest architecture by images/build.sh and placed at /init
 * in the initramfs. What it does, in order:
 *   1. mounts devtmpfs on /dev, proc on /proc, sysfs on /sys (and makes sure fds
 *      0/1/2 are the console);
 *   2. prints `TLG init uptime=<s> kernel=<release> machine=<machine>`;
 *   3. takes the command list from the kernel command line, or else from a file:
 *        tlg.run=CMD                one command, no spaces, e.g. tlg.run=/trapline/tests/hello
 *        tlg.run="CMD ARGS;CMD2"    commands separated by ';', arguments by blanks
 *        tlg.list=/path             list file (default /trapline/run.list)
 *        tlg.timeout=SECONDS        per-command timeout (default 600)
 *        tlg.wait=1                 snapshot mode (images/boot.sh TRAPLINE_SNAPSHOT_SAVE,
 *                                   trapline/guest.py): the tlg.* above come from a buffer
 *                                   written into the saved machine instead (see
 *                                   wait_for_payload below)
 *      The list file has one command per line, arguments separated by blanks;
 *      blank lines and lines starting with '#' are skipped. A command may start with
 *      the token `@timeout=SECONDS` to override the timeout for that command.
 *   4. runs each command n = 1, 2, ... (argv[0] is a path, or a name looked up in
 *      PATH=/trapline/bin:/trapline/tests:/bin; LD_LIBRARY_PATH=/trapline/lib) in its
 *      own session, in /tmp, with its stdout
 *      and stderr on the console, framed by marker lines:
 *        TLG cmd <n> <argv joined by blanks>
 *        TLG begin <n>
 *        ... the command's output ...
 *        TLG end <n> status=<code>
 *        TLG time <n> wall=<s> user=<s> sys=<s>
 *      <code> is the exit status (0..255; 127 = could not exec), `sig<N>` if the
 *      command was killed by signal N, or `timeout` if it ran past its timeout (the
 *      whole process group is then killed with SIGKILL);
 *      With tlg.wait=1 (snapshot mode) init prints `TLG ready ...` after step 2 and
 *      waits for its tlg.* in memory (wait_for_payload), then prints `TLG resume` and,
 *      once its clock is aligned, `TLG init ... source=snapshot` again;
 *   5. prints `TLG done`, waits for the console to drain and calls
 *      reboot(RB_POWER_OFF). (sun4u and x86 power off and QEMU exits; raspi0 only
 *      halts, so images/boot.sh kills QEMU when it sees `TLG done`.)
 *
 * No shell, no libc beyond what a static binary carries; no polling: the wait for
 * a command uses sigtimedwait on SIGCHLD so init does not wake up while a
 * benchmark runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#if defined(__sparc__) && defined(__arch64__)
#include <sys/ioctl.h>
#include <sys/personality.h>
#endif

#define MAX_CMDS 512
#define MAX_ARGS 128
#define DEFAULT_TIMEOUT 600.0
#define DEFAULT_LIST "/trapline/run.list"
#define GUEST_PATH "/trapline/bin:/trapline/tests:/bin:/sbin"

struct cmd {
	char *argv[MAX_ARGS + 1];
	int argc;
	double timeout; /* seconds; <0: use the global one */
};

static struct cmd cmds[MAX_CMDS];
static int ncmds;

/* One write per message, so lines do not tear when the console is shared. */
static void say(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n >= (int)sizeof(buf))
		n = sizeof(buf) - 1;
	for (char *p = buf; n > 0;) {
		ssize_t w = write(1, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		p += w;
		n -= w;
	}
}

static double now(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double tv_sec(struct timeval tv)
{
	return tv.tv_sec + tv.tv_usec / 1e6;
}

static void do_mount(const char *src, const char *dir, const char *type)
{
	mkdir(dir, 0755);
	if (mount(src, dir, type, 0, NULL) < 0 && errno != EBUSY)
		say("TLG warn mount %s on %s: %s\n", type, dir, strerror(errno));
}

static void setup_console(void)
{
	/* The kernel opens /dev/console for us if the initramfs has the node;
	 * if it did not, open it from devtmpfs now. */
	if (fcntl(1, F_GETFD) < 0) {
		int fd = open("/dev/console", O_RDWR | O_NOCTTY);

		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
	}
}

static char *read_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0, cap = 4096;
	char *buf;

	if (fd < 0)
		return NULL;
	buf = malloc(cap + 1);
	for (;;) {
		ssize_t r;

		if (len == cap) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += r;
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Split s (modified in place) into one command; returns 0 if it was empty. */
static int add_cmd(char *s, double default_timeout)
{
	struct cmd *c;

	if (ncmds == MAX_CMDS) {
		say("TLG warn more than %d commands, rest ignored\n", MAX_CMDS);
		return 0;
	}
	c = &cmds[ncmds];
	memset(c, 0, sizeof(*c));
	c->timeout = default_timeout;
	for (;;) {
		while (is_blank(*s))
			s++;
		if (!*s)
			break;
		if (c->argc == MAX_ARGS) {
			say("TLG warn more than %d arguments, rest ignored\n", MAX_ARGS);
			break;
		}
		c->argv[c->argc++] = s;
		while (*s && !is_blank(*s))
			s++;
		if (*s)
			*s++ = '\0';
	}
	if (c->argc > 0 && strncmp(c->argv[0], "@timeout=", 9) == 0) {
		c->timeout = strtod(c->argv[0] + 9, NULL);
		memmove(c->argv, c->argv + 1, c->argc * sizeof(char *));
		c->argc--;
	}
	if (c->argc == 0)
		return 0;
	ncmds++;
	return 1;
}

/* Value of kernel parameter `name=` in the command line: quoted or up to a blank.
 * Returns a malloc'd string or NULL. */
static char *cmdline_param(const char *cmdline, const char *name)
{
	size_t nl = strlen(name);
	const char *p = cmdline;

	while (*p) {
		const char *tok;
		int quoted = 0;

		while (is_blank(*p))
			p++;
		tok = p;
		/* skip this token (a quoted part may contain blanks) */
		while (*p && (quoted || !is_blank(*p))) {
			if (*p == '"')
				quoted = !quoted;
			p++;
		}
		if ((size_t)(p - tok) > nl && strncmp(tok, name, nl) == 0 && tok[nl] == '=') {
			const char *v = tok + nl + 1, *e = p;
			char *out, *o;

			out = o = malloc(e - v + 1);
			for (; v < e; v++)
				if (*v != '"')
					*o++ = *v;
			*o = '\0';
			return out;
		}
	}
	return NULL;
}

/*
 * Snapshot mode (tlg.wait=1). The harness boots the image once to this point, saves
 * the machine (QEMU migration to a file) and starts every later run from that file.
 * The run's tlg.timeout= and tlg.run= reach init in a buffer of SNAP_CHUNKS chunks of
 * SNAP_CHUNK bytes: each chunk starts with a marker (SNAP_MAGIC_LEN bytes made here
 * at run time, so they are nowhere else in the guest's memory, then 4 hex digits of
 * the chunk's index) and is otherwise zero. A chunk is no larger than the smallest
 * page QEMU saves (1 KiB on ARMv6), so each chunk's page is saved whole, marker
 * included; the harness finds each marker in the saved file and writes the
 * payload's pieces (text, NUL-terminated) after them before QEMU loads the file.
 * init prints the marker as `TLG ready magic=<hex> chunk=<bytes> chunks=<n>` and
 * then spins, reading the first chunk, until it holds text: the saved machine is
 * running (not idle on a timer), and the restored one sees its payload at once.
 * It must not sleep there: QEMU 7.2's raspi0 system timer (bcm2835_systmr) does
 * not save its armed timer, so a restored guest idle on a timer never wakes up.
 * After the payload a 1 us nanosleep (timer slack 1 ns) makes Linux program the
 * timer again (its own next event, a tick, was armed in the saving QEMU and is
 * lost with it; should that tick fall due before the nanosleep is queued, the
 * guest never wakes: trapline/guest.py restores every new snapshot once before
 * keeping it, and the resume is the same every time);
 * then init sleeps to the next multiple of SNAP_ALIGN_NS of CLOCK_MONOTONIC, so
 * that the commands start at the same place of the guest's 10 ms tick (HZ=100)
 * whenever the snapshot was saved (its spin lasts however long the host took).
 */
#define SNAP_ALIGN_NS 10000000LL
#define SNAP_CHUNK 1024
#define SNAP_CHUNKS 16
#define SNAP_MAGIC_LEN 12
#ifdef TL_INIT_PROGRAM
/*
 * The program snapshot kind (trapline/guest.py program_image: this init built with
 * -DTL_INIT_PROGRAM, appended to the image's initramfs as a second segment, for
 * `simulate --guest` only; the lanes' init is built without it). After the text
 * chunks come SNAP_PROG_CHUNKS more, marked alike, that carry a user's program: the
 * payload's tlg.program=<bytes> says how many bytes they hold (each chunk's bytes
 * after its marker, in order); init writes them to TLG_PROGRAM_PATH (mode 0755)
 * before it runs the commands.
 */
#define SNAP_PROG_CHUNKS 4096
#define TLG_PROGRAM_DIR "/trapline/user"
#define TLG_PROGRAM_PATH TLG_PROGRAM_DIR "/program"
#else
#define SNAP_PROG_CHUNKS 0
#endif

#if defined(__sparc__) && defined(__arch64__)
/*
 * Spin until *p is not zero, on sparc64 with only global registers, then a save and
 * a restore: QEMU 7.2 restores a sun4u machine with its current window pointer
 * (env->cwp) but does not point its register file at that window (target/sparc/
 * machine.c sets env->regwptr in no post-load step; the machine resumes reading
 * window 0's registers), so code resuming in the saved spin must not read a
 * windowed register until a SAVE (or a trap that moves the window) has made QEMU
 * point at the right one again (cpu_set_cwp). The SAVE usually raises a
 * clean-window trap first (cleanwin is 0 in init at this point); Linux's handler
 * cleans the new window and retries. With the plain loop of the other arches the
 * restored init read a pointer from window 0 and died of SIGSEGV (seen:
 * "init[1]: segfault at fffff80100000010"). Its first instruction is the global
 * tlg_snapshot_spin: the image build records its address and a snapshot is saved
 * when the guest first executes it (images/boot.sh TRAPLINE_SNAPSHOT_BREAK), so
 * every snapshot holds the same machine; the console is drained first, so that
 * no output is left in flight in the saved machine.
 */
static __attribute__((noinline)) void spin_until_set(unsigned char *p)
{
	register unsigned char *g1 __asm__("g1") = p;

	__asm__ __volatile__(".globl	tlg_snapshot_spin\n"
			     "tlg_snapshot_spin:\n"
			     "1:	ldub	[%0], %%g2\n"
			     "	brz,pt	%%g2, 1b\n"
			     "	 nop\n"
			     "	save	%%g0, %%g0, %%g0\n"
			     "	restore	%%g0, %%g0, %%g0\n"
			     :
			     : "r"(g1)
			     : "g2", "memory");
}

/*
 * QEMU 7.2 does not save the sun4u PCI host bridge's interrupt mappings
 * (hw/pci-host/sabre.c registers no migration state: the stream holds "PCIHost",
 * "serial", ... but not the bridge's IMAP registers), so a restored machine delivers
 * no device interrupt until Linux writes the mapping again (its valid bit is clear
 * after QEMU's reset; traced: the UART raised its line, sabre_pci_set_obio_irq, and
 * no request followed). The console's UART sends only on its transmit interrupt, so
 * the restored init's first write to the console waited for ever (the guest idle in
 * do_idle). Linux writes the mapping when the port starts (request_irq:
 * sun4u_irq_enable). Closing the console does not stop the port (a console port is
 * never shut down on close: tty_port_shutdown), and a hang-up of /dev/console only
 * closes it; a hang-up of the port's own device, /dev/ttyS0, with no /dev/console
 * open, shuts the port down (uart_hangup: free_irq), and opening the console again
 * starts it (uart_startup: request_irq, the mapping written, valid).
 */
static void rearm_console_interrupt(void)
{
	int t;

	close(0);
	close(1);
	close(2);
	t = open("/dev/ttyS0", O_RDWR | O_NOCTTY);
	if (t >= 0) {
		ioctl(t, TIOCVHANGUP);
		close(t);
	}
	setup_console();
}
#endif

#ifdef TL_INIT_PROGRAM
/* The program in the chunks after the text ones (tlg.program=<bytes>) to TLG_PROGRAM_PATH. */
static void write_program(const char *payload, const unsigned char *chunks, size_t hdr)
{
	char *sz = cmdline_param(payload, "tlg.program");
	size_t left, room = SNAP_CHUNK - hdr;
	int fd;

	if (!sz)
		return;
	left = strtoul(sz, NULL, 10);
	free(sz);
	if (left > room * SNAP_PROG_CHUNKS) {
		say("TLG warn tlg.program=%zu: more than the %zu bytes the snapshot holds\n", left,
		    room * SNAP_PROG_CHUNKS);
		return;
	}
	mkdir("/trapline", 0755);
	mkdir(TLG_PROGRAM_DIR, 0755);
	fd = open(TLG_PROGRAM_PATH, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (fd < 0) {
		say("TLG warn open %s: %s\n", TLG_PROGRAM_PATH, strerror(errno));
		return;
	}
	for (const unsigned char *c = chunks + hdr; left > 0; c += SNAP_CHUNK) {
		size_t n = left < room ? left : room;

		for (size_t done = 0; done < n;) {
			ssize_t w = write(fd, c + done, n - done);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				say("TLG warn write %s: %s\n", TLG_PROGRAM_PATH, strerror(errno));
				close(fd);
				return;
			}
			done += w;
		}
		left -= n;
	}
	close(fd);
}
#endif

static char *wait_for_payload(void)
{
	/* volatile: the compiler must not fold the marker into a constant in the binary */
	static const volatile unsigned char seed[SNAP_MAGIC_LEN] = "tlg-snapshot";
	size_t len = (size_t)SNAP_CHUNK * (SNAP_CHUNKS + SNAP_PROG_CHUNKS), hdr = SNAP_MAGIC_LEN + 4, off = 0;
	unsigned char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char hex[2 * SNAP_MAGIC_LEN + 1];
	char *out;

	if (buf == MAP_FAILED) {
		say("TLG warn mmap: %s\n", strerror(errno));
		return NULL;
	}
	memset(buf, 0, len);
	for (int i = 0; i < SNAP_CHUNKS + SNAP_PROG_CHUNKS; i++) {
		unsigned char *c = buf + (size_t)i * SNAP_CHUNK;

		for (int j = 0; j < SNAP_MAGIC_LEN; j++)
			c[j] = seed[j] ^ 0xa5;
		snprintf((char *)c + SNAP_MAGIC_LEN, 5, "%04x", i);
	}
	for (int j = 0; j < SNAP_MAGIC_LEN; j++)
		snprintf(hex + 2 * j, 3, "%02x", buf[j]);
	say("TLG ready magic=%s chunk=%d chunks=%d\n", hex, SNAP_CHUNK, SNAP_CHUNKS + SNAP_PROG_CHUNKS);
#if defined(__sparc__) && defined(__arch64__)
	tcdrain(1);
	spin_until_set(buf + hdr);
	rearm_console_interrupt();
	personality(ADDR_NO_RANDOMIZE);
#else
	while (!((volatile unsigned char *)buf)[hdr])
		;
#endif
	say("TLG resume\n"); /* (a restored guest that prints this but no TLG init is stuck in the sleeps below) */
	{
		struct timespec ts = { 0, 1000 };
		long long t;

		prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
		nanosleep(&ts, NULL);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t = ((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec) / SNAP_ALIGN_NS * SNAP_ALIGN_NS + SNAP_ALIGN_NS;
		ts.tv_sec = t / 1000000000LL;
		ts.tv_nsec = t % 1000000000LL;
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		prctl(PR_SET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL); /* the default again, for the commands */
	}
	out = malloc(len + 1);
	for (int i = 0; i < SNAP_CHUNKS; i++) {
		const unsigned char *c = buf + (size_t)i * SNAP_CHUNK + hdr;
		size_t n = strnlen((const char *)c, SNAP_CHUNK - hdr);

		memcpy(out + off, c, n);
		off += n;
		if (n < SNAP_CHUNK - hdr)
			break;
	}
	out[off] = '\0';
#ifdef TL_INIT_PROGRAM
	write_program(out, buf + (size_t)SNAP_CHUNKS * SNAP_CHUNK, hdr);
	munmap(buf, len);
#endif
	return out;
}

static void load_commands(const char *cmdline, const char *source, double timeout)
{
	char *run = cmdline ? cmdline_param(cmdline, "tlg.run") : NULL;
	char *list = cmdline ? cmdline_param(cmdline, "tlg.list") : NULL;
	const char *path = list ? list : DEFAULT_LIST;

	if (run) {
		char *save = NULL;

		say("TLG list source=%s\n", source);
		for (char *s = strtok_r(run, ";", &save); s; s = strtok_r(NULL, ";", &save))
			add_cmd(s, timeout);
		return;
	}
	char *text = read_file(path);
	if (!text) {
		say("TLG warn no tlg.run= on the command line and no %s: nothing to run\n", path);
		return;
	}
	say("TLG list source=%s\n", path);
	for (char *line = text; line && *line;) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		char *s = line;
		while (is_blank(*s))
			s++;
		if (*s && *s != '#')
			add_cmd(s, timeout);
		line = nl ? nl + 1 : NULL;
	}
}

static void run_one(int n, struct cmd *c, sigset_t *chld)
{
	char joined[2048];
	size_t off = 0;
	struct rusage ru;
	int st = 0;
	int done = 0, timed_out = 0;
	double t0, t1;
	pid_t pid;

	joined[0] = '\0';
	for (int i = 0; i < c->argc && off < sizeof(joined); i++)
		off += snprintf(joined + off, sizeof(joined) - off, "%s%s", i ? " " : "", c->argv[i]);
	say("TLG cmd %d %s\n", n, joined);
	say("TLG begin %d\n", n);

	memset(&ru, 0, sizeof(ru));
	t0 = now(CLOCK_MONOTONIC);
	pid = fork();
	if (pid < 0) {
		say("TLG warn fork: %s\n", strerror(errno));
		say("TLG end %d status=127\n", n);
		return;
	}
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid(); /* own process group, so a timeout can kill all of it */
		execvp(c->argv[0], c->argv);
		say("TLG warn exec %s: %s\n", c->argv[0], strerror(errno));
		_exit(127);
	}

	while (!done) {
		struct timespec ts;
		double left = c->timeout - (now(CLOCK_MONOTONIC) - t0);
		int sig;

		if (left <= 0) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			timed_out = 1;
			if (wait4(pid, &st, 0, &ru) == pid)
				done = 1;
			break;
		}
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - ts.tv_sec) * 1e9);
		sig = sigtimedwait(chld, NULL, &ts);
		if (sig < 0 && errno != EAGAIN && errno != EINTR) {
			/* e.g. ENOSYS: 32-bit glibc uses the time32 syscall, which needs
			 * CONFIG_COMPAT_32BIT_TIME. Fall back to polling every 10 ms. */
			static int warned;

			if (!warned++)
				say("TLG warn sigtimedwait: %s (polling instead)\n", strerror(errno));
			usleep(10000);
		}
		/* reap everything that ended: our child and any orphans re-parented to us */
		for (;;) {
			struct rusage r;
			int s;
			pid_t w = wait4(-1, &s, WNOHANG, &r);

			if (w <= 0)
				break;
			if (w == pid) {
				st = s;
				ru = r;
				done = 1;
			}
		}
	}
	t1 = now(CLOCK_MONOTONIC);
	/* Anything the command left running in its session dies with it. */
	kill(-pid, SIGKILL);

	if (timed_out)
		say("TLG end %d status=timeout\n", n);
	else if (WIFSIGNALED(st))
		say("TLG end %d status=sig%d\n", n, WTERMSIG(st));
	else
		say("TLG end %d status=%d\n", n, WEXITSTATUS(st));
	say("TLG time %d wall=%.6f user=%.6f sys=%.6f\n", n, t1 - t0, tv_sec(ru.ru_utime),
	    tv_sec(ru.ru_stime));
}

int main(int argc, char **argv)
{
	struct utsname u;
	sigset_t chld;
	double timeout = DEFAULT_TIMEOUT;
	const char *source;
	char *cmdline, *t;

	do_mount("devtmpfs", "/dev", "devtmpfs");
	setup_console();
	do_mount("proc", "/proc", "proc");
	do_mount("sysfs", "/sys", "sysfs");
	mkdir("/tmp", 01777);

	uname(&u);
	say("TLG init uptime=%.3f kernel=%s machine=%s\n", now(CLOCK_BOOTTIME), u.release,
	    u.machine);
	cmdline = read_file("/proc/cmdline");
	source = "cmdline";
	if (cmdline && (t = cmdline_param(cmdline, "tlg.wait")) != NULL && strcmp(t, "1") == 0) {
		/* snapshot mode: the saved machine resumes here, the run's tlg.* in the payload */
		cmdline = wait_for_payload();
		source = "snapshot";
		say("TLG init uptime=%.3f kernel=%s machine=%s source=snapshot\n", now(CLOCK_BOOTTIME),
		    u.release, u.machine);
	}

	setenv("PATH", GUEST_PATH, 1);
	/* shared libraries of dynamically linked programs (images/lib/initramfs.sh) */
	setenv("LD_LIBRARY_PATH", "/trapline/lib", 1);
	setenv("HOME", "/", 1);
	setenv("TERM", "dumb", 1);
	if (chdir("/tmp") < 0)
		say("TLG warn chdir /tmp: %s\n", strerror(errno));

	/* SIGCHLD stays blocked in init; sigtimedwait collects it. */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);

	if (cmdline && (t = cmdline_param(cmdline, "tlg.timeout")) != NULL) {
		timeout = strtod(t, NULL);
		if (timeout <= 0)
			timeout = DEFAULT_TIMEOUT;
	}
	load_commands(cmdline, source, timeout);
	for (int i = 0; i < ncmds; i++)
		run_one(i + 1, &cmds[i], &chld);

	say("TLG done\n");
	tcdrain(1);
	sync();
	reboot(RB_POWER_OFF);
	say("TLG warn reboot(RB_POWER_OFF): %s\n", strerror(errno));
	for (;;)
		pause();
	(void)argc;
	(void)argv;
}
