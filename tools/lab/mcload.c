/*
 * mcload: a small memcached load generator for the lab's seed-2 workload.
 *
 * Rik van Riel measured "a memcache like workload" by p95/p99 response time and
 * total CPU use. Debian 12 has memcached but no load generator that reports
 * percentiles (libmemcached-tools' memslap prints only totals, memtier is not
 * packaged), so this one does the least that answers: C connections, one thread
 * each, closed loop (send a request, wait for the whole answer, repeat) of
 * memcached text-protocol get/set on loopback, every response time kept, and
 * the percentiles of all of them at the end.
 *
 * Bounded in time (-t) and in requests (-n); talks to a loopback address only.
 *
 * usage: mcload [-c CONNS] [-t SECS] [-n MAXREQ] [-k KEYS] [-s BYTES] [-w SET%] [-P PORT] [-h 127.x.y.z]
 *        mcload -p TRIES      exit 0 once the server answers "version" (startup probe)
 * prints: mcload conns=C secs=S requests=N errors=E rps=R p50_us=.. p95_us=.. p99_us=.. max_us=..
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *host = "127.0.0.1";
static int port = 11211, conns = 4, keys = 1000, vsize = 64, set_pct = 10;
static double secs = 3;
static long max_req = 2000000;
static double deadline;

struct worker {
    pthread_t th;
    int id, fd;
    unsigned seed;
    long n, errors, cap;
    float *lat_us; /* response times, microseconds */
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int dial(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    int fd, one = 1;
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return -1;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *b, size_t n)
{
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return -1;
        }
        b += w;
        n -= w;
    }
    return 0;
}

/* Read until the buffer ends with END (or is exactly the given one-line reply). */
static int read_reply(int fd, char *buf, size_t cap, const char *end)
{
    size_t have = 0, el = strlen(end);
    for (;;) {
        ssize_t r = read(fd, buf + have, cap - 1 - have);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return -1;
        }
        have += r;
        buf[have] = 0;
        if (have >= el && !memcmp(buf + have - el, end, el))
            return 0;
        if (strstr(buf, "ERROR"))
            return -1;
        if (have >= cap - 1)
            return -1;
    }
}

static int do_set(int fd, int key, char *buf, size_t cap)
{
    static const char fill[] = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                               "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    int n = snprintf(buf, cap, "set key:%d 0 0 %d\r\n%.*s\r\n", key, vsize, vsize, fill);
    if (send_all(fd, buf, n))
        return -1;
    return read_reply(fd, buf, cap, "STORED\r\n");
}

static int do_get(int fd, int key, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "get key:%d\r\n", key);
    if (send_all(fd, buf, n))
        return -1;
    return read_reply(fd, buf, cap, "END\r\n");
}

static void *run(void *arg)
{
    struct worker *w = arg;
    char buf[4096];
    while (w->n < w->cap) {
        double t0 = now();
        if (t0 >= deadline)
            break;
        int key = rand_r(&w->seed) % keys;
        int rc = (int)(rand_r(&w->seed) % 100) < set_pct ? do_set(w->fd, key, buf, sizeof(buf))
                                                          : do_get(w->fd, key, buf, sizeof(buf));
        if (rc) {
            w->errors++;
            break; /* the connection is out of step or gone */
        }
        w->lat_us[w->n++] = (float)((now() - t0) * 1e6);
    }
    return NULL;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static double pct(const float *v, long n, double p)
{
    long i = (long)(p / 100.0 * n + 0.999999) - 1;
    if (i < 0)
        i = 0;
    if (i >= n)
        i = n - 1;
    return v[i];
}

static int usage(const char *why)
{
    fprintf(stderr, "mcload: %s (usage: mcload [-c CONNS] [-t SECS] [-n MAXREQ] [-k KEYS] [-s BYTES] "
                    "[-w SET%%] [-P PORT] [-h 127.x.y.z] | mcload -p TRIES)\n", why);
    return 2;
}

int main(int argc, char **argv)
{
    int opt, ping = 0;
    while ((opt = getopt(argc, argv, "c:t:n:k:s:w:P:h:p:")) != -1) {
        switch (opt) {
        case 'c': conns = atoi(optarg); break;
        case 't': secs = atof(optarg); break;
        case 'n': max_req = atol(optarg); break;
        case 'k': keys = atoi(optarg); break;
        case 's': vsize = atoi(optarg); break;
        case 'w': set_pct = atoi(optarg); break;
        case 'P': port = atoi(optarg); break;
        case 'h': host = optarg; break;
        case 'p': ping = atoi(optarg); break;
        default: return usage("unknown option");
        }
    }
    if (conns < 1 || conns > 256 || secs <= 0 || secs > 600 || max_req < 1 || keys < 1 || vsize < 1 ||
        vsize > 190 || set_pct < 0 || set_pct > 100 || port < 1 || port > 65535)
        return usage("option out of range");
    if (strncmp(host, "127.", 4) != 0)
        return usage("loopback addresses (127.x.y.z) only");

    if (ping) {
        char buf[256];
        for (int i = 0; i < ping; i++) {
            int fd = dial();
            if (fd >= 0 && !send_all(fd, "version\r\n", 9) && !read_reply(fd, buf, sizeof(buf), "\r\n")) {
                close(fd);
                return 0;
            }
            if (fd >= 0)
                close(fd);
            usleep(100000);
        }
        fprintf(stderr, "mcload: no memcached answering on %s:%d\n", host, port);
        return 1;
    }

    struct worker *ws = calloc(conns, sizeof(*ws));
    char buf[4096];
    int fd0 = dial();
    if (!ws || fd0 < 0) {
        fprintf(stderr, "mcload: cannot connect to %s:%d\n", host, port);
        return 1;
    }
    for (int k = 0; k < keys; k++) /* every get hits */
        if (do_set(fd0, k, buf, sizeof(buf))) {
            fprintf(stderr, "mcload: preload failed at key %d\n", k);
            return 1;
        }
    close(fd0);
    for (int i = 0; i < conns; i++) {
        ws[i].id = i;
        ws[i].seed = 12345u + 7919u * i;
        ws[i].cap = max_req / conns + 1;
        ws[i].lat_us = malloc(sizeof(float) * ws[i].cap);
        ws[i].fd = dial();
        if (!ws[i].lat_us || ws[i].fd < 0) {
            fprintf(stderr, "mcload: connection %d failed\n", i);
            return 1;
        }
    }
    double t0 = now();
    deadline = t0 + secs;
    for (int i = 0; i < conns; i++)
        pthread_create(&ws[i].th, NULL, run, &ws[i]);
    long total = 0, errors = 0;
    for (int i = 0; i < conns; i++) {
        pthread_join(ws[i].th, NULL);
        total += ws[i].n;
        errors += ws[i].errors;
    }
    double el = now() - t0;
    if (total == 0) {
        fprintf(stderr, "mcload: no request completed\n");
        return 1;
    }
    float *all = malloc(sizeof(float) * total);
    long at = 0;
    for (int i = 0; i < conns; i++) {
        memcpy(all + at, ws[i].lat_us, sizeof(float) * ws[i].n);
        at += ws[i].n;
        close(ws[i].fd);
    }
    qsort(all, total, sizeof(float), cmp_float);
    printf("mcload conns=%d secs=%.3f requests=%ld errors=%ld rps=%.1f p50_us=%.1f p95_us=%.1f p99_us=%.1f max_us=%.1f\n",
           conns, el, total, errors, total / el, pct(all, total, 50), pct(all, total, 95), pct(all, total, 99),
           all[total - 1]);
    return errors ? 1 : 0;
}
