/*
 * net.h - thin socket helpers shared by server and client.
 */
#ifndef CAIRN_NET_H
#define CAIRN_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/*
 * Parse "HOST", "HOST:PORT" or "[V6]:PORT" into host (NUL-terminated,
 * hostsz bytes) and port (default_port when absent). Returns 0 or -EINVAL.
 */
int net_parse_addr(const char *s, char *host, size_t hostsz, int *port,
		   int default_port);

/*
 * Connect to host:port with a timeout in milliseconds. Returns a connected
 * blocking socket with TCP_NODELAY set, or a negative errno; on failure
 * err (errsz bytes) names the address and the reason, e.g.
 * "cannot reach server 127.0.0.1:7070: connection refused".
 */
int net_connect(const char *host, int port, int timeout_ms, char *err,
		size_t errsz);

/* Listen on host:port (host may be "" for any). Returns the fd or a negative
 * errno with err filled in. */
int net_listen(const char *host, int port, char *err, size_t errsz);

/* "ip:port" of the socket's peer, into buf. Never fails (writes "?"). */
void net_peer_name(int fd, char *buf, size_t bufsz);

/* Read or write exactly n bytes, retrying on EINTR and short transfers.
 * Return 0, -EPIPE on EOF (read) or a negative errno. */
int net_read_full(int fd, void *buf, size_t n);
int net_write_full(int fd, const void *buf, size_t n);

#endif
