/*
 * Hostile control-socket clients for tests/vm/reliability.sh (issue 14). The
 * guest has no socat or python; tools/vm-tests builds this on the host and
 * copies it in.
 *
 *   sockclient flood PATH BYTES   send BYTES with no newline as fast as the
 *                                 server takes them; report how many it took
 *   sockclient drip PATH SECS GAP send one byte every GAP seconds for up to
 *                                 SECS; report when the server hung up
 *
 * Each prints one line "<mode>: ..." and exits 0 when it could connect, 1
 * when it could not (the reason on the line), 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A connection to PATH, or -1 after saying why as MODE's report line. */
static int connect_to(const char *mode, const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		errno = ENAMETOOLONG;
		fd = -1;
	} else {
		strcpy(addr.sun_path, path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	}
	if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		fd = -1;
	}
	if (fd < 0)
		printf("%s: cannot connect to %s: %s\n", mode, path, strerror(errno));
	return fd;
}

/* What the server said before it hung up, newline-free, for the report. */
static void read_answer(int fd, char *buf, size_t len)
{
	ssize_t n;
	struct timeval tv = { .tv_sec = 2 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recv(fd, buf, len - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

static int flood(const char *path, long long total)
{
	static char chunk[65536];
	char answer[256];
	long long sent = 0;
	double t0 = now();
	const char *why = "all sent";
	int fd = connect_to("flood", path);

	if (fd < 0)
		return 1;
	memset(chunk, 'x', sizeof(chunk));
	while (sent < total) {
		size_t n = total - sent < (long long)sizeof(chunk) ? total - sent : sizeof(chunk);
		ssize_t w = send(fd, chunk, n, MSG_NOSIGNAL);

		if (w < 0) {
			why = strerror(errno);
			break;
		}
		sent += w;
	}
	read_answer(fd, answer, sizeof(answer));
	printf("flood: server took %lld of %lld bytes in %.2f s, then: %s; answer: '%s'\n",
	       sent, total, now() - t0, why, answer);
	close(fd);
	return 0;
}

static int drip(const char *path, double secs, double gap)
{
	char answer[256] = "";
	int bytes = 0;
	double t0 = now();
	const char *why = "still open at the end";
	int fd = connect_to("drip", path);

	if (fd < 0)
		return 1;
	while (now() - t0 < secs) {
		char peek;
		ssize_t r = recv(fd, &peek, 1, MSG_DONTWAIT | MSG_PEEK);

		if (r >= 0) {
			why = r ? "the server answered" : "the server hung up";
			break;
		}
		if (send(fd, "x", 1, MSG_NOSIGNAL) != 1) {
			why = strerror(errno);
			break;
		}
		bytes++;
		/* Wake often enough to see the server's answer when it comes. */
		for (double next = now() + gap; now() < next && now() - t0 < secs;)
			if (recv(fd, &peek, 1, MSG_DONTWAIT | MSG_PEEK) >= 0)
				break;
			else
				usleep(200000);
	}
	double held = now() - t0;

	read_answer(fd, answer, sizeof(answer));
	printf("drip: %d byte(s), connection held %.1f s, then: %s; answer: '%s'\n", bytes, held,
	       why, answer);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "flood"))
		return flood(argv[2], atoll(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "drip"))
		return drip(argv[2], atof(argv[3]), atof(argv[4]));
	fprintf(stderr, "usage: sockclient flood PATH BYTES | drip PATH SECS GAP\n");
	return 2;
}
