/*
 * msg.h - one codec per Cairn message, and one descriptor per opcode.
 *
 * Every request, reply and push has a plain struct below and exactly one
 * encode/decode pair, used by the client, the server and the fuzzers alike;
 * nothing else in Cairn spells a message's layout. docs/PROTOCOL.md's
 * message table is checked against the descriptors' layout strings, and
 * those against the encoders' output, by tests/unit/test_msg.c.
 *
 * Decoding is structural only: a decoder checks that the payload has exactly
 * the fields the layout gives, each within its wire bounds (a u8 flag such
 * as eof is 0 or 1, created at most 3, so every message has one encoding), and returns
 * -EPROTO otherwise (the peer is broken: the caller drops the connection or
 * fails the call). Whether a well-formed value is acceptable (a name with a
 * '/', an unknown flag bit, an oversized write) is the receiver's policy and
 * is answered with an errno, as Linux would (see msg_name_check).
 *
 * Ownership: decoded strings and byte ranges (struct msg_str, msg_bytes)
 * point into the payload that was decoded; they are valid as long as that
 * buffer is, and strings are NOT NUL-terminated. Encoders copy everything
 * into the wbuf; errors are sticky in w->err (wire.h).
 *
 * Adding a message: a struct pair here, an encode/decode pair and a
 * descriptor in msg.c, a row in docs/PROTOCOL.md, a handler in
 * server/handlers.c. The descriptor's flags tell the server how to run it;
 * nothing else keeps lists of opcodes.
 */
#ifndef CAIRN_MSG_H
#define CAIRN_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "proto.h"
#include "wire.h"

/* --- field types ----------------------------------------------------------- */

/* A str on the wire: u16 length + bytes. Not NUL-terminated. */
struct msg_str {
	const char *p;
	size_t len;
};

/* A blob on the wire: u32 length + bytes. */
struct msg_bytes {
	const void *p;
	size_t len;
};

#define MSG_STR(s) ((struct msg_str){ (s), strlen(s) })

/* --- requests and replies ---------------------------------------------------- */

/* Shared shapes. */
struct msg_fid   { struct cairn_fid fid; };        /* GETATTR, READLINK req */
struct msg_attr  { struct cairn_attr attr; };      /* one attr reply */
struct msg_attr2 { struct cairn_attr a, b; };      /* two attrs reply */
struct msg_empty { char unused; };                 /* no payload */

struct msg_hello_req {
	uint32_t magic;          /* CAIRN_MAGIC */
	uint32_t version;        /* CAIRN_PROTO_VERSION */
	uint8_t client_id[16];
	uint32_t flags;          /* HELLO_*; undefined bits are ignored */
};
/* AUTH (docs/PROTOCOL.md "Handshake"): nonces and the server's proof. */
struct msg_auth_req {
	uint32_t magic;          /* CAIRN_MAGIC */
	uint32_t version;        /* CAIRN_PROTO_VERSION */
	uint8_t nonce[32];       /* the client's, fresh per connection */
	uint8_t key_id[8];       /* which key (cellkey_id, lib/seal.h) */
};
struct msg_auth_rep {
	uint8_t nonce[32];       /* the server's, fresh per connection */
	uint8_t proof[32];       /* HMAC-SHA256(cell key, label | Nc | Ns) */
};
struct msg_hello_rep {
	uint32_t version;
	uint8_t server_id[16];
	uint64_t epoch;
	struct cairn_attr root;
	uint32_t flags;          /* HELLO_REP_* */
};

struct msg_lookup_req {
	struct cairn_fid dir;
	struct msg_str name;
};

struct msg_setattr_req {
	struct cairn_fid fid;
	uint32_t valid;          /* SA_* */
	uint32_t mode, uid, gid;
	uint64_t size;
	struct cairn_time atime, mtime, ctime;
};

struct msg_create_req {
	struct cairn_fid dir;
	struct msg_str name;
	uint32_t mode, uid, gid, rdev;
	uint32_t flags;          /* CR_* */
	struct cairn_fid fid;    /* CR_FID: the new object's; else zero */
	struct cairn_time time;  /* CR_FID: its times; else zero */
	struct msg_bytes data;   /* CR_FID: its first bytes; else empty */
};
struct msg_create_rep {
	uint8_t created;         /* CREATED, CREATED_TOKEN; 0: the name
				  * existed (no CR_EXCL) */
	struct cairn_attr child, dir;
};

struct msg_symlink_req {
	struct cairn_fid dir;
	struct msg_str name;
	struct msg_str target;
	uint32_t uid, gid;
};

struct msg_readlink_rep {
	struct msg_str target;
};

struct msg_link_req {
	struct cairn_fid fid;    /* the object to link */
	struct cairn_fid dir;
	struct msg_str name;
};

struct msg_remove_req {
	struct cairn_fid dir;
	struct msg_str name;
	uint32_t flags;          /* RM_* */
	struct cairn_fid victim; /* RM_FID: what the name must name */
};

/*
 * REMOVES: count entries of one directory, each a REMOVE with RM_FID
 * (flags 0 or RM_DIR). To send, point ents at count entries (list is then
 * not read); a decoded request has ents NULL and list holding the encoded
 * entries, walked with msg_rment_next. REMOVESAT: the same, each entry
 * with its time (msg_rment_at_next).
 */
struct msg_rment {
	struct msg_str name;
	uint32_t flags;          /* RM_DIR or 0 */
	struct cairn_fid victim; /* what the name must still name */
	struct cairn_time time;  /* REMOVESAT: when it was removed (zero:
				  * the server's clock); else not sent */
};
struct msg_removes_req {
	struct cairn_fid dir;
	uint32_t count;
	const struct msg_rment *ents;
	struct msg_bytes list;
};
/* Its reply: the directory's attributes after all of them and one status
 * per entry, in order (0 or a negative errno, as REMOVE's). To send,
 * point status at count values; decoded, status is NULL and list holds
 * them (msg_removes_status). */
struct msg_removes_rep {
	struct cairn_attr dir;
	uint32_t count;
	const int32_t *status;
	struct msg_bytes list;
};

/*
 * CREATES: count CR_FID creates of regular files in one directory, each
 * as CREATE's fields without dir and rdev. To send, point ents at count
 * entries; decoded, ents is NULL and list holds them (msg_cent_next).
 */
struct msg_cent {
	struct msg_str name;
	uint32_t mode, uid, gid;
	uint32_t flags;          /* CR_* (CR_FID required) */
	struct cairn_fid fid;
	struct cairn_time time;
	struct msg_bytes data;   /* at most CAIRN_CREATES_DATA_MAX */
};
struct msg_creates_req {
	struct cairn_fid dir;
	uint32_t count;
	const struct msg_cent *ents;
	struct msg_bytes list;
};
/*
 * CREATEATTR: CREATES whose entries carry, after CREATE's fields, the
 * attribute changes the client made to the file after creating it,
 * merged as SETATTR's SA_STEPS merges them: valid (0: none), mode, uid,
 * gid, steps (1 .. SA_STEPS_MAX when valid is not 0, else 0) and the
 * times; never SA_SIZE. Same request struct (ents, list) as CREATES.
 */
struct msg_centa {
	struct msg_cent c;
	uint32_t valid;          /* SA_* */
	uint32_t mode, uid, gid;
	uint32_t steps;
	struct cairn_time atime, mtime, ctime;
};
struct msg_createattr_req {
	struct cairn_fid dir;
	uint32_t count;
	const struct msg_centa *ents;
	struct msg_bytes list;
};
/* Its reply: the directory after all of them; per entry, in order, a
 * status (0 or a negative errno, as CREATE's), created and the file (both
 * zero when the status is not 0). To send, point ents at count entries;
 * decoded, list holds them (msg_crep_next). */
struct msg_crep {
	int32_t status;
	uint8_t created;         /* CREATED, CREATED_TOKEN, CREATED_ATTRS */
	struct cairn_attr child;
};
struct msg_creates_rep {
	struct cairn_attr dir;
	uint32_t count;
	const struct msg_crep *ents;
	struct msg_bytes list;
};

struct msg_rename_req {
	struct cairn_fid sdir;
	struct msg_str sname;
	struct cairn_fid ddir;
	struct msg_str dname;
	uint32_t flags;          /* RN_* */
};

struct msg_readdir_req {
	struct cairn_fid dir;
	uint64_t cookie;
	uint32_t max;            /* entries wanted */
};
/* One READDIR entry. */
struct msg_dirent {
	uint64_t next_cookie;
	struct msg_str name;
	struct cairn_attr attr;
};
/*
 * READDIR reply: count entries follow. The decoder checks all of them;
 * walk them with msg_dirent_next(). ents is the encoded entries.
 */
struct msg_readdir_rep {
	uint32_t count;
	uint8_t eof;
	struct msg_bytes ents;
};

struct msg_bulkstat_req {
	struct cairn_fid dir;
	uint64_t cookie;
	uint32_t max;            /* bytes of entries wanted; 0: none */
	uint32_t flags;          /* BS_* */
};
/*
 * BULKSTAT reply: the directory's attributes and the cookie its next new
 * entry will get, read with the entries in one store transaction; count
 * entries follow (walk them with msg_dirent_next, as READDIR's).
 */
struct msg_bulkstat_rep {
	struct cairn_attr dir;
	uint64_t new_cookie;
	uint32_t count;
	uint8_t eof;
	struct msg_bytes ents;
};

struct msg_read_req {
	struct cairn_fid fid;
	uint64_t off;
	uint32_t len;
};
struct msg_read_rep {
	struct cairn_attr attr;
	struct msg_bytes data;
};

struct msg_write_req {
	struct cairn_fid fid;
	uint64_t off;
	uint32_t flags;          /* WR_* */
	struct msg_bytes data;
};

/* WRITEATTR: a WRITE (fid, off, flags, data) and then `steps` attribute
 * changes merged as SETATTR's SA_STEPS merges them (valid, mode, uid,
 * gid and the times; never SA_SIZE), applied in one commit. */
struct msg_writeattr_req {
	struct cairn_fid fid;
	uint64_t off;
	uint32_t flags;          /* WR_* */
	uint32_t valid;          /* SA_*: what the attribute changes set */
	uint32_t mode, uid, gid;
	uint32_t steps;          /* 1 .. SA_STEPS_MAX attribute changes */
	struct cairn_time atime, mtime, ctime;
	struct msg_bytes data;
};

struct msg_fsync_req {
	struct cairn_fid fid;
	uint32_t flags;          /* FS_* */
};

/* FIDS: count FIDs for objects the client will name ahead (CR_FID):
 * first, then first.vnode + 1 ... with the same vol and uniq. */
struct msg_fids_req {
	uint32_t count;
};
struct msg_fids_rep {
	struct cairn_fid first;
	uint32_t count;
};

/* WTOKEN request: fid, the data version it expects (WT_DV), WT_* flags. */
struct msg_wtoken_req {
	struct cairn_fid fid;
	uint64_t dv;
	uint32_t flags;          /* WT_* */
};

/* LOCK and GETLK request (docs/PROTOCOL.md "Locks"): the range is
 * inclusive, end LK_EOF (lkset.h) to the end of the file. */
struct msg_lock_req {
	struct cairn_fid fid;
	uint64_t owner;
	uint64_t start, end;
	uint32_t pid;
	uint32_t type;           /* LK_RD, LK_WR, LK_UN */
	uint32_t flags;          /* LK_* */
};
/* LOCKD reply: LOCK's, and LKD_* flags (LKD_DELEG: the file's locks are
 * delegated to the requester now). */
struct msg_lockd_rep {
	struct cairn_attr attr;
	uint32_t flags;
};
/*
 * LKRETURN: the requester's locks of fid, all of them, ending its
 * delegation of the file. To send, point ents at count entries (list is
 * then not read); decoded, ents is NULL and list holds the entries,
 * walked with msg_lkent_next.
 */
struct msg_lkent {
	uint64_t owner;
	uint64_t start, end;
	uint32_t pid;
	uint32_t type;           /* LK_RD, LK_WR */
	uint32_t flags;          /* LK_FLOCK or 0 */
};
struct msg_lkreturn_req {
	struct cairn_fid fid;
	uint32_t flags;          /* LKR_* */
	uint32_t count;
	const struct msg_lkent *ents;
	struct msg_bytes list;
};
/* GETLK reply: a conflicting lock, or type LK_UN when there is none. */
struct msg_getlk_rep {
	uint32_t type;
	uint64_t start, end;
	uint32_t pid;            /* 0 for a holder on another client */
};

struct msg_statfs_rep {
	struct cairn_statfs sf;
};

struct msg_setxattr_req {
	struct cairn_fid fid;
	struct msg_str name;
	uint32_t flags;          /* XA_* */
	struct msg_bytes value;
};

struct msg_getxattr_req {
	struct cairn_fid fid;
	struct msg_str name;
	uint32_t size;           /* buffer size; 0 asks for the size only */
};
struct msg_listxattr_req {
	struct cairn_fid fid;
	uint32_t size;
};
/* GETXATTR and LISTXATTR reply: the full size, and the value (empty when
 * the request's size was 0). */
struct msg_sized_rep {
	uint32_t size;
	struct msg_bytes value;
};

struct msg_removexattr_req {
	struct cairn_fid fid;
	struct msg_str name;
};

struct msg_fallocate_req {
	struct cairn_fid fid;
	uint32_t mode;
	uint64_t off, len;
};

struct msg_status_rep {
	struct msg_bytes text;
};

/*
 * ORPHAN_DROP request: count FIDs. To send, point fids at count FIDs (list
 * is then not read). A decoded request has fids NULL and list holding the
 * count encoded FIDs, walked with msg_fid_next; a struct with fids NULL
 * encodes list as it is.
 */
struct msg_orphan_drop_req {
	uint32_t count;
	const struct cairn_fid *fids;
	struct msg_bytes list;
};

/* One CB_BREAK record: fid, and the entry name in it (len 0: the object
 * itself); flags: CB_ORPHANED (lib/proto.h) or 0. */
struct msg_cbrec {
	struct cairn_fid fid;
	struct msg_str name;
	uint8_t flags;
};
/* CB_BREAK push: count records; walk them with msg_cbrec_next(). */
struct msg_cb_break {
	uint32_t count;
	struct msg_bytes recs;
};

/* Storage big enough for any request or reply struct of this header. */
union msg_any {
	struct msg_fid fid;
	struct msg_attr attr;
	struct msg_attr2 attr2;
	struct msg_hello_req hello_req;
	struct msg_hello_rep hello_rep;
	struct msg_auth_req auth_req;
	struct msg_auth_rep auth_rep;
	struct msg_lookup_req lookup_req;
	struct msg_setattr_req setattr_req;
	struct msg_create_req create_req;
	struct msg_create_rep create_rep;
	struct msg_symlink_req symlink_req;
	struct msg_readlink_rep readlink_rep;
	struct msg_link_req link_req;
	struct msg_remove_req remove_req;
	struct msg_removes_req removes_req;
	struct msg_removes_rep removes_rep;
	struct msg_creates_req creates_req;
	struct msg_creates_rep creates_rep;
	struct msg_rename_req rename_req;
	struct msg_readdir_req readdir_req;
	struct msg_readdir_rep readdir_rep;
	struct msg_bulkstat_req bulkstat_req;
	struct msg_bulkstat_rep bulkstat_rep;
	struct msg_read_req read_req;
	struct msg_read_rep read_rep;
	struct msg_write_req write_req;
	struct msg_writeattr_req writeattr_req;
	struct msg_createattr_req createattr_req;
	struct msg_fsync_req fsync_req;
	struct msg_wtoken_req wtoken_req;
	struct msg_fids_req fids_req;
	struct msg_fids_rep fids_rep;
	struct msg_lock_req lock_req;
	struct msg_getlk_rep getlk_rep;
	struct msg_lockd_rep lockd_rep;
	struct msg_lkreturn_req lkreturn_req;
	struct msg_statfs_rep statfs_rep;
	struct msg_setxattr_req setxattr_req;
	struct msg_getxattr_req getxattr_req;
	struct msg_listxattr_req listxattr_req;
	struct msg_sized_rep sized_rep;
	struct msg_removexattr_req removexattr_req;
	struct msg_fallocate_req fallocate_req;
	struct msg_status_rep status_rep;
	struct msg_orphan_drop_req orphan_drop_req;
	struct msg_cb_break cb_break;
};

/* --- descriptors ------------------------------------------------------------- */

enum {
	MSG_CHANGES = 1u << 0, /* changes server state */
	MSG_INLINE  = 1u << 1, /* pure read: the server runs it on the
				* connection's reader thread */
	MSG_DRC     = 1u << 2, /* outcome kept in the duplicate request
				* cache (repeating it is not harmless) */
	MSG_PUSH    = 1u << 3, /* server -> client; "reply" is the ack */
};

typedef void (*msg_enc_fn)(struct wbuf *w, const void *m);
typedef int (*msg_dec_fn)(struct rbuf *r, void *m);

struct msg_desc {
	uint16_t op;
	const char *name;       /* as in PROTOCOL.md: "LOOKUP" */
	unsigned flags;         /* MSG_* */
	/* The request and reply columns of PROTOCOL.md's message table,
	 * verbatim ("–" for an empty payload). */
	const char *req_layout;
	const char *rep_layout;
	/* Codec of the request (push: the push) and of the reply (push: the
	 * acknowledgement). A decoder reads all of r and returns 0 or
	 * -EPROTO; it does not require r to be at its end (msg_decode does). */
	msg_enc_fn req_enc;
	msg_dec_fn req_dec;
	msg_enc_fn rep_enc;
	msg_dec_fn rep_dec;
};

/* The descriptor of op, or NULL for an opcode that does not exist. */
const struct msg_desc *msg_desc(unsigned op);
/* Descriptors in opcode order: *n gets the count. */
const struct msg_desc *msg_descs(size_t *n);
/* The descriptor's name ("LOOKUP"), or "unknown". */
const char *msg_name(unsigned op);
/* Is flag (MSG_*) set for op? 0 for unknown opcodes. */
int msg_has(unsigned op, unsigned flag);

/*
 * Decode the request (reply = 0) or reply (reply = 1) payload of op into m
 * (the op's struct; union msg_any fits all). Returns 0, or -EPROTO with
 * *why (if why is non-NULL) set to a static reason: "unknown opcode",
 * "payload too short or a bad field", "trailing bytes".
 */
int msg_decode(unsigned op, int reply, const void *p, size_t len, void *m,
	       const char **why);
/* Append the request or reply payload of op, from m, to w. An unknown op
 * sets w->err = -EINVAL. */
void msg_encode(unsigned op, int reply, struct wbuf *w, const void *m);

/* --- streamed parts -------------------------------------------------------- */

/*
 * READDIR replies are built in place: begin reserves count and eof, each
 * entry is appended, end patches count and eof. Returns/takes the offset
 * of the reserved part.
 */
size_t msg_readdir_rep_begin(struct wbuf *w);
void msg_dirent_put(struct wbuf *w, const struct msg_dirent *e);
void msg_readdir_rep_end(struct wbuf *w, size_t at, uint32_t count, int eof);
/* BULKSTAT replies likewise: begin reserves the directory's attributes,
 * the new entry cookie, count and eof; entries go in with
 * msg_dirent_put; end patches the reserved part. */
size_t msg_bulkstat_rep_begin(struct wbuf *w);
void msg_bulkstat_rep_end(struct wbuf *w, size_t at,
			  const struct cairn_attr *dir, uint64_t new_cookie,
			  uint32_t count, int eof);
/* The encoded size of an entry with a name of namelen bytes. */
size_t msg_dirent_size(size_t namelen);
/* Iterate a decoded READDIR (or BULKSTAT) reply: it starts as rbuf over
 * rep->ents.
 * Returns 1 with *e filled, 0 at the end. Never fails on a reply that
 * msg_decode accepted. */
int msg_dirent_next(struct rbuf *it, struct msg_dirent *e);

/*
 * READ replies are built in place so the server reads straight into the
 * frame: reserve room for up to len bytes (returns where to put them, or
 * NULL and w->err), then finish with the attr and the byte count n <= len.
 */
uint8_t *msg_read_rep_reserve(struct wbuf *w, uint32_t len, size_t *at);
void msg_read_rep_finish(struct wbuf *w, size_t at,
			 const struct cairn_attr *a, uint32_t n);
/* GETXATTR/LISTXATTR replies in place, likewise: reserve cap bytes, then
 * finish with the full size and the bytes stored (n <= cap). */
uint8_t *msg_sized_rep_reserve(struct wbuf *w, uint32_t cap, size_t *at);
void msg_sized_rep_finish(struct wbuf *w, size_t at, uint32_t size,
			  uint32_t n);

/* Iterate a decoded ORPHAN_DROP's FIDs (rbuf over list), as
 * msg_dirent_next. */
int msg_fid_next(struct rbuf *it, struct cairn_fid *fid);

/* Iterate a decoded REMOVES request's entries (rbuf over list), as
 * msg_dirent_next. */
int msg_rment_next(struct rbuf *it, struct msg_rment *e);
int msg_lkent_next(struct rbuf *it, struct msg_lkent *e);
/* The status of entry i (< count) of a decoded REMOVES reply. */
int32_t msg_removes_status(const struct msg_removes_rep *p, uint32_t i);
/* msg_rment_next for a decoded REMOVESAT request. */
int msg_rment_at_next(struct rbuf *it, struct msg_rment *e);
/* Iterate a decoded CREATES request's entries, and its reply's (rbuf
 * over list), as msg_dirent_next. */
int msg_cent_next(struct rbuf *it, struct msg_cent *e);
int msg_centa_next(struct rbuf *it, struct msg_centa *e);
int msg_crep_next(struct rbuf *it, struct msg_crep *e);

/* CB_BREAK pushes, likewise: begin, a record each, end with the count. */
size_t msg_cb_break_begin(struct wbuf *w);
void msg_cbrec_put(struct wbuf *w, const struct msg_cbrec *rec);
void msg_cb_break_end(struct wbuf *w, size_t at, uint32_t count);
/* Iterate a decoded CB_BREAK (rbuf over recs), as msg_dirent_next. */
int msg_cbrec_next(struct rbuf *it, struct msg_cbrec *rec);

/* --- acceptability, shared by every receiver -------------------------------- */

/*
 * A path component as a local Linux file system takes it: 0, -ENAMETOOLONG
 * past CAIRN_NAME_MAX, -EINVAL when empty, "." or "..", or holding '/' or
 * NUL.
 */
int msg_name_check(const struct msg_str *s);
/* An extended attribute name: 0, -ERANGE when empty or past
 * CAIRN_XATTR_NAME_MAX, -EINVAL when holding NUL, -EOPNOTSUPP for
 * "system.*". */
int msg_xattr_name_check(const struct msg_str *s);
/* Copy s into dst (size >= s->len + 1) and NUL-terminate it; returns dst. */
char *msg_str_copy(char *dst, const struct msg_str *s);

#endif
