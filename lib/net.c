/*
 * net.c - socket helpers. See net.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "net.h"

int net_parse_addr(const char *s, char *host, size_t hostsz, int *port,
		   int default_port)
{
	const char *h = s, *colon;
	size_t hlen;

	if (!s || !*s)
		return -EINVAL;
	if (*s == '[') {
		const char *end = strchr(s, ']');
		if (!end)
			return -EINVAL;
		h = s + 1;
		hlen = (size_t)(end - h);
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] && !colon)
			return -EINVAL;
	} else {
		colon = strrchr(s, ':');
		if (colon && strchr(s, ':') != colon)
			colon = NULL; /* bare IPv6 address, no port */
		hlen = colon ? (size_t)(colon - s) : strlen(s);
	}
	if (hlen == 0 || hlen >= hostsz)
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	*port = default_port;
	if (colon) {
		char *end;
		long p = strtol(colon + 1, &end, 10);
		if (!colon[1] || *end || p < 0 || p > 65535)
			return -EINVAL;
		*port = (int)p;
	}
	return 0;
}

static void set_nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Non-blocking connect bounded by timeout_ms; returns 0 or -errno. */
static int connect_timeout(int fd, const struct sockaddr *sa, socklen_t len,
			   int timeout_ms)
{
	int flags = fcntl(fd, F_GETFL);
	int ret = 0;

	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	if (connect(fd, sa, len) < 0) {
		if (errno != EINPROGRESS)
			return -errno;
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		int n;
		do {
			n = poll(&pfd, 1, timeout_ms);
		} while (n < 0 && errno == EINTR);
		if (n == 0)
			return -ETIMEDOUT;
		if (n < 0)
			return -errno;
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr)
			ret = -soerr;
	}
	fcntl(fd, F_SETFL, flags);
	return ret;
}

int net_connect(const char *host, int port, int timeout_ms, char *err,
		size_t errsz)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL, *ai;
	char portstr[16];
	int ret, fd = -1;

	snprintf(portstr, sizeof(portstr), "%d", port);
	ret = getaddrinfo(host, portstr, &hints, &res);
	if (ret) {
		snprintf(err, errsz, "cannot reach server %s:%d: %s", host,
			 port, gai_strerror(ret));
		return -EHOSTUNREACH;
	}
	ret = -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			ret = -errno;
			continue;
		}
		ret = connect_timeout(fd, ai->ai_addr, ai->ai_addrlen,
				      timeout_ms);
		if (ret == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(err, errsz, "cannot reach server %s:%d: %s", host,
			 port, ret == -ETIMEDOUT ? "timed out" : strerror(-ret));
		return ret;
	}
	set_nodelay(fd);
	return fd;
}

int net_listen(const char *host, int port, char *err, size_t errsz)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *res = NULL;
	char portstr[16];
	int ret, fd, one = 1;

	snprintf(portstr, sizeof(portstr), "%d", port);
	ret = getaddrinfo(host && *host ? host : NULL, portstr, &hints, &res);
	if (ret) {
		snprintf(err, errsz, "cannot listen on %s:%d: %s",
			 host ? host : "", port, gai_strerror(ret));
		return -EINVAL;
	}
	fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC,
		    res->ai_protocol);
	if (fd < 0) {
		ret = -errno;
		goto fail;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 ||
	    listen(fd, 128) < 0) {
		ret = -errno;
		close(fd);
		goto fail;
	}
	freeaddrinfo(res);
	return fd;
fail:
	snprintf(err, errsz, "cannot listen on %s:%d: %s", host ? host : "",
		 port, strerror(-ret));
	freeaddrinfo(res);
	return ret;
}

void net_peer_name(int fd, char *buf, size_t bufsz)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN], port[8];

	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port,
			sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV)) {
		snprintf(buf, bufsz, "?");
		return;
	}
	snprintf(buf, bufsz, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s",
		 host, port);
}

int net_read_full(int fd, void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EPIPE;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int net_write_full(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}
